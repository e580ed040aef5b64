package tensor_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
)

// Norm reads its input once and gives the bits of the composition it replaces,
// x·x summed and its root, on every device with data.
func TestNormMatchesMulSumSqrt(t *testing.T) {
	for _, dev := range dataDevices(t) {
		t.Run(dev.Name, func(t *testing.T) {
			d := dev.Device
			s := tensor.NewScope(tensor.NoGrad(), tensor.WithGenerator(tensor.NewGenerator(3)))
			for _, dt := range []dtype.DType{dtype.F32, dtype.F64} {
				for _, shape := range [][]int{{1000}, {37, 70}, {3, 1 << 16}} {
					x := s.Randn(d, dt, shape...)
					got, want := x.Norm(), x.Mul(x).Sum().Sqrt()
					require.Empty(t, got.Shape())
					require.Equal(t, want.Item(), got.Item(), "%v %v", dt, shape)
				}
			}
			s.Close()
			requireEmpty(t, d)
		})
	}
}

func TestNormGradientAndEdges(t *testing.T) {
	d := newCPU(t)
	s := tensor.NewScope()
	x := f32(s, d, []float32{3, 0, -4, 0, 0, 12}, 2, 3).SetRequiresGrad(true)
	n := x.Norm()
	require.Equal(t, 13.0, n.Item())
	n.Backward()
	for i, g := range vals(x.Grad()) { // x·(g/‖x‖), each rounded to F32
		require.InDelta(t, []float64{3.0 / 13, 0, -4.0 / 13, 0, 0, 12.0 / 13}[i], g, 1e-7, "x/‖x‖")
	}

	z := s.Zeros(d, dtype.F32, 4).SetRequiresGrad(true)
	zn := z.Norm()
	require.Equal(t, 0.0, zn.Item())
	zn.Backward()
	require.Equal(t, []float32{0, 0, 0, 0}, vals(z.Grad()), "a zero norm passes 0 back, as PyTorch's")

	// F16: the squares sum in F32 (300²·1000 is past F16's largest), the norm fits.
	h := s.Full(d, dtype.F16, 300, 1000)
	hn := h.Norm()
	require.Equal(t, dtype.F16, hn.DType())
	require.InDelta(t, 300*math.Sqrt(1000), hn.Item(), 300*math.Sqrt(1000)/1024)
	s.Close()
	requireEmpty(t, d)
}

// A scalar's shape is nil, and its strides empty, whichever op made it (the ops take
// their layouts from a shared table, which keeps it so).
func TestScalarLayout(t *testing.T) {
	d := newCPU(t)
	s := tensor.NewScope()
	x := s.Ones(d, dtype.F32, 2, 3)
	for name, y := range map[string]*tensor.Tensor{"Sum": x.Sum(), "Reshape": x.Sum(0).Sum().Reshape(), "Mean": x.Mean()} {
		require.Nil(t, y.Shape(), name)
		require.Equal(t, []int{}, y.Strides(), name)
	}
	s.Close()
	requireEmpty(t, d)
}
