package tensor_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
)

func TestMetaDeviceAllocatesAndComputesNothing(t *testing.T) {
	meta := newSim(t, 1<<40, false)
	s := tensor.NewScope(tensor.WithGenerator(tensor.NewGenerator(1)))
	// 4 GiB of activations, instantly.
	x := s.Randn(meta, dtype.F32, 1<<15, 1<<15)
	y := x.Exp().Add(x).Sum(1)
	require.Equal(t, []int{1 << 15}, y.Shape())
	require.Equal(t, 3*x.Bytes()+y.Bytes(), requested(t, meta), "x, the Exp and the Add (the scope still owns them), the sum")
	require.Nil(t, x.Storage().Host())
	requireOpError(t, "Item", tensor.ErrNoData, func() { y.Sum().Item() })
	requireOpError(t, "ToSlice", tensor.ErrNoData, func() { vals(y) })
	empty := s.Zeros(meta, dtype.F32, 0)
	require.Equal(t, []float32{}, vals(empty), "an empty tensor has nothing to read")
	cpuDev := newCPU(t)
	requireOpError(t, tensor.OpTo, tensor.ErrNoData, func() { y.To(cpuDev) })
	s.Close()
	requireEmpty(t, meta)
	requireEmpty(t, cpuDev)
}

// noKernels is a device without CPU-addressable memory, as cuda is.
type noKernels struct{ device.Device }

func (noKernels) Kind() device.Kind           { return device.CUDA }
func (noKernels) Name() string                { return "cuda:0" }
func (noKernels) Residency() device.Residency { return device.Remote }

func TestDeviceWithoutKernelsIsAClearError(t *testing.T) {
	gpu := &noKernels{newSim(t, 64<<20, false)}
	s := tensor.NewScope()
	defer s.Close()
	e := requireOpError(t, "Full", tensor.ErrNoKernels, func() { s.Zeros(gpu, dtype.F32, 2) })
	require.Contains(t, e.Error(), "cuda:0")
	cpuDev := newCPU(t)
	x := s.Ones(cpuDev, dtype.F32, 2)
	onGPU := x.To(gpu)
	require.Equal(t, int64(8), requested(t, gpu), "copies need no kernels")
	e = requireOpError(t, tensor.OpExp, tensor.ErrNoKernels, func() { onGPU.Exp() })
	require.Equal(t, "cuda:0", e.Device)
	s.Close()
	requireEmpty(t, gpu)
}

func TestOutOfMemoryInsideAnOpIsRecoverable(t *testing.T) {
	d := newSim(t, 30<<20, false)
	s := tensor.NewScope()
	x := s.Zeros(d, dtype.F32, 3<<20)       // 12 MiB
	ballast := s.Zeros(d, dtype.F32, 3<<20) // 12 MiB more: Exp's result does not fit
	before := stats(t, d)
	err := tensor.Try(func() { x.Exp() })
	var oom *alloc.OOMError
	require.True(t, errors.As(err, &oom), "got %v", err)
	require.ErrorIs(t, err, device.ErrOutOfMemory)
	var te *tensor.Error
	require.True(t, errors.As(err, &te))
	require.Equal(t, tensor.OpExp, te.Op)
	after := stats(t, d)
	require.Equal(t, before.AllocatedBytes[alloc.StatAll].Current, after.AllocatedBytes[alloc.StatAll].Current)
	require.Equal(t, 2, s.Len(), "the failed op left no handle behind")
	ballast.Release()
	y := x.Exp() // the retry fits
	require.Equal(t, x.Bytes()+y.Bytes(), requested(t, d))
	s.Close()
	requireEmpty(t, d)
}

// Running out of memory inside a backward rule is an error naming the rule: the
// gradients in flight are released, and the step can be retried once memory is free.
func TestOutOfMemoryInsideBackwardIsRecoverable(t *testing.T) {
	d := newSim(t, 30<<20, false)
	s := tensor.NewScope()
	x := s.Zeros(d, dtype.F32, 3<<20).SetRequiresGrad(true) // 12 MiB
	ex := x.Exp()                                           // 12 MiB more, which Exp saves
	loss := ex.Sum()
	before := requested(t, d)
	err := tensor.Try(loss.Backward) // Exp's gradient (12 MiB) does not fit
	var oom *alloc.OOMError
	require.ErrorAs(t, err, &oom)
	require.ErrorIs(t, err, tensor.ErrGrad)
	require.Contains(t, err.Error(), "): autograd: backward of Exp#1: tensor: exp backward: allocating [3145728] float32")
	require.Nil(t, x.Grad())
	require.Equal(t, before, requested(t, d), "no gradient in flight is left")
	loss.Release()
	ex.Release()
	require.Equal(t, x.Bytes(), requested(t, d), "the graph went with its outputs")
	retry := x.Sum() // its backward needs only x's gradient: it fits now
	retry.Backward()
	require.Equal(t, 2*x.Bytes()+retry.Bytes(), requested(t, d), "x, its gradient and the loss")
	s.Close()
	requireEmpty(t, d)
}
