package nn_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/cpu"
	"github.com/subletml/sublet/device/sim"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/tensor"
)

// newCPU returns a fresh CPU device (and so a fresh allocator).
func newCPU(t testing.TB) device.Device {
	d, err := cpu.New(cpu.Options{Capacity: 1 << 30})
	require.NoError(t, err)
	return d
}

// newMeta returns a simulated H200 without backing store: ops allocate, compute nothing.
func newMeta(t testing.TB) device.Device {
	d, err := sim.New(sim.Options{})
	require.NoError(t, err)
	return d
}

func allocator(t testing.TB, d device.Device) *alloc.Allocator {
	a, err := alloc.For(d)
	require.NoError(t, err)
	return a
}

// requested is the allocator's requested bytes now: the exact bytes of live storages.
func requested(t testing.TB, d device.Device) int64 {
	st := allocator(t, d).Stats()
	return st.RequestedBytes[alloc.StatAll].Current
}

// requireLive asserts the allocator holds exactly storages of the given sizes: their
// sum requested, one live allocation each, and blocks of at least their rounded sizes
// (a cached block is handed out whole when what would be left is too small to split).
func requireLive(t testing.TB, d device.Device, moment string, sizes ...int64) {
	t.Helper()
	a := allocator(t, d)
	var req, rounded int64
	for _, n := range sizes {
		req += n
		rounded += a.RoundSize(n)
	}
	st := a.Stats()
	require.Equal(t, req, st.RequestedBytes[alloc.StatAll].Current, "requested bytes %s", moment)
	require.Equal(t, int64(len(sizes)), st.Allocation[alloc.StatAll].Current, "live allocations %s", moment)
	require.GreaterOrEqual(t, st.AllocatedBytes[alloc.StatAll].Current, rounded, "allocated bytes %s", moment)
}

// requireEmpty asserts nothing is allocated on d any more.
func requireEmpty(t testing.TB, d device.Device) {
	t.Helper()
	requireLive(t, d, "at the end")
	require.Zero(t, allocator(t, d).Stats().AllocatedBytes[alloc.StatAll].Current, "allocated bytes at the end")
}

// paramSizes is the byte size of each parameter of m.
func paramSizes(m nn.Module) []int64 {
	var sizes []int64
	for _, p := range m.NamedParameters() {
		sizes = append(sizes, p.Tensor.Bytes())
	}
	return sizes
}

func f32(s *tensor.Scope, d device.Device, data []float32, shape ...int) *tensor.Tensor {
	return tensor.FromSlice(s, d, dtype.F32, data, shape...)
}

func vals(t *tensor.Tensor) []float32 { return tensor.ToSlice[float32](t) }
