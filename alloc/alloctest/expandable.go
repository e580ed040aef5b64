package alloctest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
)

// expandableSegments: the PyTorch blog's example through the device's VirtualMemory.
// 8 × 16 MiB map 7 pages of 20 MiB into one growing range; after they are freed,
// 4 × 32 MiB fit without a new page; EmptyCache unmaps everything.
func (s suite) expandableSegments(t *testing.T) {
	x := s.open(t, alloc.Config{ExpandableSegments: true})
	vm, ok := x.Dev.(device.VirtualMemory)
	if !ok {
		assert.False(t, x.a.Config().ExpandableSegments, "expandable segments are off on a device without VirtualMemory")
		t.Skipf("%s does not implement device.VirtualMemory: expandable segments are off there", x.Dev.Name())
	}
	if !x.a.Config().ExpandableSegments {
		t.Skipf("%s: granularity %d does not divide 2 MiB: expandable segments are off there", x.Dev.Name(), vm.Granularity())
	}
	ps := x.allocN(8, 16*mib)
	for i, p := range ps {
		assert.Equal(t, ps[0]+device.Ptr(int64(i)*16*mib), p, "one growing segment: the blocks are contiguous")
	}
	x.markAll(ps, 0x20)
	st := x.a.Stats()
	assert.Equal(t, 140*mib, cur(st.ReservedBytes), "7 pages of 20 MiB")
	assert.Equal(t, 140*mib, pool(st.ReservedBytes, large))
	assert.Equal(t, int64(7), st.NumDeviceAlloc, "one map step per page needed")
	assert.Zero(t, cur(st.Segment), "expandable segments are not counted as segments")
	assert.Zero(t, cur(st.InactiveSplitBytes))
	x.expectDevice(140 * mib)
	segs := x.a.Snapshot()
	require.Len(t, segs, 1)
	assert.True(t, segs[0].Expandable)
	assert.Equal(t, ps[0], segs[0].Address)
	assert.Equal(t, 140*mib, segs[0].TotalSize)
	checkTiles(t, segs[0])

	if x.KeepsData {
		// Block 1 spans the boundary between the first two pages: written whole, it
		// reads back whole across it.
		require.NoError(t, x.Dev.Memset(ps[1], 0x5a, 16*mib, 0))
		b := make([]byte, 64*kib)
		require.NoError(t, x.Dev.CopyToHost(b, ps[0]+device.Ptr(20*mib-32*kib), 0))
		for i, v := range b {
			require.Equal(t, byte(0x5a), v, "byte %d of the 64 KiB around the page boundary", i)
		}
	}

	x.free(ps...)
	big := x.allocN(4, 32*mib)
	st = x.a.Stats()
	assert.Equal(t, ps[0], big[0], "the freed range is reused from its start")
	assert.Equal(t, 140*mib, cur(st.ReservedBytes), "no new pages: the freed blocks merged")
	assert.Equal(t, int64(7), st.NumDeviceAlloc)

	sm := x.alloc(1000, 0)
	st = x.a.Stats()
	assert.Equal(t, 2*mib, pool(st.ReservedBytes, small), "the small pool maps 2 MiB pages")
	assert.Equal(t, int64(8), st.NumDeviceAlloc)
	assert.True(t, x.segmentOf(sm).Expandable)
	x.expectDevice(142 * mib)

	x.free(big...)
	x.free(sm)
	require.NoError(t, x.a.EmptyCache())
	st = x.a.Stats()
	assert.Zero(t, cur(st.ReservedBytes))
	assert.Equal(t, int64(2), st.NumDeviceFree, "one unmap step for each pool's free block")
	x.expectDevice(0)
}
