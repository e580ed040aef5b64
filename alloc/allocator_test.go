package alloc

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/subletml/sublet/device"
)

func TestAllocZeroTouchesNothing(t *testing.T) {
	a, d := newAlloc(t, 0, Config{})
	p, err := a.Alloc(0, 0)
	require.NoError(t, err)
	assert.Zero(t, p)
	require.NoError(t, a.Free(0))
	require.NoError(t, a.RecordStream(0, 5))
	assert.Equal(t, Stats{MaxSplitSize: -1}, a.Stats())
	assert.Zero(t, d.Stats().Mallocs)
	requireDrained(t, a, d)
}

func TestAllocNegativeAndHugeSizes(t *testing.T) {
	a, d := newAlloc(t, 0, Config{})
	_, err := a.Alloc(-1, 0)
	require.Error(t, err)
	_, err = a.Alloc(MaxRequest, 0)
	var oom *OOMError
	require.ErrorAs(t, err, &oom)
	assert.Equal(t, int64(MaxRequest), oom.Requested)
	assert.Contains(t, err.Error(), "more than 1EB")
	assert.Contains(t, err.Error(), "hint: the request is larger than any device")
	// Like PyTorch's allocate(), the 1 EiB check comes before the allocator: no stats.
	assert.Equal(t, Stats{MaxSplitSize: -1}, a.Stats())
	requireDrained(t, a, d)
}

func TestSmallPoolSegmentAndSplit(t *testing.T) {
	a, d := newAlloc(t, 0, Config{})
	p := mustAlloc(t, a, 1000, 0)
	st := a.Stats()
	assert.Equal(t, int64(1024), cur(st.AllocatedBytes))
	assert.Equal(t, int64(1000), cur(st.RequestedBytes))
	assert.Equal(t, int64(SmallBuffer), cur(st.ReservedBytes))
	assert.Equal(t, int64(SmallBuffer), st.ReservedBytes[StatSmallPool].Current)
	assert.Zero(t, st.ReservedBytes[StatLargePool].Current)
	assert.Equal(t, int64(1), cur(st.Segment))
	// The remainder of the 2 MiB segment is an inactive split block.
	assert.Equal(t, int64(1), cur(st.InactiveSplit))
	assert.Equal(t, int64(SmallBuffer-1024), cur(st.InactiveSplitBytes))
	assert.Equal(t, int64(1), st.NumDeviceAlloc)
	checkInvariants(t, a)

	q := mustAlloc(t, a, 512, 0)
	assert.Equal(t, p+1024, q, "the next request takes the front of the remainder")
	st = a.Stats()
	assert.Equal(t, int64(SmallBuffer-1024-512), cur(st.InactiveSplitBytes), "re-splitting shrinks inactive bytes")
	assert.Equal(t, int64(1), cur(st.InactiveSplit))

	mustFree(t, a, p)
	st = a.Stats()
	assert.Equal(t, int64(2), cur(st.InactiveSplit), "a freed block between live and free blocks is a second split block")
	assert.Equal(t, int64(SmallBuffer-512), cur(st.InactiveSplitBytes))
	checkInvariants(t, a)

	mustFree(t, a, q)
	st = a.Stats()
	assert.Zero(t, cur(st.InactiveSplit), "everything merged back into one unsplit block")
	assert.Zero(t, cur(st.InactiveSplitBytes))
	assert.Zero(t, cur(st.ActiveBytes))
	assert.Equal(t, int64(SmallBuffer), cur(st.ReservedBytes), "freeing caches, it does not release")
	requireDrained(t, a, d)
	assert.Equal(t, int64(1), a.Stats().NumDeviceFree)
}

func TestSegmentSizes(t *testing.T) {
	for _, c := range []struct {
		size, seg int64
		pool      int
	}{
		{1, SmallBuffer, StatSmallPool},
		{SmallSize, SmallBuffer, StatSmallPool},
		{SmallSize + 1, LargeBuffer, StatLargePool},
		{MinLargeAlloc - 512, LargeBuffer, StatLargePool},
		{MinLargeAlloc, MinLargeAlloc, StatLargePool},
		{MinLargeAlloc + 1, MinLargeAlloc + RoundLarge, StatLargePool},
		{100*MiB + 3, 102 * MiB, StatLargePool},
	} {
		a, d := newAlloc(t, 0, Config{})
		p := mustAlloc(t, a, c.size, 0)
		st := a.Stats()
		assert.Equal(t, c.seg, st.ReservedBytes[c.pool].Current, "request %d", c.size)
		assert.Equal(t, int64(1), st.Segment[c.pool].Current, "request %d", c.size)
		checkInvariants(t, a)
		mustFree(t, a, p)
		requireDrained(t, a, d)
	}
}

func TestLargeSplitThreshold(t *testing.T) {
	// A large block is split only when more than 1 MiB would remain.
	a, d := newAlloc(t, 0, Config{})
	p := mustAlloc(t, a, 19*MiB, 0) // 20 MiB segment, 1 MiB left: not split
	st := a.Stats()
	assert.Equal(t, int64(20*MiB), cur(st.AllocatedBytes), "the whole block is handed out")
	assert.Equal(t, int64(19*MiB), cur(st.RequestedBytes))
	assert.Zero(t, cur(st.InactiveSplit))
	mustFree(t, a, p)

	p = mustAlloc(t, a, 19*MiB-512, 0) // 1 MiB + 512 left: split
	st = a.Stats()
	assert.Equal(t, int64(19*MiB-512), cur(st.AllocatedBytes))
	assert.Equal(t, int64(1), cur(st.InactiveSplit))
	assert.Equal(t, int64(MiB+512), cur(st.InactiveSplitBytes))
	assert.Equal(t, int64(1), cur(st.Segment), "the cached segment was reused")
	mustFree(t, a, p)
	requireDrained(t, a, d)
}

func TestSmallSplitThreshold(t *testing.T) {
	// A small block is split when at least 512 bytes remain.
	a, d := newAlloc(t, 0, Config{})
	p := mustAlloc(t, a, SmallBuffer-MiB, 0) // 1 MiB: small pool, remainder 1 MiB
	q := mustAlloc(t, a, SmallBuffer-MiB-512, 0)
	r := mustAlloc(t, a, 512, 0) // takes the last 512 bytes exactly
	st := a.Stats()
	assert.Equal(t, int64(1), cur(st.Segment))
	assert.Equal(t, int64(SmallBuffer), cur(st.AllocatedBytes))
	assert.Zero(t, cur(st.InactiveSplitBytes))
	assert.Equal(t, q+device.Ptr(SmallBuffer-MiB-512), r)
	mustFree(t, a, p, q, r)
	requireDrained(t, a, d)
}

func TestBestFitBySizeThenAddress(t *testing.T) {
	a, d := newAlloc(t, 0, Config{})
	// Three 20 MiB segments of 12 MiB blocks, each leaving an 8 MiB remainder.
	var big [3]device.Ptr
	for i := range big {
		big[i] = mustAlloc(t, a, 12*MiB, 0)
	}
	require.Equal(t, int64(3*12*MiB), cur(a.Stats().ReservedBytes), "12 MiB requests get 12 MiB segments")
	mustFree(t, a, big[:]...)
	// Equal free blocks: the lowest address wins.
	lowest := min(big[0], big[1], big[2])
	p := mustAlloc(t, a, 12*MiB, 0)
	assert.Equal(t, lowest, p)
	mustFree(t, a, p)

	// Best fit prefers the smallest block that fits, whatever its address: a 4 MiB
	// request splits the lowest 12 MiB block, and an 8 MiB request then takes the
	// 8 MiB remainder rather than another 12 MiB block.
	x := mustAlloc(t, a, 4*MiB, 0)
	assert.Equal(t, lowest, x)
	y := mustAlloc(t, a, 8*MiB, 0)
	assert.Equal(t, lowest+device.Ptr(4*MiB), y)
	assert.Equal(t, int64(3), cur(a.Stats().Segment))
	mustFree(t, a, x, y)
	requireDrained(t, a, d)
}

func TestFreeErrors(t *testing.T) {
	a, d := newAlloc(t, 0, Config{})
	p := mustAlloc(t, a, 4096, 0)
	require.Error(t, a.Free(p+512), "interior pointer")
	require.NoError(t, a.Free(p))
	err := a.Free(p)
	require.Error(t, err, "double free")
	assert.Contains(t, err.Error(), "not a live allocation")
	require.Error(t, a.RecordStream(p, 1))
	requireDrained(t, a, d)
}

func TestStreamsDoNotShareBlocks(t *testing.T) {
	a, d := newAlloc(t, 0, Config{})
	s1 := newStream(t, d, false)
	p := mustAlloc(t, a, 4096, 0)
	mustFree(t, a, p)
	q := mustAlloc(t, a, 4096, s1)
	assert.Equal(t, int64(2), cur(a.Stats().Segment), "a block cached on stream 0 is not handed to stream 1")
	r := mustAlloc(t, a, 4096, 0)
	assert.Equal(t, p, r)
	mustFree(t, a, q, r)
	requireDrained(t, a, d)
}

func TestStatsAccumulateAndReset(t *testing.T) {
	a, d := newAlloc(t, 0, Config{})
	p := mustAlloc(t, a, 3*MiB, 0)
	q := mustAlloc(t, a, 3*MiB, 0)
	mustFree(t, a, p, q)
	st := a.Stats()
	assert.Equal(t, Stat{Current: 0, Peak: 6 * MiB, Allocated: 6 * MiB, Freed: 6 * MiB}, st.AllocatedBytes[StatAll])
	assert.Equal(t, st.AllocatedBytes[StatAll], st.AllocatedBytes[StatLargePool])
	assert.Equal(t, Stat{}, st.AllocatedBytes[StatSmallPool])
	assert.Equal(t, Stat{Current: 20 * MiB, Peak: 20 * MiB, Allocated: 20 * MiB}, st.ReservedBytes[StatAll])

	a.ResetPeakStats()
	st = a.Stats()
	assert.Equal(t, Stat{Current: 0, Peak: 0, Allocated: 6 * MiB, Freed: 6 * MiB}, st.AllocatedBytes[StatAll])
	a.ResetAccumulatedStats()
	st = a.Stats()
	assert.Equal(t, Stat{}, st.AllocatedBytes[StatAll])
	assert.Equal(t, Stat{Current: 20 * MiB, Peak: 20 * MiB}, st.ReservedBytes[StatAll])
	assert.Zero(t, st.NumDeviceAlloc)
	requireDrained(t, a, d)
	assert.Equal(t, int64(1), a.Stats().NumDeviceFree)
}

func TestStatsMapKeys(t *testing.T) {
	a, d := newAlloc(t, 0, Config{MaxSplitSize: 40 * MiB})
	p := mustAlloc(t, a, 50*MiB, 0)
	m := a.StatsMap()
	assert.Len(t, m, 9*3*4+6+2*4)
	assert.Equal(t, 50*MiB, m["allocated_bytes.all.current"])
	assert.Equal(t, 50*MiB, m["allocated_bytes.large_pool.peak"])
	assert.Equal(t, int64(0), m["allocated_bytes.small_pool.current"])
	assert.Equal(t, 40*MiB, m["max_split_size"])
	assert.Equal(t, int64(1), m["oversize_allocations.current"])
	assert.Equal(t, int64(1), m["oversize_segments.current"])
	assert.Equal(t, int64(1), m["num_device_alloc"])
	st := a.Stats()
	for k, v := range m {
		got, ok := st.Get(k)
		assert.True(t, ok, k)
		assert.Equal(t, v, got, k)
	}
	for _, k := range []string{"", "segment", "segment.all", "segment.all.bogus", "segment.medium_pool.current", "bogus.all.current", "oversize_segments.bogus"} {
		_, ok := st.Get(k)
		assert.False(t, ok, k)
	}
	mustFree(t, a, p)
	assert.Equal(t, int64(0), a.StatsMap()["oversize_allocations.current"])
	requireDrained(t, a, d)
	assert.Equal(t, int64(0), a.StatsMap()["oversize_segments.current"])

	b, d2 := newAlloc(t, 0, Config{})
	assert.Equal(t, int64(-1), b.StatsMap()["max_split_size"])
	requireDrained(t, b, d2)
}

func TestNonOOMDeviceErrorIsReturned(t *testing.T) {
	a, f, d := newFlakyAlloc(t, 0, Config{})
	f.failNext("Malloc", always)
	_, err := a.Alloc(512, 0)
	require.ErrorIs(t, err, errBroken)
	var oom *OOMError
	assert.False(t, errors.As(err, &oom), "a device failure other than OOM is not an OOM")
	st := a.Stats()
	assert.Zero(t, st.NumOOMs)
	assert.Zero(t, st.NumAllocRetries, "no retry after an error that is not OOM")
	requireDrained(t, a, d)
}

func TestSnapshot(t *testing.T) {
	a, d := newAlloc(t, 0, Config{})
	s1 := newStream(t, d, true)
	p := mustAlloc(t, a, 1000, 0)
	q := mustAlloc(t, a, 3000, 0)
	big := mustAlloc(t, a, 12*MiB, s1)
	require.NoError(t, a.RecordStream(q, s1))
	mustFree(t, a, q)
	segs := a.Snapshot()
	require.Len(t, segs, 2)
	small, large := segs[0], segs[1]
	if small.Pool != "small" {
		small, large = large, small
	}
	assert.Equal(t, SegmentInfo{
		Address: p, TotalSize: SmallBuffer, AllocatedSize: 1024, ActiveSize: 1024 + 3072, RequestedSize: 1000 + 3000,
		Stream: 0, Pool: "small",
		Blocks: []BlockInfo{
			{Address: p, Size: 1024, Requested: 1000, State: ActiveAllocated},
			{Address: p + 1024, Size: 3072, Requested: 3000, State: ActivePendingFree},
			{Address: p + 4096, Size: SmallBuffer - 4096, State: Inactive},
		},
	}, small)
	assert.Equal(t, SegmentInfo{
		Address: big, TotalSize: 12 * MiB, AllocatedSize: 12 * MiB, ActiveSize: 12 * MiB, RequestedSize: 12 * MiB,
		Stream: s1, Pool: "large",
		Blocks: []BlockInfo{{Address: big, Size: 12 * MiB, Requested: 12 * MiB, State: ActiveAllocated}},
	}, large)
	assert.Equal(t, "active_pending_free", ActivePendingFree.String())
	assert.Equal(t, "active_allocated", ActiveAllocated.String())
	assert.Equal(t, "inactive", Inactive.String())
	assert.Equal(t, int64(1536), a.RoundSize(1025))
	mustFree(t, a, p, big)
	require.NoError(t, a.EmptyCache())
	requireDrained(t, a, d)
}

// EmptyCache releases the segments that hold no live block and nothing else; the free
// parts of segments with live blocks stay as non-releasable memory.
func TestEmptyCacheReleasesOnlyWholeSegments(t *testing.T) {
	a, d := newAlloc(t, 0, Config{})
	live := mustAlloc(t, a, 4*MiB, 0) // 20 MiB segment, 16 MiB of it free
	gone := mustAlloc(t, a, 30*MiB, 0)
	small := mustAlloc(t, a, 4096, 0)
	mustFree(t, a, gone, small)
	require.NoError(t, a.EmptyCache())
	st := a.Stats()
	assert.Equal(t, int64(20*MiB), cur(st.ReservedBytes))
	assert.Equal(t, int64(1), cur(st.Segment))
	assert.Equal(t, int64(16*MiB), cur(st.InactiveSplitBytes), "not releasable")
	assert.Equal(t, int64(2), st.NumDeviceFree)
	assert.Equal(t, int64(1), st.NumSyncAllStreams)
	assert.Equal(t, int64(20*MiB), d.Stats().InUse)
	require.NoError(t, a.EmptyCache())
	st = a.Stats()
	assert.Equal(t, int64(2), st.NumSyncAllStreams, "every call waits for all streams")
	assert.Equal(t, int64(2), st.NumDeviceFree)
	mustFree(t, a, live)
	requireDrained(t, a, d)
	assert.Equal(t, int64(3), a.Stats().NumDeviceFree)
}
