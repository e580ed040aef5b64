package amp_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/amp"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/cpu"
	"github.com/subletml/sublet/device/sim"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
)

const MiB = 1 << 20

// newCPU returns a fresh CPU device (a fresh allocator with it).
func newCPU(t testing.TB) device.Device {
	d, err := cpu.New(cpu.Options{Capacity: 1 << 30})
	require.NoError(t, err)
	cleanupAllocator(t, d)
	return d
}

// newMeta returns a simulated device without data: memory is accounted, ops compute
// nothing.
func newMeta(t testing.TB) device.Device {
	d, err := sim.New(sim.Options{Capacity: 1 << 40})
	require.NoError(t, err)
	cleanupAllocator(t, d)
	return d
}

func cleanupAllocator(t testing.TB, d device.Device) {
	t.Cleanup(func() {
		a, err := alloc.For(d)
		require.NoError(t, err)
		require.NoError(t, a.EmptyCache())
	})
}

func stats(t testing.TB, d device.Device) alloc.Stats {
	a, err := alloc.For(d)
	require.NoError(t, err)
	return a.Stats()
}

// requested is the allocator's requested bytes now: the exact bytes of live tensors.
func requested(t testing.TB, d device.Device) int64 {
	return stats(t, d).RequestedBytes[alloc.StatAll].Current
}

// requireEmpty asserts that nothing is allocated on d any more.
func requireEmpty(t testing.TB, d device.Device) {
	t.Helper()
	st := stats(t, d)
	require.Zero(t, st.RequestedBytes[alloc.StatAll].Current, "requested bytes still live")
	require.Zero(t, st.AllocatedBytes[alloc.StatAll].Current, "allocated bytes still live")
}

// autocast is amp.Autocast that fails the test on error.
func autocast(t testing.TB, parent *tensor.Scope, dt dtype.DType, opts ...amp.Option) *tensor.Scope {
	t.Helper()
	s, err := amp.Autocast(parent, dt, opts...)
	require.NoError(t, err)
	return s
}

func f32(s *tensor.Scope, d device.Device, data []float32, shape ...int) *tensor.Tensor {
	return tensor.FromSlice(s, d, dtype.F32, data, shape...)
}

func vals(t *tensor.Tensor) []float32 { return tensor.ToSlice[float32](t) }

// param makes an F32 parameter of shape from data (owned by the caller).
func param(d device.Device, data []float32, shape ...int) *tensor.Tensor {
	s := tensor.NewScope()
	defer s.Close()
	return f32(s, d, data, shape...).AsParameter()
}

// seq returns n values (i+1)·step.
func seq(n int, step float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(i+1) * step
	}
	return v
}
