package gradcheck_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device/cpu"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/gradcheck"
	"github.com/subletml/sublet/tensor/tensortest"
)

func TestCheckPassesRightGradientsAndCatchesWrongOnes(t *testing.T) {
	d, err := cpu.New(cpu.Options{Capacity: 1 << 28})
	require.NoError(t, err)
	in := []gradcheck.Input{{Shape: []int{2, 2}, Data: []float64{0.3, -0.7, 1.1, 0.5}}, {Shape: []int{2}, Data: []float64{0.9, -0.4}}}
	f := func(s *tensor.Scope, x []*tensor.Tensor) *tensor.Tensor { return x[0].Mul(x[1]).Tanh() }
	require.NoError(t, gradcheck.Check(d, f, in, gradcheck.Options{}))

	wrong := func(s *tensor.Scope, x []*tensor.Tensor) *tensor.Tensor {
		y := f(s, x)
		if y.RequiresGrad() {
			y.RegisterHook(func(_ *tensor.Scope, g *tensor.Tensor) *tensor.Tensor { return g.MulScalar(1.1) })
		}
		return y
	}
	err = gradcheck.Check(d, wrong, in, gradcheck.Options{})
	require.Error(t, err)
	require.Contains(t, err.Error(), "input 1 element 1")

	require.Error(t, gradcheck.Check(d, f, []gradcheck.Input{{Shape: []int{3}, Data: []float64{1}}}, gradcheck.Options{}))
	a, err := alloc.For(d)
	require.NoError(t, err)
	require.Zero(t, a.Stats().AllocatedBytes[alloc.StatAll].Current)
	tensortest.RequireEmpty(t, d)
}

// Check releases everything it made when f panics (the panic goes on), handles a
// scalar output (rank 0), and an input the output does not depend on (gradient 0).
func TestCheckReleasesAndEdgeCases(t *testing.T) {
	d := tensortest.CPU(t)
	in := []gradcheck.Input{{Shape: []int{3}, Data: []float64{0.5, -1, 2}}, {Shape: []int{2}, Data: []float64{1, 1}}}
	scalar := func(s *tensor.Scope, x []*tensor.Tensor) *tensor.Tensor { return x[0].Exp().Sum() }
	require.NoError(t, gradcheck.Check(d, scalar, in, gradcheck.Options{}))
	tensortest.RequireEmpty(t, d)

	calls := 0
	failing := func(s *tensor.Scope, x []*tensor.Tensor) *tensor.Tensor {
		calls++
		y := x[0].Exp()
		if calls == 3 {
			y.Add(x[1]) // [3] + [2]: a shape error after allocating
		}
		return y
	}
	err := tensor.Try(func() { _ = gradcheck.Check(d, failing, in, gradcheck.Options{}) })
	require.ErrorIs(t, err, tensor.ErrShape, "f's panic goes on")
	require.Equal(t, 3, calls)
	tensortest.RequireEmpty(t, d)
}

// Checks run in F64 by default, with PyTorch's tolerances: a gradient off by 5e-3
// relative, within what float32's round-off needs, is caught; F32 is there when asked
// for.
func TestCheckF64ByDefaultAndF32OnRequest(t *testing.T) {
	d := tensortest.CPU(t)
	in := []gradcheck.Input{{Shape: []int{2, 3}, Data: []float64{0.3, -0.7, 1.1, 0.5, -1.3, 0.9}}}
	var dtypes []dtype.DType
	slightlyWrong := func(s *tensor.Scope, x []*tensor.Tensor) *tensor.Tensor {
		dtypes = append(dtypes, x[0].DType())
		y := x[0].Tanh().Mul(x[0]).Sum(1)
		if y.RequiresGrad() {
			y.RegisterHook(func(_ *tensor.Scope, g *tensor.Tensor) *tensor.Tensor { return g.MulScalar(1 + 5e-3) })
		}
		return y
	}
	err := gradcheck.Check(d, slightlyWrong, in, gradcheck.Options{})
	require.Error(t, err, "float64 sees a 5e-3 error")
	require.Equal(t, dtype.F64, dtypes[0])
	dtypes = nil
	require.NoError(t, gradcheck.Check(d, slightlyWrong, in, gradcheck.Options{DType: dtype.F32}), "float32's tolerances do not")
	require.Equal(t, dtype.F32, dtypes[0])

	// Inputs that F32 cannot hold are rounded to it first, explicitly.
	f := func(s *tensor.Scope, x []*tensor.Tensor) *tensor.Tensor { return x[0].Exp() }
	require.NoError(t, gradcheck.Check(d, f, []gradcheck.Input{{Shape: []int{2}, Data: []float64{0.1, 1.0 / 3}}}, gradcheck.Options{DType: dtype.F32}))

	err = gradcheck.Check(d, f, in, gradcheck.Options{DType: dtype.F16})
	require.ErrorContains(t, err, "use dtype.F64 (the default) or dtype.F32")
	tensortest.RequireEmpty(t, d)
}
