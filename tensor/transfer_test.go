package tensor_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/tensortest"
)

func TestToCopiesInEveryDirection(t *testing.T) {
	host, backed, gpu0, gpu1 := newCPU(t), newSim(t, 64<<20, true), tensortest.NewRemote(t, "cuda:0"), tensortest.NewRemote(t, "cuda:1")
	require.Equal(t, device.Remote, gpu0.Residency())
	s := tensor.NewScope()
	want := []float32{1, 2, 3, 4, 5, 6}
	x := tensor.FromSlice(s, host, dtype.F32, want, 2, 3)
	for _, path := range [][]device.Device{
		{gpu0, host},
		{gpu0, gpu1, host},
		{gpu0, gpu0, backed, host},
		{backed, gpu1, host},
	} {
		y := x
		for _, d := range path {
			y = y.To(d)
			require.Equal(t, d, y.Device())
			require.Equal(t, want, vals(y), "on %s", d.Name())
		}
	}
	// A GPU tensor is read back without kernels: values, a strided view of it, one
	// element.
	g := tensor.FromSlice(s, gpu1, dtype.F16, want, 2, 3)
	require.Equal(t, device.Remote, g.Storage().Residency())
	require.Nil(t, g.Storage().Host())
	require.Equal(t, []float32{1, 4, 2, 5, 3, 6}, vals(g.T()), "a transposed view, read back")
	require.Equal(t, []float32{5, 6}, vals(g.Slice(0, 1, 2).Slice(1, 1, 3)))
	require.Equal(t, 6.0, g.Slice(1, 2, 3).Slice(0, 1, 2).Item())
	idx := tensor.FromSlice(s, gpu1, dtype.I64, []int64{7, -3})
	require.Equal(t, []int64{7, -3}, tensor.ToSlice[int64](idx))
	// Moving a strided GPU tensor needs a copy on the GPU first, which needs kernels.
	requireOpError(t, tensor.OpTo, tensor.ErrNoKernels, func() { g.T().To(host) })
	requireOpError(t, tensor.OpExp, tensor.ErrNoKernels, func() { g.Exp() })
	// Nothing to read where there is no data, and no data to send from there.
	meta := newSim(t, 64<<20, false)
	m := x.To(meta)
	require.Equal(t, device.Meta, m.Storage().Residency())
	requireOpError(t, tensor.OpTo, tensor.ErrNoData, func() { m.To(gpu0) })
	s.Close()
	for _, d := range []device.Device{host, backed, gpu0, gpu1, meta} {
		requireEmpty(t, d)
	}
}

func TestToCarriesTheGradientBack(t *testing.T) {
	host, gpu := newCPU(t), tensortest.NewRemote(t, "cuda:0")
	s := tensor.NewScope()
	x := tensor.FromSlice(s, host, dtype.F32, []float32{1, 2, 3}).SetRequiresGrad(true)
	back := x.To(gpu).To(host)
	back.Sum().Backward()
	require.Equal(t, []float32{1, 1, 1}, vals(x.Grad()), "the gradient went cpu -> cuda:0 -> cpu without kernels on the GPU")
	s.Close()
	x.Release()
	requireEmpty(t, host)
	requireEmpty(t, gpu)
}
