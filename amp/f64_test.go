package amp_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/amp"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/optim"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/tensortest"
)

// Autocast leaves F64 alone, as PyTorch's (is_autocast_eligible refuses float64): an
// op of any autocast class on F64 inputs computes and returns F64, with no cast; F32
// inputs of the same op next to it are cast as usual.
func TestAutocastLeavesF64Alone(t *testing.T) {
	d := tensortest.CPU(t)
	data := []float64{0.1, 0.2, 0.3, 0.4}
	for _, low := range []dtype.DType{dtype.F16, dtype.BF16} {
		root := tensor.NewScope()
		ac := autocast(t, root, low)
		x := tensor.FromSlice(ac, d, dtype.F64, data, 2, 2)
		a := f32(ac, d, []float32{0.25, 0.5, 0.75, 1}, 2, 2)
		labels := tensor.FromSlice(ac, d, dtype.I64, []int64{0, 1})
		// Every autocast class, and an F64 operand beside an F32 one (which alone is
		// cast: F64 with the low type promotes to F64).
		for name, y := range map[string]*tensor.Tensor{
			"mm (lower)":             x.MatMul(x),
			"linear (lower)":         tensor.Linear(x, x, nil),
			"exp (fp32)":             x.Exp(),
			"layer_norm (fp32)":      tensor.LayerNorm(x, nil, nil, 1e-5),
			"cross_entropy (fp32)":   tensor.CrossEntropy(x, labels),
			"softmax (fp32 result)":  x.Softmax(-1),
			"sum (fp32 result)":      x.Sum(),
			"relu (none)":            x.Relu(),
			"mm with an f32 operand": x.MatMul(a),
		} {
			require.Equal(t, dtype.F64, y.DType(), "%v: %s", low, name)
		}
		require.Equal(t, low, a.MatMul(a).DType(), "F32 operands are cast as usual")
		first := tensor.ToSlice[float64](x.MatMul(x))[0]
		require.InDelta(t, data[0]*data[0]+data[1]*data[2], first, 1e-15, "computed in float64, not in %v", low)
		root.Close()
		tensortest.RequireEmpty(t, d)
	}
}

// The gradient scaler unscales F64 gradients in float64 (a scaled gradient beyond
// float32's range is finite, so the step goes on) and the step runs in float64 (an LR
// float32 would flush to zero still moves the parameter).
func TestGradScalerStepsF64Parameters(t *testing.T) {
	d := tensortest.CPU(t)
	s := tensor.NewScope()
	p := tensor.FromSlice(s, d, dtype.F64, []float64{1, 2}).AsParameter()
	opt, err := optim.NewSGD([]*tensor.Tensor{p}, optim.SGDConfig{LR: 1e-300})
	require.NoError(t, err)
	sc, err := amp.NewGradScaler(amp.ScalerConfig{})
	require.NoError(t, err)
	sc.Scale(p.Mul(tensor.FromSlice(s, d, dtype.F64, []float64{1e300, 0.5})).Sum()).Backward()
	s.Close()
	require.Equal(t, 65536e300, tensor.ToSlice[float64](p.Grad())[0], "scaled, finite in float64")
	stepped, err := sc.Step(opt)
	require.NoError(t, err)
	require.True(t, stepped, "no Inf found")
	require.NoError(t, sc.Update())
	got := tensor.ToSlice[float64](p)
	require.Equal(t, 0.0, got[0], "1 - 1e-300·1e300")
	require.Equal(t, 2-1e-300*0.5, got[1])
	require.False(t, math.IsInf(got[0], 0))
	opt.Release()
	p.Release()
	tensortest.RequireEmpty(t, d)
}
