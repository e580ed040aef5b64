// Package tensortest is what the tests of tensor, and of every package built on it
// (nn, optim, amp, checkpoint, the examples, a program embedding sublet), share: fresh
// devices, each with its own caching allocator, and exact assertions on that
// allocator's memory at named moments.
//
// Invariants the helpers keep, so a test can rely on them:
//   - Every device a helper returns is new, so its allocator is new and counts only
//     what the test allocates on it; when the test ends its cached segments are handed
//     back to the device (EmptyCache), so devices do not pile up across tests. The GPU
//     (CUDA) is the exception: one per process (its context costs a fraction of a
//     second), shared by the tests one after another; CUDA requires its allocator
//     empty when a test takes it and gives the backend's memory back when it ends.
//   - Memory assertions are exact: RequireLive names every live storage's size,
//     RequireEmpty wants zero requested bytes, zero allocated bytes and zero live
//     allocations. Every test that allocates ends with one of them. On a GPU the
//     memory the CUDA backend keeps in the allocator (its cuBLAS workspaces, named by
//     kernels/cuda's Held) is accounted apart: Requested leaves it out and
//     RequireLive expects it besides the given sizes.
//
// Which devices run (environment, read at each call):
//   - DataDevices adds cuda:0 where a GPU is found, unless SUBLET_TEST_CUDA=0; so on a
//     GPU machine every test over DataDevices runs there too (gradcheck among them).
//   - SUBLET_TEST_META=cuda:0 makes Meta return the GPU instead of the simulated
//     device without data: the full-size memory-at-named-moments tests of nn,
//     checkpoint and amp then run with real data on cuda:0 and must give the same bytes
//     (scripts/gpu/suite.sh runs them so). They read the allocator through Requested,
//     PeakRequested, RequireLive and RequireEmpty, which leave out what the CUDA
//     backend keeps (its cuBLAS workspace), as every memory report does.
//
// The helpers fail the test (require) rather than return errors.
package tensortest

import (
	"errors"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/cpu"
	cudadev "github.com/subletml/sublet/device/cuda"
	"github.com/subletml/sublet/device/named"
	"github.com/subletml/sublet/device/sim"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels/cuda"
	"github.com/subletml/sublet/tensor"
)

// Environment variables of the helpers (see the package doc).
const (
	CUDAEnv = "SUBLET_TEST_CUDA"
	MetaEnv = "SUBLET_TEST_META"
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
// With SUBLET_TEST_META=cuda:0 it returns the GPU (CUDA), which computes.
func Meta(t testing.TB) device.Device {
	if os.Getenv(MetaEnv) == "cuda:0" {
		return CUDA(t)
	}
	return Sim(t, 0, false)
}

// gpu opens cuda:0 through package named (so every package of the process shares one
// Device and allocator with the programs it tests), or reports why not.
func gpu() (*cudadev.Device, error) {
	if os.Getenv(CUDAEnv) == "0" {
		return nil, errors.New(CUDAEnv + "=0")
	}
	d, err := named.Open("cuda:0")
	if err != nil {
		return nil, err
	}
	return d.(*cudadev.Device), nil
}

// CUDA returns cuda:0, or skips the test where there is no GPU (or SUBLET_TEST_CUDA=0).
// Its allocator must be empty when the test takes it; when the test ends the backend's
// memory (cuBLAS workspaces, scratch) goes back and the cache is emptied, so the next
// test finds it empty too.
func CUDA(t testing.TB) device.Device {
	t.Helper()
	d, err := gpu()
	if err != nil {
		t.Skipf("no GPU for this test: %v", err)
	}
	RequireEmpty(t, d)
	t.Cleanup(func() {
		b, err := cuda.For(d)
		require.NoError(t, err)
		require.NoError(t, b.Release())
		require.NoError(t, Allocator(t, d).EmptyCache())
	})
	return d
}

// Sim returns a fresh simulated device of capacity bytes (0: the H200's), keeping data
// (backing) or not.
func Sim(t testing.TB, capacity int64, backing bool) *sim.Device {
	d, err := sim.New(sim.Options{Capacity: capacity, Backing: backing})
	require.NoError(t, err)
	emptyCacheAtEnd(t, d)
	return d
}

// DataDevices returns devices that compute: fresh cpu and sim with a backing store,
// and cuda:0 where this machine has a GPU (unless SUBLET_TEST_CUDA=0).
func DataDevices(t testing.TB) []Device {
	devs := []Device{{"cpu", CPU(t)}, {"sim", Sim(t, 1<<30, true)}}
	if _, err := gpu(); err == nil {
		devs = append(devs, Device{"cuda", CUDA(t)})
	}
	return devs
}

// held is what the CUDA backend of d keeps in d's allocator now (nothing elsewhere).
func held(t testing.TB, d device.Device) []int64 {
	g, ok := d.(*cudadev.Device)
	if !ok {
		return nil
	}
	b, err := cuda.For(g)
	require.NoError(t, err)
	var sizes []int64
	for _, h := range b.Held() {
		if h.Allocator {
			sizes = append(sizes, h.Bytes)
		}
	}
	return sizes
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

// Requested is the allocator's requested bytes now: the exact bytes of live storages
// (on a GPU, without what the CUDA backend keeps there).
func Requested(t testing.TB, d device.Device) int64 {
	return Stats(t, d).RequestedBytes[alloc.StatAll].Current - tensor.BackendHeld(d)
}

// PeakRequested is the allocator's peak of requested bytes since its last
// ResetPeakStats, less what the CUDA backend of d keeps now: the backend takes its
// cuBLAS workspace at the first product and keeps it, before the peak of any step that
// multiplies, so such a peak counted it once.
func PeakRequested(t testing.TB, d device.Device) int64 {
	return Stats(t, d).RequestedBytes[alloc.StatAll].Peak - tensor.BackendHeld(d)
}

// RequireLive asserts that d's allocator holds exactly storages of the given sizes (in
// bytes) at moment: their sum requested, one live allocation each (nothing hidden),
// and blocks of at least their rounded sizes (a cached block is handed out whole when
// what would be left is too small to split, so a block may be larger).
func RequireLive(t testing.TB, d device.Device, moment string, sizes ...int64) {
	t.Helper()
	a := Allocator(t, d)
	sizes = append(sizes[:len(sizes):len(sizes)], held(t, d)...)
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
	var kept int64
	for _, h := range held(t, d) {
		kept += Allocator(t, d).RoundSize(h)
	}
	require.Equal(t, kept, Stats(t, d).AllocatedBytes[alloc.StatAll].Current, "allocated bytes at the end")
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
