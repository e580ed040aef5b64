package alloc

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/sim"
)

func allocN(t *testing.T, a *Allocator, n int, size int64) []device.Ptr {
	t.Helper()
	ps := make([]device.Ptr, n)
	for i := range ps {
		ps[i] = mustAlloc(t, a, size, 0)
		checkInvariants(t, a)
	}
	return ps
}

// The fragmentation example of the PyTorch allocator blog: blocks of different
// segments never merge, so the order of requests decides what is reserved.
func TestBlogFragmentationExample(t *testing.T) {
	a, d := newAlloc(t, 0, Config{})
	mustFree(t, a, allocN(t, a, 8, 16*MiB)...)
	big := allocN(t, a, 4, 32*MiB)
	assert.Equal(t, int64(256*MiB), cur(a.Stats().ReservedBytes), "8×16 MiB then 4×32 MiB")
	mustFree(t, a, big...)
	requireDrained(t, a, d)

	a, d = newAlloc(t, 0, Config{})
	mustFree(t, a, allocN(t, a, 4, 32*MiB)...)
	small := allocN(t, a, 8, 16*MiB)
	assert.Equal(t, int64(128*MiB), cur(a.Stats().ReservedBytes), "4×32 MiB then 8×16 MiB: each 32 MiB block split in two")
	mustFree(t, a, small...)
	requireDrained(t, a, d)
}

// The expandable segments example of the blog: 8×16 MiB map 7 pages of 20 MiB; after
// freeing them, 4×32 MiB fit without a new page.
func TestExpandableBlogExample(t *testing.T) {
	a, d := newAlloc(t, 0, Config{ExpandableSegments: true})
	require.True(t, a.Config().ExpandableSegments)
	ps := allocN(t, a, 8, 16*MiB)
	for i := 1; i < len(ps); i++ {
		assert.Equal(t, ps[i-1]+device.Ptr(16*MiB), ps[i], "one growing segment: the blocks are contiguous")
	}
	st := a.Stats()
	assert.Equal(t, int64(140*MiB), cur(st.ReservedBytes))
	assert.Equal(t, int64(140*MiB), st.ReservedBytes[StatLargePool].Current)
	assert.Equal(t, int64(7), st.NumDeviceAlloc, "one map step per page needed")
	assert.Zero(t, cur(st.Segment), "expandable segments are not counted as segments")
	assert.Zero(t, cur(st.InactiveSplit))
	assert.Zero(t, cur(st.InactiveSplitBytes))
	assert.Equal(t, int64(140*MiB), d.Stats().InUse)
	mustFree(t, a, ps...)
	checkInvariants(t, a)
	big := allocN(t, a, 4, 32*MiB)
	st = a.Stats()
	assert.Equal(t, int64(140*MiB), cur(st.ReservedBytes), "no new pages")
	assert.Equal(t, int64(7), st.NumDeviceAlloc)
	assert.Equal(t, ps[0], big[0])
	mustFree(t, a, big...)

	segs := a.Snapshot()
	require.Len(t, segs, 1)
	assert.True(t, segs[0].Expandable)
	assert.Equal(t, int64(140*MiB), segs[0].TotalSize)
	require.NoError(t, a.EmptyCache())
	st = a.Stats()
	assert.Zero(t, cur(st.ReservedBytes))
	assert.Equal(t, int64(1), st.NumDeviceFree, "one unmap step for the whole free block")
	assert.Empty(t, a.Snapshot())
	assert.Equal(t, int64(7), d.Stats().Unmaps)
	assert.Equal(t, int64(1), d.Stats().Unreserves, "the empty segment's address range went back")
	requireDrained(t, a, d)
}

// The reservation is page × ceil(1.125 × capacity / page) per (pool, stream).
func TestExpandableReservationPerPoolAndStream(t *testing.T) {
	a, d := newAlloc(t, 1000*MiB, Config{ExpandableSegments: true})
	s1 := newStream(t, d, false)
	p := mustAlloc(t, a, 4096, 0)
	q := mustAlloc(t, a, 4*MiB, 0)
	r := mustAlloc(t, a, 4096, s1)
	assert.Equal(t, int64(3), d.Stats().Reserves)
	st := a.Stats()
	assert.Equal(t, int64(SmallBuffer), st.ReservedBytes[StatSmallPool].Current/2, "one 2 MiB page per stream's small segment")
	assert.Equal(t, int64(LargeBuffer), st.ReservedBytes[StatLargePool].Current)
	a.mu.Lock()
	for _, seg := range a.segments {
		want := (1000*MiB + 1000*MiB/8 + seg.page - 1) / seg.page * seg.page
		assert.Equal(t, want, seg.size)
	}
	a.mu.Unlock()
	mustFree(t, a, p, q, r)
	requireDrained(t, a, d)
	assert.Equal(t, int64(3), d.Stats().Unreserves)
}

// Unmapping gives back only whole free pages: partial pages next to live blocks stay
// mapped as free blocks.
func TestExpandableUnmapWholePagesOnly(t *testing.T) {
	a, d := newAlloc(t, 0, Config{ExpandableSegments: true})
	p := mustAlloc(t, a, 30*MiB, 0) // maps 2 pages: [0, 40) MiB
	q := mustAlloc(t, a, 30*MiB, 0) // [30, 60): maps a third page
	r := mustAlloc(t, a, 50*MiB, 0) // [60, 110): maps 3 more
	require.Equal(t, int64(120*MiB), cur(a.Stats().ReservedBytes))
	mustFree(t, a, q) // free [30, 60)
	require.NoError(t, a.EmptyCache())
	// Only the page [40, 60) lies wholly inside the free block.
	st := a.Stats()
	assert.Equal(t, int64(100*MiB), cur(st.ReservedBytes))
	segs := a.Snapshot()
	require.Len(t, segs, 2, "two mapped ranges: [0, 40) and [60, 120)")
	assert.Equal(t, p, segs[0].Address)
	assert.Equal(t, int64(40*MiB), segs[0].TotalSize)
	assert.Equal(t, []BlockInfo{
		{Address: p, Size: 30 * MiB, Requested: 30 * MiB, State: ActiveAllocated},
		{Address: p + device.Ptr(30*MiB), Size: 10 * MiB},
	}, segs[0].Blocks)
	assert.Equal(t, r, segs[1].Address)
	checkInvariants(t, a)

	// The hole is refilled: find-lowest-spot growth maps it again for a request that
	// fits there (free 10 MiB + unmapped 20 MiB).
	q = mustAlloc(t, a, 25*MiB, 0)
	assert.Equal(t, p+device.Ptr(30*MiB), q)
	assert.Equal(t, int64(120*MiB), cur(a.Stats().ReservedBytes))
	mustFree(t, a, p, q, r)
	requireDrained(t, a, d)
}

// An OOM while mapping releases what that step mapped; the release-and-retry path
// then unmaps free pages and tries again.
func TestExpandableMapFailure(t *testing.T) {
	a, d := newAlloc(t, 100*MiB, Config{ExpandableSegments: true})
	p := mustAlloc(t, a, 30*MiB, 0) // 2 pages
	q := mustAlloc(t, a, 10*MiB, 0) // in the second page
	mustFree(t, a, p)
	// 60 MiB: the free 30 MiB at the bottom cannot grow (q is live above it), so the
	// unmapped space above q is mapped: 3 pages. The second page fails; the first is
	// unmapped again. The last-resort retry unmaps the whole free page at the bottom
	// ([0, 20) MiB; [20, 30) stays mapped) and maps the 3 pages again.
	require.NoError(t, d.SetFaults(sim.Faults{Nth: 2}))
	r := mustAlloc(t, a, 60*MiB, 0)
	assert.Equal(t, p+device.Ptr(40*MiB), r)
	st := a.Stats()
	assert.Equal(t, int64(1), st.NumAllocRetries)
	assert.Equal(t, int64(1), st.NumDeviceFree, "the retry unmapped the free page at the bottom")
	assert.Equal(t, int64(2), st.NumDeviceAlloc, "the failed step is not counted")
	assert.Equal(t, int64(80*MiB), cur(st.ReservedBytes))
	assert.Equal(t, int64(80*MiB), d.Stats().InUse)
	mustFree(t, a, q, r)
	requireDrained(t, a, d)
}

func TestExpandableOffWithoutVirtualMemory(t *testing.T) {
	d := newSim(t, 0)
	a, err := New(plainDevice{d}, Config{ExpandableSegments: true})
	require.NoError(t, err)
	assert.False(t, a.Config().ExpandableSegments)
	p := mustAlloc(t, a, 16*MiB, 0)
	assert.Equal(t, int64(1), cur(a.Stats().Segment))
	mustFree(t, a, p)
	requireDrained(t, a, d)
}

// plainDevice hides the simulated device's VirtualMemory.
type plainDevice struct{ device.Device }

// An Unmap that fails partway through a free block leaves the pages before it unmapped
// and accounted as such: reserved bytes stay what the device has mapped, and the block
// is whole again after the next map.
func TestExpandableUnmapFailureKeepsAccountsExact(t *testing.T) {
	a, f, d := newFlakyAlloc(t, 0, Config{ExpandableSegments: true})
	p := mustAlloc(t, a, 50*MiB, 0) // 3 pages
	mustFree(t, a, p)
	f.failNext("Unmap", 2)
	require.ErrorIs(t, a.EmptyCache(), errBroken)
	checkInvariants(t, a)
	assert.Equal(t, int64(40*MiB), d.Stats().InUse, "the first page went back, the second failed")
	assert.Equal(t, d.Stats().InUse, cur(a.Stats().ReservedBytes), "reserved is what the device has mapped")
	assert.Equal(t, int64(1), a.Stats().NumDeviceFree)

	q := mustAlloc(t, a, 50*MiB, 0)
	assert.Equal(t, p, q, "the first page is mapped again below the free rest")
	assert.Equal(t, int64(60*MiB), d.Stats().InUse)
	assert.Equal(t, d.Stats().InUse, cur(a.Stats().ReservedBytes))
	mustFree(t, a, q)
	requireDrained(t, a, d)
}

// When a Map fails and undoing the pages mapped before it fails too, the pages still
// mapped stay accounted as free memory: nothing is mapped behind the allocator's back.
func TestExpandableMapRollbackFailureKeepsAccountsExact(t *testing.T) {
	a, f, d := newFlakyAlloc(t, 0, Config{ExpandableSegments: true})
	f.failNext("Map", 3)
	f.failNext("Unmap", 1)
	_, err := a.Alloc(50*MiB, 0) // 3 pages: the third fails, undoing the second fails
	require.ErrorIs(t, err, errBroken)
	var oom *OOMError
	assert.False(t, errors.As(err, &oom))
	checkInvariants(t, a)
	assert.Equal(t, d.Stats().InUse, cur(a.Stats().ReservedBytes), "reserved is what the device has mapped")
	assert.Zero(t, cur(a.Stats().AllocatedBytes))

	p := mustAlloc(t, a, 50*MiB, 0)
	assert.Equal(t, int64(60*MiB), d.Stats().InUse)
	assert.Equal(t, d.Stats().InUse, cur(a.Stats().ReservedBytes))
	mustFree(t, a, p)
	requireDrained(t, a, d)
}

// TestExpandableRangeNeverMappedIsReleased: a stream's first expandable segment is
// reserved while another stream holds the whole device, so its first page cannot be
// mapped (an OOM); EmptyCache gives its address range back along with the rest, with
// no statistic moved by it, and nothing stays reserved on the device (which a GPU
// requires before it closes).
func TestExpandableRangeNeverMappedIsReleased(t *testing.T) {
	a, d := newAlloc(t, 64*MiB, Config{ExpandableSegments: true})
	full := mustAlloc(t, a, 60*MiB, 0) // three 20 MiB pages: the device is full
	s := newStream(t, d, false)
	_, err := a.Alloc(2*MiB, s)
	var oom *OOMError
	require.ErrorAs(t, err, &oom)
	before := a.Stats()
	mustFree(t, a, full)
	requireDrained(t, a, d)
	assert.Equal(t, before.NumOOMs, a.Stats().NumOOMs)
	ds := d.Stats()
	assert.Equal(t, ds.Reserves, ds.Unreserves, "every address range given back")
	assert.Equal(t, int64(3), ds.Reserves, "the full stream's, the failed one's, and that again for the retry after releasing the cache")
}
