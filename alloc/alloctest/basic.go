package alloctest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
)

const (
	small = alloc.StatSmallPool
	large = alloc.StatLargePool
)

// allocFreeStats: rounding, the exact statistics of a mix of sizes, the cache serving a
// second round without the device, and the resets.
func (s suite) allocFreeStats(t *testing.T) {
	x := s.open(t, alloc.Config{})
	sizes := []int64{1, 512, 513, 4000, mib, mib + 1, 10 * mib, 25*mib + 1}
	rounded := []int64{512, 512, 1024, 4096, mib, mib + 512, 10 * mib, 25*mib + 512}
	// The last request gets its whole 26 MiB segment: a large block is split only when
	// more than 1 MiB would remain.
	blocks := []int64{512, 512, 1024, 4096, mib, mib + 512, 10 * mib, 26 * mib}
	var sumBlocks, sumRequested int64
	ps := make([]device.Ptr, len(sizes))
	for i, n := range sizes {
		require.Equal(t, rounded[i], x.a.RoundSize(n), "RoundSize(%d)", n)
		ps[i] = x.alloc(n, 0)
		sumBlocks += blocks[i]
		sumRequested += n
	}
	x.markAll(ps, 1)
	st := x.a.Stats()
	assert.Equal(t, int64(len(sizes)), cur(st.Allocation))
	assert.Equal(t, int64(5), pool(st.Allocation, small), "requests of at most 1 MiB use the small pool")
	assert.Equal(t, int64(3), pool(st.Allocation, large))
	assert.Equal(t, sumBlocks, cur(st.AllocatedBytes))
	assert.Equal(t, sumBlocks, cur(st.ActiveBytes))
	assert.Equal(t, sumRequested, cur(st.RequestedBytes))
	// One 2 MiB small segment for the small requests. The 1 MiB+1 request gets a 20 MiB
	// segment, whose remainder serves the 10 MiB request; the last needs a segment of
	// its own, rounded up to 2 MiB.
	assert.Equal(t, int64(1), pool(st.Segment, small))
	assert.Equal(t, int64(2), pool(st.Segment, large))
	assert.Equal(t, 2*mib, pool(st.ReservedBytes, small))
	assert.Equal(t, 46*mib, pool(st.ReservedBytes, large))
	assert.Equal(t, int64(3), st.NumDeviceAlloc)
	x.expectDevice(48 * mib)

	x.free(ps...)
	st = x.a.Stats()
	assert.Zero(t, cur(st.Allocation))
	assert.Zero(t, cur(st.AllocatedBytes))
	assert.Equal(t, sumBlocks, st.AllocatedBytes[alloc.StatAll].Peak)
	assert.Equal(t, sumBlocks, st.AllocatedBytes[alloc.StatAll].Allocated)
	assert.Equal(t, sumBlocks, st.AllocatedBytes[alloc.StatAll].Freed)
	assert.Equal(t, int64(len(sizes)), st.Allocation[alloc.StatAll].Freed)
	assert.Equal(t, 48*mib, cur(st.ReservedBytes), "freed blocks stay cached")
	x.expectDevice(48 * mib)

	// The same requests again come from the cache.
	for i, n := range sizes {
		ps[i] = x.alloc(n, 0)
	}
	st = x.a.Stats()
	assert.Equal(t, int64(3), st.NumDeviceAlloc, "the second round is served from the cache")
	assert.Equal(t, sumBlocks, st.AllocatedBytes[alloc.StatAll].Peak)
	assert.Equal(t, 2*sumBlocks, st.AllocatedBytes[alloc.StatAll].Allocated)
	x.free(ps...)

	x.a.ResetPeakStats()
	st = x.a.Stats()
	assert.Zero(t, st.AllocatedBytes[alloc.StatAll].Peak)
	assert.Equal(t, 48*mib, st.ReservedBytes[alloc.StatAll].Peak)
	x.a.ResetAccumulatedStats()
	st = x.a.Stats()
	assert.Zero(t, st.AllocatedBytes[alloc.StatAll].Allocated)
	assert.Zero(t, st.NumDeviceAlloc)
	assert.Equal(t, 48*mib, cur(st.ReservedBytes), "resets leave current values alone")

	p, err := x.a.Alloc(0, 0)
	require.NoError(t, err)
	assert.Zero(t, p, "a size-0 request returns the null pointer")
	require.NoError(t, x.a.Free(0))
	assert.Error(t, x.a.Free(ps[0]), "a double free is an error")
}

// poolsAndSegments: which pool and segment size each request gets, blocks carved from a
// segment's front, and per-stream pools.
func (s suite) poolsAndSegments(t *testing.T) {
	x := s.open(t, alloc.Config{})
	sm := x.alloc(1000, 0)
	mid := x.alloc(5*mib, 0)
	big := x.alloc(30*mib+1, 0)
	want := []struct {
		p          device.Ptr
		pool       string
		size, used int64
	}{{sm, "small", 2 * mib, 1024}, {mid, "large", 20 * mib, 5 * mib}, {big, "large", 32 * mib, 30*mib + 512}}
	for _, w := range want {
		seg := x.segmentOf(w.p)
		assert.Equal(t, w.p, seg.Address, "a new segment's first block starts at its base")
		assert.Equal(t, w.pool, seg.Pool)
		assert.Equal(t, w.size, seg.TotalSize)
		assert.Equal(t, w.used, seg.AllocatedSize)
		assert.False(t, seg.Expandable)
		checkTiles(t, seg)
	}
	x.expectDevice(54 * mib)

	// Further requests are carved from the cached remainders, right after the first.
	sm2 := x.alloc(200*kib, 0)
	assert.Equal(t, sm+1024, sm2)
	mid2 := x.alloc(3*mib, 0)
	assert.Equal(t, mid+device.Ptr(5*mib), mid2)
	st := x.a.Stats()
	assert.Equal(t, int64(3), st.NumDeviceAlloc, "no new segment for requests that fit cached blocks")
	assert.Equal(t, 2*mib, pool(st.ReservedBytes, small))
	assert.Equal(t, 52*mib, pool(st.ReservedBytes, large))

	// Another stream never takes stream 0's cached blocks.
	s2 := x.newStream()
	other := x.alloc(1000, s2)
	seg := x.segmentOf(other)
	assert.Equal(t, s2, seg.Stream)
	assert.Equal(t, other, seg.Address)
	assert.Equal(t, device.Stream(0), x.segmentOf(sm).Stream)
	assert.Equal(t, int64(4), x.a.Stats().NumDeviceAlloc)
	x.expectDevice(56 * mib)
	x.free(sm, mid, big, sm2, mid2, other)
}

// checkTiles checks that seg's blocks tile it in address order.
func checkTiles(t *testing.T, seg alloc.SegmentInfo) {
	t.Helper()
	addr := seg.Address
	for _, b := range seg.Blocks {
		require.Equal(t, addr, b.Address, "segment %#x: gap or overlap", uintptr(seg.Address))
		addr += device.Ptr(b.Size)
	}
	require.Equal(t, seg.Address+device.Ptr(seg.TotalSize), addr, "segment %#x: blocks do not reach its end", uintptr(seg.Address))
}

// blockStates returns the sizes and states of seg's blocks in address order.
func blockStates(seg alloc.SegmentInfo) []any {
	var out []any
	for _, b := range seg.Blocks {
		out = append(out, b.Size, b.State)
	}
	return out
}

// splitMerge: a small segment split into four blocks, merged back as they are freed; a
// large block split only when the remainder exceeds 1 MiB.
func (s suite) splitMerge(t *testing.T) {
	x := s.open(t, alloc.Config{})
	ps := x.allocN(4, 256*kib)
	for i, p := range ps {
		assert.Equal(t, ps[0]+device.Ptr(int64(i)*256*kib), p, "blocks are carved in address order")
	}
	x.markAll(ps, 0x10)
	seg := x.segmentOf(ps[0])
	require.Equal(t, ps[0], seg.Address)
	act, ina := alloc.ActiveAllocated, alloc.Inactive
	q := 256 * kib
	assert.Equal(t, []any{q, act, q, act, q, act, q, act, mib, ina}, blockStates(seg))
	st := x.a.Stats()
	assert.Equal(t, int64(1), cur(st.InactiveSplit))
	assert.Equal(t, mib, cur(st.InactiveSplitBytes))

	x.free(ps[1])
	assert.Equal(t, []any{q, act, q, ina, q, act, q, act, mib, ina}, blockStates(x.segmentOf(ps[0])))
	st = x.a.Stats()
	assert.Equal(t, int64(2), cur(st.InactiveSplit))
	assert.Equal(t, mib+q, cur(st.InactiveSplitBytes))
	x.free(ps[2])
	assert.Equal(t, []any{q, act, 2 * q, ina, q, act, mib, ina}, blockStates(x.segmentOf(ps[0])), "neighbours merge")
	x.free(ps[3])
	assert.Equal(t, []any{q, act, 7 * q, ina}, blockStates(x.segmentOf(ps[0])), "merged with both neighbours")
	st = x.a.Stats()
	assert.Equal(t, int64(1), cur(st.InactiveSplit))
	assert.Equal(t, 7*q, cur(st.InactiveSplitBytes))

	// The merged block is split again for the next request.
	p := x.alloc(512*kib, 0)
	assert.Equal(t, ps[1], p)
	x.free(ps[0], p)
	seg = x.segmentOf(ps[0])
	assert.Equal(t, []any{2 * mib, ina}, blockStates(seg), "a wholly free segment is one block")
	st = x.a.Stats()
	assert.Zero(t, cur(st.InactiveSplit), "an unsplit segment is not inactive split")
	assert.Zero(t, cur(st.InactiveSplitBytes))

	// Large blocks split only when more than 1 MiB would remain.
	a := x.alloc(6*mib, 0) // a 20 MiB segment: 14 MiB remain
	b := x.alloc(13*mib, 0)
	assert.Equal(t, a+device.Ptr(6*mib), b)
	seg = x.segmentOf(a)
	assert.Equal(t, []any{6 * mib, act, 14 * mib, act}, blockStates(seg), "the 1 MiB remainder stays with the block")
	st = x.a.Stats()
	assert.Equal(t, 20*mib, pool(st.AllocatedBytes, large))
	assert.Equal(t, 19*mib, pool(st.RequestedBytes, large))
	x.free(a, b)
	assert.Equal(t, []any{20 * mib, ina}, blockStates(x.segmentOf(a)))
	x.expectDevice(22 * mib)
}

// emptyCache: EmptyCache gives the device back exactly the wholly free segments, and the
// device sees it.
func (s suite) emptyCache(t *testing.T) {
	x := s.open(t, alloc.Config{})
	whole := x.alloc(30*mib, 0) // a 30 MiB segment
	p2 := x.alloc(4*mib, 0)     // a 20 MiB segment
	p3 := x.alloc(4*mib, 0)     // in the same one
	sm := x.alloc(1000, 0)      // a 2 MiB small segment
	x.expectDevice(52 * mib)
	x.free(whole, sm)
	x.expectDevice(52 * mib)
	require.NoError(t, x.a.EmptyCache())
	st := x.a.Stats()
	assert.Equal(t, 20*mib, cur(st.ReservedBytes), "the segment with live blocks stays")
	assert.Equal(t, int64(2), st.NumDeviceFree)
	assert.Equal(t, int64(1), st.NumSyncAllStreams)
	x.expectDevice(20 * mib)

	x.free(p2)
	require.NoError(t, x.a.EmptyCache())
	st = x.a.Stats()
	assert.Equal(t, 20*mib, cur(st.ReservedBytes), "a split segment with a live block is not released")
	assert.Equal(t, 16*mib, cur(st.InactiveSplitBytes))
	x.expectDevice(20 * mib)

	x.free(p3)
	require.NoError(t, x.a.EmptyCache())
	st = x.a.Stats()
	assert.Zero(t, cur(st.ReservedBytes))
	assert.Zero(t, cur(st.InactiveSplitBytes))
	assert.Equal(t, int64(3), st.NumDeviceFree)
	x.expectDevice(0)

	// After EmptyCache the next request goes to the device again.
	p := x.alloc(30*mib, 0)
	assert.Equal(t, int64(4), x.a.Stats().NumDeviceAlloc)
	x.expectDevice(30 * mib)
	x.free(p)
}
