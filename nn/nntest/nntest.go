// Package nntest holds what the tests of nn, optim and the examples share: fresh
// devices (each with its own allocator) and exact assertions on the allocator's
// memory at named moments.
package nntest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/cpu"
	"github.com/subletml/sublet/device/sim"
	"github.com/subletml/sublet/tensor"
)

// CPU returns a fresh CPU device of 1 GiB (and so a fresh allocator).
func CPU(t testing.TB) device.Device {
	d, err := cpu.New(cpu.Options{Capacity: 1 << 30})
	require.NoError(t, err)
	return d
}

// Meta returns a fresh simulated H200 without backing store: ops allocate their
// results and compute nothing, so memory is checked at full model size.
func Meta(t testing.TB) device.Device {
	d, err := sim.New(sim.Options{})
	require.NoError(t, err)
	return d
}

// Allocator returns d's caching allocator.
func Allocator(t testing.TB, d device.Device) *alloc.Allocator {
	a, err := alloc.For(d)
	require.NoError(t, err)
	return a
}

// Requested is the allocator's requested bytes now: the exact bytes of live storages.
func Requested(t testing.TB, d device.Device) int64 {
	st := Allocator(t, d).Stats()
	return st.RequestedBytes[alloc.StatAll].Current
}

// RequireLive asserts the allocator holds exactly storages of the given sizes: their
// sum requested, one live allocation each (nothing hidden), and blocks of at least
// their rounded sizes (a cached block is handed out whole when what would be left is
// too small to split, so a block may be larger).
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

// RequireEmpty asserts nothing is allocated on d any more.
func RequireEmpty(t testing.TB, d device.Device) {
	t.Helper()
	RequireLive(t, d, "at the end")
	require.Zero(t, Allocator(t, d).Stats().AllocatedBytes[alloc.StatAll].Current, "allocated bytes at the end")
}

// Sizes returns the byte size of each tensor.
func Sizes(ts ...*tensor.Tensor) []int64 {
	out := make([]int64, len(ts))
	for i, t := range ts {
		out[i] = t.Bytes()
	}
	return out
}

// Cat concatenates lists of sizes.
func Cat(parts ...[]int64) []int64 {
	var out []int64
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}
