package tensor_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/tensortest"
)

func TestAddcmulAddcdivKnownValues(t *testing.T) {
	for _, dev := range dataDevices(t) {
		t.Run(dev.Name, func(t *testing.T) {
			d := dev.Device
			s := tensor.NewScope()
			x := f32(s, d, []float32{1, 2, 3}, 3).SetRequiresGrad(true)
			a := f32(s, d, []float32{2, 4}, 2, 1).SetRequiresGrad(true)
			b := f32(s, d, []float32{0.5, -1, 2}, 3).SetRequiresGrad(true)
			// By hand: x + 0.5·a·b and x + 0.5·a/b over the broadcast [2, 3].
			mul := x.Addcmul(a, b, 0.5)
			require.Equal(t, []int{2, 3}, mul.Shape())
			require.Equal(t, []float32{1.5, 1, 5, 2, 0, 7}, vals(mul))
			div := x.Addcdiv(a, b, 0.5)
			require.Equal(t, []float32{3, 1, 3.5, 5, 0, 4}, vals(div))

			mul.Sum().Backward()
			require.Equal(t, []float32{2, 2, 2}, vals(x.Grad()), "t gets g summed over the broadcast rows")
			require.Equal(t, []float32{0.75, 0.75}, vals(a.Grad()), "0.5·Σb")
			require.Equal(t, []float32{3, 3, 3}, vals(b.Grad()), "0.5·Σa")
			for _, p := range []*tensor.Tensor{x, a, b} {
				p.ZeroGrad(true)
			}
			div.Sum().Backward()
			require.Equal(t, []float32{2, 2, 2}, vals(x.Grad()))
			require.Equal(t, []float32{0.75, 0.75}, vals(a.Grad()), "0.5·Σ1/b = 0.5·(2 − 1 + 0.5)")
			require.Equal(t, []float32{-12, -3, -0.75}, vals(b.Grad()), "−0.5·Σa/b² = −3/b²")
			s.Close()
			requireEmpty(t, d)
		})
	}
}

// addcChecks are the gradient checks of Addcmul and Addcdiv.
func addcChecks() []gc {
	return []gc{
		{name: "Addcmul", op: tensor.OpAddcmul, shapes: [][]int{{2, 3}, {3}, {2, 1}}, f: func(_ *tensor.Scope, x []in) in { return x[0].Addcmul(x[1], x[2], -1.5) }},
		{name: "Addcdiv", op: tensor.OpAddcdiv, shapes: [][]int{{3}, {2, 3}, {2, 3}}, values: func(r *rand.Rand) float64 { return 0.5 + r.Float64() },
			f: func(_ *tensor.Scope, x []in) in { return x[0].Addcdiv(x[1], x[2], 2) }},
	}
}

func TestGradcheckAddcmulAddcdiv(t *testing.T) { runChecks(t, newCPU(t), addcChecks()) }

// What each op keeps is what its wanted gradients read: with only a wanting one, b
// (both ops); with b wanting one too, a and b (Addcdiv); t never.
func TestAddcSavesWhatGradientsRead(t *testing.T) {
	for _, dev := range []tensortest.Device{{Name: "cpu", Device: newCPU(t)}, {Name: "meta", Device: tensortest.Meta(t)}} {
		t.Run(dev.Name, func(t *testing.T) {
			d := dev.Device
			for _, op := range []func(x, a, b *tensor.Tensor) *tensor.Tensor{
				func(x, a, b *tensor.Tensor) *tensor.Tensor { return x.Addcmul(a, b, 3) },
				func(x, a, b *tensor.Tensor) *tensor.Tensor { return x.Addcdiv(a, b, 3) },
			} {
				s := tensor.NewScope()
				x, b := s.Ones(d, dtype.F32, 8, 16), s.Ones(d, dtype.F32, 16)
				a := s.Ones(d, dtype.F32, 8, 1).SetRequiresGrad(true)
				y := op(x, a, b)
				x.Release()
				b.Release()
				tensortest.RequireLive(t, d, "with a wanting a gradient", tensortest.Sizes(a, b, y)...)
				y.Release()
				s.Close()
				requireEmpty(t, d)
			}
			s := tensor.NewScope()
			x, a := s.Ones(d, dtype.F32, 4), s.Ones(d, dtype.F32, 4)
			b := s.Ones(d, dtype.F32, 4).SetRequiresGrad(true)
			y := x.Addcdiv(a, b, 1)
			x.Release()
			a.Release()
			tensortest.RequireLive(t, d, "with b wanting a gradient", tensortest.Sizes(a, b, y)...)
			s.Close()
			requireEmpty(t, d)
		})
	}
}

func TestAddcPromotesAndChecks(t *testing.T) {
	d := newCPU(t)
	s := tensor.NewScope()
	h := s.Ones(d, dtype.F16, 2)
	y := h.Addcmul(h, s.Full(d, dtype.F32, 2, 2), 1)
	require.Equal(t, dtype.F32, y.DType())
	require.Equal(t, []float32{3, 3}, vals(y))
	requireOpError(t, tensor.OpAddcdiv, tensor.ErrShape, func() { h.Addcdiv(h, s.Ones(d, dtype.F32, 3), 1) })
	requireOpError(t, tensor.OpAddcmul, tensor.ErrDType, func() { h.Addcmul(h, s.Ones(d, dtype.I64, 2), 1) })
	// value is a constant of the type the op computes in, as AddScalar's number is: one
	// that overflows it (float32 here) is refused, not turned into inf; F64 takes it.
	before := requested(t, d)
	e := requireOpError(t, tensor.OpAddcmul, tensor.ErrDType, func() { h.Addcmul(h, h, 1e39) })
	require.Contains(t, e.Error(), "1e+39")
	requireOpError(t, tensor.OpAddcdiv, tensor.ErrDType, func() { y.Addcdiv(y, y, -1e39) })
	require.Equal(t, before, requested(t, d))
	z := s.Ones(d, dtype.F64, 1)
	require.Equal(t, []float64{1 + 1e39}, tensor.ToSlice[float64](z.Addcmul(z, z, 1e39)))
	s.Close()
	requireEmpty(t, d)
}
