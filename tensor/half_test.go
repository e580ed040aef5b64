package tensor_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
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
	// A label out of range is an index error, not a shape mismatch: the data is wrong.
	e = requireOpError(t, tensor.OpCrossEntropy, tensor.ErrIndex, func() { tensor.CrossEntropy(a, s.Full(d, dtype.I64, 3, 2)) })
	require.Equal(t, "tensor: CrossEntropy: a label is not a class index of the logits' 3 classes (shapes [2 3] [2], "+
		"dtypes float32 int64, device cpu): cross_entropy: index 3 at position 0 is outside [0, 3)", e.Error())
	require.NotErrorIs(t, e, tensor.ErrShape)
	var ie *kernels.IndexError
	require.ErrorAs(t, e, &ie)
	require.Equal(t, int64(3), ie.Index)
	requireOpError(t, tensor.OpEmbedding, tensor.ErrIndex, func() { tensor.Embedding(a, s.Full(d, dtype.I64, 2, 1)) })
	requireOpError(t, tensor.OpDropout, tensor.ErrShape, func() { a.Dropout(1) })
	requireOpError(t, tensor.OpSum, tensor.ErrShape, func() { a.Sum(0, 0) })
	requireOpError(t, tensor.OpLinear, tensor.ErrShape, func() { tensor.Linear(a, a.T(), nil) })
	requireOpError(t, tensor.OpLayerNorm, tensor.ErrShape, func() { tensor.LayerNorm(a, b.Cast(dtype.F32), nil, 1e-5) })
	requireOpError(t, tensor.OpConcat, tensor.ErrShape, func() { tensor.Concat(0, a, b) })
	requireOpError(t, tensor.OpStack, tensor.ErrShape, func() { tensor.Stack(0, a, a.T()) })
	requireOpError(t, tensor.OpMSE, tensor.ErrShape, func() { tensor.MSE(a, a.T()) })
	requireOpError(t, "SetRequiresGrad", tensor.ErrDType, func() { s.Ones(d, dtype.I64, 1).SetRequiresGrad(true) })
}

// The gradients reaching F16 and BF16 leaves, through every op family's backward
// (broadcasts, strided views, saved indices and masks included), come back in the
// leaf's type and agree with the F32 gradients to the 16-bit type's precision.
func TestHalfGradientsAgreeWithF32(t *testing.T) {
	d := newCPU(t)
	r := rand.New(rand.NewPCG(1, 2))
	data := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		return v
	}
	ops := map[string]func(s *tensor.Scope, x, w in) in{
		"Linear":  func(_ *tensor.Scope, x, w in) in { return tensor.Linear(x, w, w.Slice(1, 0, 1).Squeeze(1)) },
		"MatMulT": func(_ *tensor.Scope, x, w in) in { return x.MatMul(w.T()) },
		"Softmax": func(_ *tensor.Scope, x, _ in) in { return x.Softmax(1) },
		"LayerNorm": func(_ *tensor.Scope, x, w in) in {
			return tensor.LayerNorm(x, w.Slice(0, 0, 1).Squeeze(0), w.Slice(0, 1, 2).Squeeze(0), 1e-5)
		},
		"Add":        func(_ *tensor.Scope, x, w in) in { return x.Add(w.Slice(0, 0, 1)) },
		"MulBcast":   func(_ *tensor.Scope, x, w in) in { return x.T().Mul(w.Slice(0, 0, 1).T()) },
		"SumMean":    func(_ *tensor.Scope, x, _ in) in { return x.Sum(1).Add(x.Mean(1)) },
		"GeluExp":    func(_ *tensor.Scope, x, _ in) in { return x.Gelu().Exp() },
		"Concat":     func(_ *tensor.Scope, x, w in) in { return tensor.Concat(0, x, w) },
		"Stack":      func(_ *tensor.Scope, x, w in) in { return tensor.Stack(1, x.Slice(0, 0, 5), w) },
		"LogSoftmax": func(_ *tensor.Scope, x, _ in) in { return x.LogSoftmax(0) },
		"Max":        func(_ *tensor.Scope, x, _ in) in { return x.Max(1) },
		"MSE":        func(_ *tensor.Scope, x, w in) in { return tensor.MSE(x.Slice(0, 0, 5), w) },
		"CE": func(s *tensor.Scope, x, _ in) in {
			return tensor.CrossEntropy(x, tensor.FromSlice(s, d, dtype.I64, []int64{1, 2, 3, 4, 5, 6}))
		},
		"Embedding": func(s *tensor.Scope, _, w in) in {
			return tensor.Embedding(w, tensor.FromSlice(s, d, dtype.I64, []int64{1, 2, 1, 4}, 2, 2))
		},
		"Dropout":   func(_ *tensor.Scope, x, _ in) in { return x.Dropout(0.3) },
		"SumTo":     func(_ *tensor.Scope, x, _ in) in { return x.SumTo(1, 8) },
		"PowScalar": func(_ *tensor.Scope, x, _ in) in { return x.Abs().PowScalar(1.5) },
		"Div":       func(_ *tensor.Scope, x, w in) in { return x.Slice(0, 0, 5).Div(w.Abs().AddScalar(1)) },
		"Expand":    func(_ *tensor.Scope, x, w in) in { return w.Slice(0, 0, 1).Expand(3, 8).Mul(x.Slice(0, 0, 3)) },
	}
	xd, wd := data(6*8), data(5*8)
	grads := func(name string, dt dtype.DType) ([]float32, []float32) {
		s := tensor.NewScope(tensor.WithGenerator(tensor.NewGenerator(3)))
		defer s.Close()
		x := f32(s, d, xd, 6, 8).Cast(dt).Detach().SetRequiresGrad(true)
		w := f32(s, d, wd, 5, 8).Cast(dt).Detach().SetRequiresGrad(true)
		y := ops[name](s, x, w)
		g := s.Ones(d, y.DType(), y.Shape()...)
		y.BackwardWith(tensor.BackwardOptions{Grad: g})
		var gx, gw []float32
		if x.Grad() != nil {
			require.Equal(t, dt, x.Grad().DType())
			gx = vals(x.Grad())
		}
		if w.Grad() != nil {
			require.Equal(t, dt, w.Grad().DType())
			gw = vals(w.Grad())
		}
		return gx, gw
	}
	for name := range ops {
		for _, dt := range []dtype.DType{dtype.F16, dtype.BF16} {
			t.Run(name+"/"+dt.String(), func(t *testing.T) {
				rx, rw := grads(name, dtype.F32)
				hx, hw := grads(name, dt)
				tol := 2e-2
				if dt == dtype.BF16 {
					tol = 8e-2
				}
				require.Equal(t, len(rx), len(hx))
				require.Equal(t, len(rw), len(hw))
				for i := range rx {
					require.InDelta(t, rx[i], hx[i], tol*(1+abs(rx[i])), "x element %d", i)
				}
				for i := range rw {
					require.InDelta(t, rw[i], hw[i], tol*(1+abs(rw[i])), "w element %d", i)
				}
				requireEmpty(t, d)
			})
		}
	}
}

// Products of operands of different floating types compute in the type they promote
// to; each operand's gradient comes back in its own type.
func TestMixedTypeProducts(t *testing.T) {
	d := newCPU(t)
	s := tensor.NewScope()
	x := f32(s, d, []float32{1, 2, 3, 4, 5, 6}, 2, 3).Cast(dtype.F16).Detach().SetRequiresGrad(true)
	w := f32(s, d, []float32{1, 0, 1, 0, 1, 0}, 2, 3).SetRequiresGrad(true)
	b := f32(s, d, []float32{1, 2}).Cast(dtype.BF16).Detach().SetRequiresGrad(true)
	y := tensor.Linear(x, w, b)
	require.Equal(t, dtype.F32, y.DType())
	require.Equal(t, []float32{5, 4, 11, 7}, vals(y))
	y.Sum().Backward()
	require.Equal(t, dtype.F16, x.Grad().DType())
	require.Equal(t, []float32{1, 1, 1, 1, 1, 1}, vals(x.Grad()))
	require.Equal(t, []float32{5, 7, 9, 5, 7, 9}, vals(w.Grad()))
	require.Equal(t, dtype.BF16, b.Grad().DType())
	require.Equal(t, []float32{2, 2}, vals(b.Grad()))
	z := x.MatMul(w.T())
	require.Equal(t, []float32{4, 2, 10, 5}, vals(z))
	s.Close()
	requireEmpty(t, d)
}

// CrossEntropy of F16 or BF16 logits reads them as they are (no F32 copy: the op
// allocates only the loss and lse) and gives the bits of converting them to F32 and
// running the F32 op: the loss rounded once to the logits' type, their gradient too.
func TestCrossEntropyOf16BitLogitsIsTheF32PathRounded(t *testing.T) {
	const n, c = 7, 9
	for _, d := range dataDevices(t) {
		for _, dt := range []dtype.DType{dtype.F16, dtype.BF16} {
			t.Run(d.Name+"/"+dt.String(), func(t *testing.T) {
				r := rand.New(rand.NewPCG(5, 6))
				data := make([]float32, n*c)
				for i := range data {
					data[i] = float32(r.NormFloat64() * 4)
				}
				s := tensor.NewScope()
				labels := tensor.FromSlice(s, d.Device, dtype.I64, []int64{1, 8, tensor.IgnoreIndex, 0, 4, 4, 7})
				x16 := f32(s, d.Device, data, n, c).Cast(dt).Detach().SetRequiresGrad(true)
				x32 := x16.Cast(dtype.F32).Detach().SetRequiresGrad(true)
				before := stats(t, d.Device).Allocation[alloc.StatAll].Allocated
				loss := tensor.CrossEntropy(x16, labels)
				require.Equal(t, int64(2), stats(t, d.Device).Allocation[alloc.StatAll].Allocated-before, "the loss and lse, no copy of the logits")
				require.Equal(t, dt, loss.DType())
				want := tensor.CrossEntropy(x32, labels)
				require.Equal(t, vals(want.Cast(dt)), vals(loss))
				loss.Backward()
				want.Backward()
				require.Equal(t, dt, x16.Grad().DType())
				require.Equal(t, vals(s.Bind(x32.Grad()).Cast(dt)), vals(x16.Grad()))
				s.Close()
				requireEmpty(t, d.Device)
			})
		}
	}
}
