package tensor_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
)

// Ops on F16 and BF16 tensors compute in float32 and round once: they agree with the
// F32 op on the same (rounded) inputs to the 16-bit type's precision.
func TestHalfPrecisionOpsAgreeWithF32(t *testing.T) {
	d := newCPU(t)
	r := rand.New(rand.NewPCG(1, 2))
	data := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		return v
	}
	ops := map[string]func(x, w *tensor.Tensor) *tensor.Tensor{
		"Linear":     func(x, w *tensor.Tensor) *tensor.Tensor { return tensor.Linear(x, w, nil) },
		"MatMulT":    func(x, w *tensor.Tensor) *tensor.Tensor { return x.MatMul(w.T()) },
		"Softmax":    func(x, _ *tensor.Tensor) *tensor.Tensor { return x.Softmax(1) },
		"LayerNorm":  func(x, _ *tensor.Tensor) *tensor.Tensor { return tensor.LayerNorm(x, nil, nil, 1e-5) },
		"Add":        func(x, w *tensor.Tensor) *tensor.Tensor { return x.Add(w.Slice(0, 0, 1)) },
		"SumMean":    func(x, _ *tensor.Tensor) *tensor.Tensor { return x.Sum(1).Add(x.Mean(1)) },
		"GeluExp":    func(x, _ *tensor.Tensor) *tensor.Tensor { return x.Gelu().Exp() },
		"Concat":     func(x, w *tensor.Tensor) *tensor.Tensor { return tensor.Concat(0, x, w) },
		"LogSoftmax": func(x, _ *tensor.Tensor) *tensor.Tensor { return x.LogSoftmax(0) },
	}
	for name, op := range ops {
		for _, dt := range []dtype.DType{dtype.F16, dtype.BF16} {
			t.Run(name+"/"+dt.String(), func(t *testing.T) {
				s := tensor.NewScope()
				x := f32(s, d, data(6*8), 6, 8).Cast(dt)
				w := f32(s, d, data(5*8), 5, 8).Cast(dt)
				half := op(x, w)
				require.Equal(t, dt, half.DType())
				ref := vals(op(x.Cast(dtype.F32), w.Cast(dtype.F32)).Cast(dt))
				tol := 1e-2
				if dt == dtype.BF16 {
					tol = 6e-2
				}
				got := vals(half)
				for i := range ref {
					require.InDelta(t, ref[i], got[i], tol*(1+abs(ref[i])), "element %d", i)
				}
				s.Close()
				requireEmpty(t, d)
			})
		}
	}
}

func abs(v float32) float64 {
	if v < 0 {
		return float64(-v)
	}
	return float64(v)
}

func TestErrorsNameOpShapesAndDTypes(t *testing.T) {
	d := newCPU(t)
	s := tensor.NewScope()
	defer s.Close()
	a, b := s.Ones(d, dtype.F32, 2, 3), s.Ones(d, dtype.F16, 4)
	e := requireOpError(t, tensor.OpAdd, tensor.ErrShape, func() { a.Add(b) })
	require.Equal(t, "tensor: Add: shapes do not broadcast (shapes [2 3] [4], dtypes float32 float16, device cpu): shape mismatch", e.Error())
	requireOpError(t, tensor.OpMatMul, tensor.ErrShape, func() { a.MatMul(a) })
	requireOpError(t, tensor.OpExp, tensor.ErrDType, func() { s.Ones(d, dtype.I64, 2).Exp() })
	requireOpError(t, tensor.OpCrossEntropy, tensor.ErrDType, func() { tensor.CrossEntropy(a, s.Zeros(d, dtype.I32, 2)) })
	e = requireOpError(t, tensor.OpCrossEntropy, tensor.ErrShape, func() { tensor.CrossEntropy(a, s.Full(d, dtype.I64, 3, 2)) })
	require.Contains(t, e.Error(), "3")
	requireOpError(t, tensor.OpEmbedding, tensor.ErrShape, func() { tensor.Embedding(a, s.Full(d, dtype.I64, 2, 1)) })
	requireOpError(t, tensor.OpDropout, tensor.ErrShape, func() { a.Dropout(1) })
	requireOpError(t, tensor.OpSum, tensor.ErrShape, func() { a.Sum(0, 0) })
	requireOpError(t, tensor.OpLinear, tensor.ErrShape, func() { tensor.Linear(a, a.T(), nil) })
	requireOpError(t, tensor.OpLayerNorm, tensor.ErrShape, func() { tensor.LayerNorm(a, b.Cast(dtype.F32), nil, 1e-5) })
	requireOpError(t, tensor.OpConcat, tensor.ErrShape, func() { tensor.Concat(0, a, b) })
	requireOpError(t, tensor.OpStack, tensor.ErrShape, func() { tensor.Stack(0, a, a.T()) })
	requireOpError(t, tensor.OpMSE, tensor.ErrShape, func() { tensor.MSE(a, a.T()) })
	requireOpError(t, "SetRequiresGrad", tensor.ErrDType, func() { s.Ones(d, dtype.I64, 1).SetRequiresGrad(true) })
}
