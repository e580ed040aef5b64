package pinned

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/sim"
	"github.com/subletml/sublet/internal/hostmem"
)

// newSim is a simulated device (its streams can be held, so events stay pending) and an
// allocator over it, checked at the end of the test to hold no memory.
func newSim(t *testing.T) (*sim.Device, *Allocator) {
	t.Helper()
	d, err := sim.New(sim.Options{})
	require.NoError(t, err)
	a, err := New(d)
	require.NoError(t, err)
	t.Cleanup(func() { requireEmpty(t, a) })
	return d, a
}

// requireEmpty releases the cache and checks that nothing is left.
func requireEmpty(t *testing.T, a *Allocator) {
	t.Helper()
	require.NoError(t, a.Close())
	st := a.Stats()
	require.Zero(t, st.Allocations.Current, "blocks left")
	require.Zero(t, st.AllocatedBytes.Current, "bytes left")
	require.Zero(t, st.ActiveRequests.Current)
	require.Zero(t, st.ActiveBytes.Current)
	require.Equal(t, st.NumHostAlloc, st.NumHostFree)
}

// newStream creates a stream of d, held when held is set, destroyed when the test ends.
func newStream(t *testing.T, d *sim.Device, held bool) device.Stream {
	t.Helper()
	s, err := d.NewStream()
	require.NoError(t, err)
	if held {
		require.NoError(t, d.HoldStream(s))
	}
	t.Cleanup(func() { require.NoError(t, d.DestroyStream(s)) })
	return s
}

// mustAlloc is Alloc that fails the test on error.
func mustAlloc(t *testing.T, a *Allocator, size int64) []byte {
	t.Helper()
	b, err := a.Alloc(size)
	require.NoError(t, err)
	return b
}

// fakePinned is a simulated device that also hands out "pinned" host memory (mmap'd),
// counting its calls, refusing beyond limit bytes live with ErrOutOfMemory.
type fakePinned struct {
	*sim.Device
	mu                sync.Mutex
	live, limit       int64
	allocs, frees     int
	lastFreeLen       int
	asyncTo, asyncOut int
	// freeErr, when set, is what HostFree returns (freeing nothing).
	freeErr error
}

func (f *fakePinned) HostAlloc(size int64) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.limit > 0 && f.live+size > f.limit {
		return nil, fmt.Errorf("fake HostAlloc(%d) with %d of %d live: %w", size, f.live, f.limit, device.ErrOutOfMemory)
	}
	b, err := hostmem.Alloc(size)
	if err != nil {
		return nil, err
	}
	f.live += size
	f.allocs++
	return b[:size:size], nil
}

func (f *fakePinned) HostFree(b []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.freeErr != nil {
		return f.freeErr
	}
	f.live -= int64(len(b))
	f.frees++
	f.lastFreeLen = len(b)
	return hostmem.Free(b[:hostmem.RoundUp(int64(len(b)), hostmem.PageSize())])
}

func (f *fakePinned) CopyToDeviceAsync(dst device.Ptr, src []byte, s device.Stream) error {
	f.asyncTo++
	return f.CopyToDevice(dst, src, s)
}

func (f *fakePinned) CopyToHostAsync(dst []byte, src device.Ptr, s device.Stream) error {
	f.asyncOut++
	return f.CopyToHost(dst, src, s)
}

var _ device.PinnedHost = (*fakePinned)(nil)

// newOver is an allocator with cfg over a simulated device dressed by wrap.
func newOver[D device.Device](t *testing.T, cfg alloc.PinnedConfig, wrap func(*sim.Device) D) (D, *Allocator) {
	t.Helper()
	s, err := sim.New(sim.Options{})
	require.NoError(t, err)
	d := wrap(s)
	a, err := NewConfig(d, cfg)
	require.NoError(t, err)
	return d, a
}

// newFake is a fakePinned without limit and an allocator over it with cfg.
func newFake(t *testing.T, cfg alloc.PinnedConfig) (*fakePinned, *Allocator) {
	t.Helper()
	return newOver(t, cfg, func(s *sim.Device) *fakePinned { return &fakePinned{Device: s} })
}

func TestNewNeedsADevice(t *testing.T) {
	_, err := New(nil)
	assert.Error(t, err)
}

func TestFallbackIsPageableHostMemory(t *testing.T) {
	d, a := newSim(t)
	assert.False(t, a.Pinned(), "sim has no page-locked memory: mmap fallback")
	assert.Same(t, d, a.Device())
	b := mustAlloc(t, a, 100)
	require.Len(t, b, 100)
	for i := range b {
		b[i] = byte(i)
	}
	assert.Equal(t, byte(99), b[99])
	require.NoError(t, a.Free(b))
}

func TestRoundsToPowersOfTwoAndReusesBuckets(t *testing.T) {
	_, a := newSim(t)
	b1 := mustAlloc(t, a, 1000)
	assert.Equal(t, 1000, cap(b1), "the slice is the request, not the block")
	require.NoError(t, a.Free(b1))
	// 600 and 1000 both round to 1024: the cached block comes back.
	b2 := mustAlloc(t, a, 600)
	assert.Equal(t, base(b1), base(b2))
	// 1025 rounds to 2048: another bucket, a new block.
	b3 := mustAlloc(t, a, 1025)
	assert.NotEqual(t, base(b1), base(b3))
	// 1024 exactly is the first bucket again, but its one block is in use.
	b4 := mustAlloc(t, a, 1024)
	assert.NotEqual(t, base(b2), base(b4))
	st := a.Stats()
	assert.Equal(t, alloc.Stat{Current: 3, Peak: 3, Allocated: 3}, st.Allocations)
	assert.Equal(t, alloc.Stat{Current: 1024 + 2048 + 1024, Peak: 4096, Allocated: 4096}, st.AllocatedBytes)
	assert.Equal(t, alloc.Stat{Current: 3, Peak: 3, Allocated: 4, Freed: 1}, st.ActiveRequests)
	assert.Equal(t, alloc.Stat{Current: 4096, Peak: 4096, Allocated: 5120, Freed: 1024}, st.ActiveBytes)
	assert.Equal(t, int64(3), st.NumHostAlloc)
	for _, b := range [][]byte{b2, b3, b4} {
		require.NoError(t, a.Free(b))
	}
	require.NoError(t, a.EmptyCache())
	st = a.Stats()
	assert.Equal(t, alloc.Stat{Current: 0, Peak: 3, Allocated: 3, Freed: 3}, st.Allocations)
	assert.Equal(t, int64(3), st.NumHostFree)
}

func TestSizes(t *testing.T) {
	_, a := newSim(t)
	b := mustAlloc(t, a, 0)
	assert.Nil(t, b)
	require.NoError(t, a.Free(nil), "Free(nil) does nothing")
	_, err := a.Alloc(-1)
	assert.Error(t, err)
	for _, n := range []int64{1, 2, 3, 4095, 4096, 4097, 1 << 20} {
		b, err := a.Alloc(n)
		require.NoError(t, err)
		require.Len(t, b, int(n))
		b[n-1] = 1
		require.NoError(t, a.Free(b))
	}
	// One block per power of two: 4095 and 4096 share one, freed in between.
	assert.Equal(t, int64(1+2+4+4096+8192+1<<20), a.Stats().AllocatedBytes.Current)
}

func TestFreeErrors(t *testing.T) {
	_, a := newSim(t)
	b := mustAlloc(t, a, 64)
	assert.ErrorContains(t, a.Free(b[1:]), "not memory from this allocator")
	assert.ErrorContains(t, a.Free(make([]byte, 64)), "not memory from this allocator")
	require.NoError(t, a.Free(b))
	assert.ErrorContains(t, a.Free(b), "freed twice")
	assert.ErrorContains(t, a.RecordEvent(b, 0), "not in use")
}

func TestEventGuardedReuse(t *testing.T) {
	d, a := newSim(t)
	s := newStream(t, d, true)

	b := mustAlloc(t, a, 4096)
	require.NoError(t, a.RecordEvent(b, s))
	require.NoError(t, a.RecordEvent(b, s), "recording a stream twice records one event")
	require.NoError(t, a.Free(b))
	assert.Zero(t, a.Stats().ActiveRequests.Current, "freed: no longer active")

	// The stream may still be copying from b: a request of the same size gets a new
	// block, and EmptyCache cannot release the parked one.
	b2 := mustAlloc(t, a, 4096)
	assert.NotEqual(t, base(b), base(b2))
	require.NoError(t, a.EmptyCache())
	assert.Equal(t, int64(2), a.Stats().Allocations.Current)

	require.NoError(t, d.ReleaseStream(s))
	b3 := mustAlloc(t, a, 4096)
	assert.Equal(t, base(b), base(b3), "the parked block is reused once its event completed")
	require.NoError(t, a.Free(b2))
	require.NoError(t, a.Free(b3))
}

func TestEventPerStream(t *testing.T) {
	d, a := newSim(t)
	s1, s2 := newStream(t, d, true), newStream(t, d, true)

	b := mustAlloc(t, a, 100)
	require.NoError(t, a.RecordEvent(b, s1))
	require.NoError(t, a.RecordEvent(b, s2))
	require.NoError(t, a.Free(b))

	require.NoError(t, d.ReleaseStream(s2))
	b2 := mustAlloc(t, a, 100)
	assert.NotEqual(t, base(b), base(b2), "s1 may still use the block")
	require.NoError(t, a.Free(b2))

	require.NoError(t, d.ReleaseStream(s1))
	require.NoError(t, a.EmptyCache())
	st := a.Stats()
	assert.Zero(t, st.Allocations.Current, "both blocks were cached and released")
	assert.Equal(t, int64(2), st.NumHostFree)
}

func TestEventsInRecordOrder(t *testing.T) {
	// As in PyTorch, events are processed oldest first and processing stops at the first
	// pending one: a block parked behind a held stream's event waits for it.
	d, a := newSim(t)
	slow, fast := newStream(t, d, true), newStream(t, d, false)

	first := mustAlloc(t, a, 64)
	second := mustAlloc(t, a, 128)
	require.NoError(t, a.RecordEvent(first, slow))
	require.NoError(t, a.RecordEvent(second, fast))
	require.NoError(t, a.Free(first))
	require.NoError(t, a.Free(second))

	again := mustAlloc(t, a, 128)
	assert.NotEqual(t, base(second), base(again), "second's event completed but waits behind first's")
	require.NoError(t, a.Free(again))

	require.NoError(t, d.ReleaseStream(slow))
	require.NoError(t, a.EmptyCache())
	assert.Zero(t, a.Stats().Allocations.Current)
}

func TestFreeOnADestroyedStreamWaitsInstead(t *testing.T) {
	d, a := newSim(t)
	s, err := d.NewStream()
	require.NoError(t, err)
	b := mustAlloc(t, a, 64)
	require.NoError(t, a.RecordEvent(b, s))
	require.NoError(t, d.DestroyStream(s))
	err = a.Free(b)
	assert.ErrorContains(t, err, "recording an event on stream")
	assert.Zero(t, a.Stats().ActiveRequests.Current, "the block is freed all the same")
	b2 := mustAlloc(t, a, 64)
	assert.Equal(t, base(b), base(b2), "and cached, as nothing can still use it")
	require.NoError(t, a.Free(b2))
}

func TestCloseRefusesWhileInUse(t *testing.T) {
	_, a := newSim(t)
	b := mustAlloc(t, a, 64)
	assert.ErrorContains(t, a.Close(), "1 block(s) in use")
	require.NoError(t, a.Free(b))
}

func TestResetPeakStats(t *testing.T) {
	_, a := newSim(t)
	b := mustAlloc(t, a, 1<<10)
	c := mustAlloc(t, a, 1<<12)
	require.NoError(t, a.Free(c))
	require.NoError(t, a.EmptyCache())
	assert.Equal(t, int64(5<<10), a.Stats().AllocatedBytes.Peak)
	a.ResetPeakStats()
	assert.Equal(t, int64(1<<10), a.Stats().AllocatedBytes.Peak)
	assert.Equal(t, int64(1<<10), a.Stats().ActiveBytes.Peak)
	require.NoError(t, a.Free(b))
}

func TestStatsMapKeys(t *testing.T) {
	_, a := newSim(t)
	b := mustAlloc(t, a, 3000)
	m := a.StatsMap()
	assert.Len(t, m, 18)
	want := map[string]int64{
		"allocations.current": 1, "allocations.peak": 1, "allocations.allocated": 1, "allocations.freed": 0,
		"allocated_bytes.current": 4096, "allocated_bytes.peak": 4096, "allocated_bytes.allocated": 4096, "allocated_bytes.freed": 0,
		"active_requests.current": 1, "active_requests.peak": 1, "active_requests.allocated": 1, "active_requests.freed": 0,
		"active_bytes.current": 4096, "active_bytes.peak": 4096, "active_bytes.allocated": 4096, "active_bytes.freed": 0,
		"num_host_alloc": 1, "num_host_free": 0,
	}
	assert.Equal(t, want, m)
	require.NoError(t, a.Free(b))
}

func TestUsesTheDevicesPinnedMemory(t *testing.T) {
	s, err := sim.New(sim.Options{Backing: true, Capacity: 1 << 20, Cost: &sim.CostModel{}})
	require.NoError(t, err)
	f := &fakePinned{Device: s}
	a, err := New(f)
	require.NoError(t, err)
	assert.True(t, a.Pinned())
	b := mustAlloc(t, a, 3000)
	assert.Equal(t, 1, f.allocs)
	assert.Equal(t, int64(4096), f.live, "one power-of-two block")
	require.NoError(t, a.Free(b))
	require.NoError(t, a.EmptyCache())
	assert.Equal(t, 1, f.frees)
	assert.Equal(t, 4096, f.lastFreeLen, "HostFree gets the whole block back")
	requireEmpty(t, a)
}

func TestOutOfMemoryReleasesTheCacheAndRetries(t *testing.T) {
	s, err := sim.New(sim.Options{})
	require.NoError(t, err)
	f := &fakePinned{Device: s, limit: 1 << 20}
	a, err := New(f)
	require.NoError(t, err)
	big := mustAlloc(t, a, 512<<10)
	small := mustAlloc(t, a, 256<<10)
	require.NoError(t, a.Free(big))
	require.NoError(t, a.Free(small))
	// 1 MiB fits only once the two cached blocks are released.
	b := mustAlloc(t, a, 1<<20)
	assert.Equal(t, int64(1), a.Stats().Allocations.Current)
	assert.Equal(t, int64(2), a.Stats().NumHostFree)
	_, err = a.Alloc(1)
	require.ErrorIs(t, err, device.ErrOutOfMemory)
	assert.ErrorContains(t, err, "pinned: Alloc of a 1-byte block")
	require.NoError(t, a.Free(b))
	requireEmpty(t, a)
}

func TestConcurrentUse(t *testing.T) {
	t.Run("default", func(t *testing.T) {
		d, a := newSim(t)
		concurrentUse(t, d, a)
	})
	// Every setting that changes the paths at once: carving and rewinds of the segment
	// race with EmptyCache, blocks above 16 KiB are rounded to pages, those above 32 KiB
	// go back to the system, and the goroutine retires parked blocks.
	t.Run("settings", func(t *testing.T) {
		d, a := newSimConfig(t, alloc.PinnedConfig{ReserveSegmentSize: 256 << 10, MaxRoundThreshold: 16 << 10,
			MaxCachedSize: 32 << 10, UseBackgroundThreads: true})
		concurrentUse(t, d, a)
	})
}

// concurrentUse churns a from several goroutines while another releases the cache and
// reads the statistics.
func concurrentUse(t *testing.T, d *sim.Device, a *Allocator) {
	const workers, rounds = 8, 300
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			errs <- churn(d, a, w, rounds)
		})
	}
	// Meanwhile, release the cache and read the statistics.
	stop := make(chan struct{})
	emptied := make(chan error, 1)
	go func() {
		var err error
		for err == nil {
			select {
			case <-stop:
				emptied <- nil
				return
			default:
			}
			_ = a.Stats()
			err = a.EmptyCache()
		}
		emptied <- err
	}()
	wg.Wait()
	close(stop)
	require.NoError(t, <-emptied)
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	st := a.Stats()
	assert.Zero(t, st.ActiveRequests.Current)
	assert.Equal(t, int64(workers*rounds), st.ActiveRequests.Allocated)
}

// churn allocates blocks of random sizes, writes them, records them on a stream of its
// own that it holds and releases, and frees them, checking that no block it holds is
// handed out twice.
func churn(d *sim.Device, a *Allocator, w, rounds int) error {
	s, err := d.NewStream()
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(uint64(w), 7))
	var held [][]byte
	for i := range rounds {
		b, err := a.Alloc(1 + rng.Int64N(1<<16))
		if err != nil {
			return err
		}
		for j := range b {
			b[j] = byte(w)
		}
		held = append(held, b)
		if i%3 == 0 {
			if err := d.HoldStream(s); err != nil {
				return err
			}
			if err := a.RecordEvent(b, s); err != nil {
				return err
			}
		}
		if len(held) > 4 {
			victim := held[0]
			held = held[1:]
			for j, v := range victim {
				if v != byte(w) {
					return fmt.Errorf("worker %d: byte %d of a held block was overwritten with %d", w, j, v)
				}
			}
			if err := a.Free(victim); err != nil {
				return err
			}
			if rng.IntN(4) == 0 {
				if err := d.ReleaseStream(s); err != nil {
					return err
				}
			}
		}
	}
	for _, b := range held {
		if err := a.Free(b); err != nil {
			return err
		}
	}
	return errors.Join(d.ReleaseStream(s), a.EmptyCache(), d.DestroyStream(s))
}
