// Package tensortest is what the tests of tensor, and of every package built on it
// (nn, optim, amp, checkpoint, the examples, a program embedding sublet), share: fresh
// devices, each with its own caching allocator, and exact assertions on that
// allocator's memory at named moments.
//
// Invariants the helpers keep, so a test can rely on them:
//   - Every device a helper returns is new, so its allocator is new and counts only
//     what the test allocates on it; when the test ends its cached segments are handed
//     back to the device (EmptyCache), so devices do not pile up across tests.
//   - Memory assertions are exact: RequireLive names every live storage's size,
//     RequireEmpty wants zero requested bytes, zero allocated bytes and zero live
//     allocations. Every test that allocates ends with one of them.
//
// The helpers fail the test (require) rather than return errors.
package tensortest

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

// Device is a device a test runs on, with a name for subtests.
type Device struct {
	Name string
	device.Device
}

// CPU returns a fresh CPU device of 1 GiB.
func CPU(t testing.TB) device.Device {
	d, err := cpu.New(cpu.Options{Capacity: 1 << 30})
	require.NoError(t, err)
	emptyCacheAtEnd(t, d)
	return d
}

// Meta returns a fresh simulated H200 without backing store (the meta device): ops
// allocate their results and compute nothing, so memory is checked at full model size.
func Meta(t testing.TB) device.Device { return Sim(t, 0, false) }

// Sim returns a fresh simulated device of capacity bytes (0: the H200's), keeping data
// (backing) or not.
func Sim(t testing.TB, capacity int64, backing bool) *sim.Device {
	d, err := sim.New(sim.Options{Capacity: capacity, Backing: backing})
	require.NoError(t, err)
	emptyCacheAtEnd(t, d)
	return d
}

// DataDevices returns fresh devices that compute: cpu, and sim with a backing store.
func DataDevices(t testing.TB) []Device {
	return []Device{{"cpu", CPU(t)}, {"sim", Sim(t, 1<<30, true)}}
}

func emptyCacheAtEnd(t testing.TB, d device.Device) {
	t.Cleanup(func() { require.NoError(t, Allocator(t, d).EmptyCache()) })
}

// Allocator returns d's caching allocator.
func Allocator(t testing.TB, d device.Device) *alloc.Allocator {
	a, err := alloc.For(d)
	require.NoError(t, err)
	return a
}

// Stats returns the statistics of d's allocator now.
func Stats(t testing.TB, d device.Device) alloc.Stats { return Allocator(t, d).Stats() }

// Requested is the allocator's requested bytes now: the exact bytes of live storages.
func Requested(t testing.TB, d device.Device) int64 {
	return Stats(t, d).RequestedBytes[alloc.StatAll].Current
}

// RequireLive asserts that d's allocator holds exactly storages of the given sizes (in
// bytes) at moment: their sum requested, one live allocation each (nothing hidden),
// and blocks of at least their rounded sizes (a cached block is handed out whole when
// what would be left is too small to split, so a block may be larger).
func RequireLive(t testing.TB, d device.Device, moment string, sizes ...int64) {
	t.Helper()
	a := Allocator(t, d)
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

// RequireEmpty asserts that nothing is allocated on d any more: no requested bytes, no
// allocated bytes, no live allocation.
func RequireEmpty(t testing.TB, d device.Device) {
	t.Helper()
	RequireLive(t, d, "at the end")
	require.Zero(t, Stats(t, d).AllocatedBytes[alloc.StatAll].Current, "allocated bytes at the end")
}

// Sizes returns the byte size of each tensor, for RequireLive (slices.Concat joins
// several lists).
func Sizes(ts ...*tensor.Tensor) []int64 {
	out := make([]int64, len(ts))
	for i, t := range ts {
		out[i] = t.Bytes()
	}
	return out
}

// RequireOpError asserts that f panics with a *tensor.Error of op wrapping cause (any
// cause when nil) and returns it.
func RequireOpError(t testing.TB, op string, cause error, f func()) *tensor.Error {
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

// F32 returns an F32 tensor of shape holding data, on d, owned by s.
func F32(s *tensor.Scope, d device.Device, data []float32, shape ...int) *tensor.Tensor {
	return tensor.FromSlice(s, d, dtype.F32, data, shape...)
}

// Values copies a floating tensor's elements to the host as float32.
func Values(t *tensor.Tensor) []float32 { return tensor.ToSlice[float32](t) }
