package pinned

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
)

// segment returns the reserve segment's first byte address, or 0 without one.
func (a *Allocator) segment() uintptr {
	a.reserve.mu.Lock()
	defer a.reserve.mu.Unlock()
	if a.reserve.mem == nil {
		return 0
	}
	return base(a.reserve.mem)
}

// New blocks are carved from the segment one after another, aligned, while it has room;
// the segment counts as one allocation from the system and carved blocks as none.
func TestReserveSegmentCarvesNewBlocks(t *testing.T) {
	_, a := newOver(t, alloc.PinnedConfig{ReserveSegmentSize: mib}, sameSim)
	seg := a.segment()
	require.NotZero(t, seg)
	st := a.Stats()
	assert.Equal(t, alloc.Stat{Current: 1, Peak: 1, Allocated: 1}, st.Allocations, "the segment, taken by New")
	assert.Equal(t, mib, st.AllocatedBytes.Current)
	assert.Equal(t, int64(1), st.NumHostAlloc)

	k1 := mustAlloc(t, a, 1000)      // 1 KiB at 0
	b128 := mustAlloc(t, a, 100)     // 128 B at 1 KiB
	page := mustAlloc(t, a, 4096)    // 4 KiB, aligned up to 4 KiB
	half := mustAlloc(t, a, 512<<10) // 512 KiB at 8 KiB
	over := mustAlloc(t, a, 512<<10) // no room left: from the system
	large := mustAlloc(t, a, 2*mib)  // larger than the segment: from the system
	assert.Equal(t, seg, base(k1))
	assert.Equal(t, seg+1024, base(b128))
	assert.Equal(t, seg+4096, base(page))
	assert.Equal(t, seg+8192, base(half))
	for _, b := range [][]byte{over, large} {
		assert.False(t, base(b) >= seg && base(b) < seg+uintptr(mib), "%#x is not in the segment", base(b))
	}
	st = a.Stats()
	assert.Equal(t, int64(3), st.NumHostAlloc)
	assert.Equal(t, mib+512<<10+2*mib, st.AllocatedBytes.Current)
	assert.Equal(t, int64(1024+128+4096+512<<10+512<<10+2*mib), st.ActiveBytes.Current)

	for _, b := range [][]byte{k1, b128, page, half, over, large} {
		require.NoError(t, a.Free(b))
	}
	again := mustAlloc(t, a, 1024)
	assert.Equal(t, seg, base(again), "carved blocks are cached like others")
	require.NoError(t, a.Free(again))

	// EmptyCache returns the system's blocks; all carved blocks are cached, so they are
	// dropped and the segment is carved from its beginning again. The segment stays.
	require.NoError(t, a.EmptyCache())
	st = a.Stats()
	assert.Equal(t, mib, st.AllocatedBytes.Current, "only the segment is held")
	assert.Equal(t, int64(1), st.Allocations.Current)
	assert.Equal(t, int64(2), st.NumHostFree)
	big := mustAlloc(t, a, 768<<10)
	assert.Equal(t, seg, base(big), "the whole segment is free again")
	require.NoError(t, a.Free(big))
	require.NoError(t, a.Close())
	st = a.Stats()
	assert.Zero(t, st.AllocatedBytes.Current, "Close returned the segment")
	assert.Equal(t, int64(3), st.NumHostFree)
	assert.Zero(t, a.segment())
	assert.Equal(t, st.NumHostAlloc, st.NumHostFree)
}

// While a carved block is in use, EmptyCache keeps the other carved blocks cached, and
// Close refuses.
func TestReserveSegmentRewindsOnlyWhenAllCarvedBlocksAreCached(t *testing.T) {
	_, a := newSimConfig(t, alloc.PinnedConfig{ReserveSegmentSize: mib})
	seg := a.segment()
	held := mustAlloc(t, a, 64)
	cached := mustAlloc(t, a, 64)
	require.NoError(t, a.Free(cached))
	require.NoError(t, a.EmptyCache())
	again := mustAlloc(t, a, 64)
	assert.Equal(t, base(cached), base(again), "still cached: no rewind while one is in use")
	require.NoError(t, a.Free(again))
	assert.ErrorContains(t, a.Close(), "2 block(s) in use or waiting", "the held one, and the cached one it keeps")
	require.NoError(t, a.Free(held))
	require.NoError(t, a.EmptyCache())
	first := mustAlloc(t, a, 4096)
	assert.Equal(t, seg, base(first), "rewound")
	require.NoError(t, a.Free(first))
}

// Blocks larger than MaxCachedSize are never carved: the segment could not return them
// to the system when freed.
func TestReserveSegmentAndMaxCachedSize(t *testing.T) {
	_, a := newSimConfig(t, alloc.PinnedConfig{ReserveSegmentSize: mib, MaxCachedSize: 4096})
	seg := a.segment()
	small := mustAlloc(t, a, 4096)
	big := mustAlloc(t, a, 8192)
	assert.Equal(t, seg, base(small))
	require.NoError(t, a.Free(big))
	require.NoError(t, a.Free(small))
	st := a.Stats()
	assert.Equal(t, mib, st.AllocatedBytes.Current, "the large block went back; the carved one is cached")
	assert.Equal(t, int64(1), st.NumHostFree)
}

// The segment comes from the device's pinned memory when it has some, and goes back to
// it at Close; a segment the device cannot give is an error of New naming the key.
func TestReserveSegmentFromTheDevice(t *testing.T) {
	f, a := newFake(t, alloc.PinnedConfig{ReserveSegmentSize: mib})
	assert.Equal(t, 1, f.allocs)
	assert.Equal(t, mib, f.live)
	b := mustAlloc(t, a, 3000)
	assert.Equal(t, 1, f.allocs, "carved, not allocated")
	require.NoError(t, a.Free(b))
	requireEmpty(t, a)
	assert.Zero(t, f.live)
	assert.Equal(t, int(mib), f.lastFreeLen)

	f.limit = mib / 2
	_, err := NewConfig(f, alloc.PinnedConfig{ReserveSegmentSize: mib, UseBackgroundThreads: true})
	require.ErrorIs(t, err, device.ErrOutOfMemory)
	assert.ErrorContains(t, err, "pinned.NewConfig on sim: pinned_reserve_segment_size_mb (PinnedConfig.ReserveSegmentSize): taking the 1048576-byte segment")
	requireNoPollers(t)
}

// A segment the system will not take back at Close stays held, and Close says so.
func TestReserveSegmentReleaseFailure(t *testing.T) {
	f, a := newFake(t, alloc.PinnedConfig{ReserveSegmentSize: mib})
	f.freeErr = errBroken
	err := a.Close()
	require.ErrorIs(t, err, errBroken)
	assert.ErrorContains(t, err, "returning the 1048576-byte reserve segment to the system (it stays held)")
	assert.Equal(t, mib, a.Stats().AllocatedBytes.Current)
	assert.Equal(t, mib, f.live)
	f.freeErr = nil
	require.NoError(t, a.releaseReserve())
	assert.Zero(t, f.live)
	assert.Zero(t, a.Stats().AllocatedBytes.Current)
}

// Out of memory for a new block, the allocator releases its cache, which may rewind the
// segment, and carves again.
func TestReserveSegmentAfterOutOfMemory(t *testing.T) {
	f, a := newFake(t, alloc.PinnedConfig{ReserveSegmentSize: mib})
	f.limit = mib // the segment uses all the device has
	b := mustAlloc(t, a, 512<<10)
	require.NoError(t, a.Free(b))
	c := mustAlloc(t, a, 1024<<10)
	assert.Equal(t, a.segment(), base(c), "rewound, then carved: the device was never asked")
	assert.Equal(t, 1, f.allocs)
	require.NoError(t, a.Free(c))
	requireEmpty(t, a)
	assert.Zero(t, f.live)
}
