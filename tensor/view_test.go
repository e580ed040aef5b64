package tensor_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
)

func TestViewsShareStorageAndPlaceElements(t *testing.T) {
	for _, td := range dataDevices(t) {
		t.Run(td.Name, func(t *testing.T) {
			d := td.Device
			s := tensor.NewScope()
			x := f32(s, d, []float32{0, 1, 2, 3, 4, 5}, 2, 3)
			before := requested(t, d)

			tr := x.T()
			require.Equal(t, []int{3, 2}, tr.Shape())
			require.Equal(t, []float32{0, 3, 1, 4, 2, 5}, vals(tr))
			require.False(t, tr.IsContiguous())

			p := f32(s, d, []float32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, 2, 3, 2).Permute(2, 0, 1)
			require.Equal(t, []int{2, 2, 3}, p.Shape())
			require.Equal(t, []float32{0, 2, 4, 6, 8, 10, 1, 3, 5, 7, 9, 11}, vals(p))

			sl := x.Slice(1, 1, 3)
			require.Equal(t, []float32{1, 2, 4, 5}, vals(sl))
			require.Equal(t, []float32{3, 4, 5}, vals(x.Slice(0, -1, 2)))
			require.Equal(t, []float32{0, 1, 2, 0, 1, 2}, vals(x.Slice(0, 0, 1).Expand(2, 3)))
			require.Equal(t, []float32{0, 0, 1, 1, 2, 2}, vals(x.Slice(0, 0, 1).Reshape(3, 1).Expand(-1, 2)))
			u := x.Unsqueeze(0)
			require.Equal(t, []int{1, 2, 3}, u.Shape())
			require.Equal(t, []int{2, 3, 1}, x.Unsqueeze(-1).Shape())
			require.Equal(t, []int{2, 3}, u.Squeeze(0).Shape())
			require.Equal(t, []int{3, 2}, x.View(-1, 2).Shape())
			require.Equal(t, []float32{0, 3, 1, 4, 2, 5}, vals(tr.Reshape(6)))
			for _, v := range []*tensor.Tensor{tr, sl, u, x.Detach(), x.Contiguous()} {
				require.Same(t, x.Storage(), v.Storage())
			}
			require.Equal(t, before+48+24, requested(t, d), "views allocate nothing; only the permuted input and the reshape copy do")

			requireOpError(t, tensor.OpView, tensor.ErrShape, func() { tr.View(6) })
			requireOpError(t, tensor.OpReshape, tensor.ErrShape, func() { x.Reshape(4, -1) })
			requireOpError(t, tensor.OpReshape, tensor.ErrShape, func() { x.Reshape(-1, -1) })
			requireOpError(t, tensor.OpSlice, tensor.ErrShape, func() { x.Slice(1, 2, 1) })
			requireOpError(t, tensor.OpExpand, tensor.ErrShape, func() { x.Expand(3, 3) })
			requireOpError(t, tensor.OpSqueeze, tensor.ErrShape, func() { x.Squeeze(0) })
			requireOpError(t, tensor.OpPermute, tensor.ErrShape, func() { x.Permute(0, 0) })
			requireOpError(t, tensor.OpTranspose, tensor.ErrShape, func() { x.Transpose(0, 2) })
			s.Close()
			requireEmpty(t, d)
		})
	}
}

func TestCastCloneAndTo(t *testing.T) {
	cpuDev, simDev := newCPU(t), newSim(t, 64<<20, true)
	s := tensor.NewScope()
	x := f32(s, cpuDev, []float32{1.5, -2.25, 3}, 3)
	h := x.Cast(dtype.BF16)
	require.Equal(t, int64(6), h.Bytes())
	require.Equal(t, []float32{1.5, -2.25, 3}, vals(h))
	require.Equal(t, []int32{1, -2, 3}, tensor.ToSlice[int32](x.Cast(dtype.I32)))
	same := x.Cast(dtype.F32)
	require.Same(t, x.Storage(), same.Storage())

	onSim := x.To(simDev)
	require.Same(t, simDev, onSim.Device())
	require.Equal(t, []float32{1.5, -2.25, 3}, vals(onSim))
	require.Equal(t, int64(12), requested(t, simDev))
	m := f32(s, cpuDev, []float32{0, 1, 2, 3, 4, 5}, 2, 3).T().To(simDev)
	require.Equal(t, []float32{0, 3, 1, 4, 2, 5}, vals(m), "a strided tensor is copied contiguous")
	require.Equal(t, int64(12+24), requested(t, simDev))
	back := onSim.Exp().To(cpuDev)
	require.InDeltaSlice(t, []float32{4.481689, 0.105399, 20.085537}, vals(back), 1e-5)
	cl := x.Clone()
	require.NotSame(t, x.Storage(), cl.Storage())
	requireOpError(t, tensor.OpAdd, tensor.ErrDevice, func() { x.Add(onSim) })
	requireOpError(t, tensor.OpCast, tensor.ErrDType, func() { x.Cast(dtype.Invalid) })
	s.Close()
	requireEmpty(t, cpuDev)
	requireEmpty(t, simDev)
}

// To the tensor's own device is a new handle over the same storage, recorded so that
// the gradient flows through it.
func TestToTheSameDeviceIsAView(t *testing.T) {
	d := newCPU(t)
	s := tensor.NewScope()
	x := f32(s, d, []float32{1, 2}).SetRequiresGrad(true)
	y := x.To(d)
	require.Same(t, x.Storage(), y.Storage())
	e := requireOpError(t, "Fill", tensor.ErrGrad, func() { y.Fill(0) })
	require.Contains(t, e.Error(), "the output of To")
	y.MulScalar(3).Sum().Backward()
	require.Equal(t, []float32{3, 3}, vals(x.Grad()))
	s.Close()
	requireEmpty(t, d)
}

// Argmax gives the I64 position of the first maximum along an axis, of any element
// type, and records nothing.
func TestArgmax(t *testing.T) {
	d := newCPU(t)
	s := tensor.NewScope()
	x := f32(s, d, []float32{1, 5, 5, 7, 0, 7}, 2, 3).SetRequiresGrad(true)
	a := x.Argmax(1)
	require.Equal(t, dtype.I64, a.DType())
	require.Equal(t, []int64{1, 0}, tensor.ToSlice[int64](a), "the first of equal maxima")
	require.False(t, a.RequiresGrad())
	require.Equal(t, []int64{1, 0, 1}, tensor.ToSlice[int64](x.Argmax(0)))
	i := tensor.FromSlice(s, d, dtype.I32, []int32{3, -1, 9, 2})
	require.Equal(t, []int64{2}, tensor.ToSlice[int64](i.Argmax(-1)))
	require.Equal(t, 9.0, i.Slice(0, 2, 3).Item(), "Item of an integer tensor")
	s.Close()
	requireEmpty(t, d)
}
