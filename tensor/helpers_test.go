package tensor_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/cpu"
	"github.com/subletml/sublet/device/sim"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
)

// testDevice is a device a test runs on, with a name for subtests.
type testDevice struct {
	name string
	dev  device.Device
}

// newCPU returns a fresh CPU device (a fresh allocator with it).
func newCPU(t testing.TB) device.Device {
	d, err := cpu.New(cpu.Options{Capacity: 1 << 30})
	require.NoError(t, err)
	cleanupAllocator(t, d)
	return d
}

// newSim returns a fresh simulated device of capacity bytes, with or without data.
func newSim(t testing.TB, capacity int64, backing bool) *sim.Device {
	d, err := sim.New(sim.Options{Capacity: capacity, Backing: backing})
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

// dataDevices are the devices that compute: cpu and sim with a backing store.
func dataDevices(t testing.TB) []testDevice {
	return []testDevice{{"cpu", newCPU(t)}, {"sim", newSim(t, 1<<30, true)}}
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

// requireOpError asserts that f panics with a *tensor.Error of op wrapping cause.
func requireOpError(t testing.TB, op string, cause error, f func()) *tensor.Error {
	t.Helper()
	err := tensor.Try(f)
	require.Error(t, err)
	var te *tensor.Error
	require.True(t, errors.As(err, &te), "error %v is not a *tensor.Error", err)
	require.Equal(t, op, te.Op, "error: %v", err)
	if cause != nil {
		require.ErrorIs(t, err, cause)
	}
	return te
}

func f32(s *tensor.Scope, d device.Device, data []float32, shape ...int) *tensor.Tensor {
	return tensor.FromSlice(s, d, dtype.F32, data, shape...)
}

func vals(t *tensor.Tensor) []float32 { return tensor.ToSlice[float32](t) }
