package alloctest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
)

// recordStream: a block used by work on a second stream and freed is not reused until
// that work has completed, and then it is without EmptyCache; EmptyCache waits for
// pending frees.
func (s suite) recordStream(t *testing.T) {
	x := s.open(t, alloc.Config{})
	s2 := x.newStream()
	p := x.alloc(mib, 0) // the first half of a 2 MiB small segment
	var release func()
	if x.Hold != nil {
		release = x.Hold(t, s2)
	}
	// Work on s2 that uses p, queued behind the hold.
	require.NoError(t, x.Dev.Memset(p, 0xab, mib, s2))
	require.NoError(t, x.a.RecordStream(p, s2))
	require.NoError(t, x.a.RecordStream(p, s2), "recording a stream twice is recording it once")
	require.NoError(t, x.a.RecordStream(p, 0), "the block's own stream: nothing to record")
	require.NoError(t, x.a.RecordStream(0, s2), "the null pointer: nothing to record")
	assert.Error(t, x.a.RecordStream(p+512, s2), "not the start of a live allocation")
	x.free(p)
	st := x.a.Stats()
	assert.Zero(t, cur(st.Allocation))
	assert.Zero(t, cur(st.AllocatedBytes))
	assert.Equal(t, int64(1), cur(st.Active), "the freed block stays active until s2's work is done")
	assert.Equal(t, mib, cur(st.ActiveBytes))

	if release == nil {
		// The device completes work at once: the next request finds the event done and
		// gets the block back.
		q := x.alloc(mib, 0)
		assert.Equal(t, p, q)
		x.free(q)
	} else {
		assert.Equal(t, []any{mib, alloc.ActivePendingFree, mib, alloc.Inactive}, blockStates(x.segmentOf(p)))
		q := x.alloc(mib, 0)
		assert.Equal(t, p+device.Ptr(mib), q, "the pending block is skipped; the rest of its segment serves")
		r := x.alloc(mib, 0)
		assert.NotEqual(t, x.segmentOf(p).Address, x.segmentOf(r).Address, "a new segment: p is still pending")
		assert.Equal(t, int64(2), x.a.Stats().NumDeviceAlloc)
		x.free(q, r)
		again := x.alloc(mib, 0)
		assert.NotEqual(t, p, again, "s2 is still held")
		x.free(again)
		assert.Equal(t, 1, x.pendingFrees())

		release()
		require.NoError(t, x.Dev.SynchronizeStream(s2))
		// The next request processes the completed event first: p is free and merged.
		u := x.alloc(mib, 0)
		st = x.a.Stats()
		assert.Equal(t, int64(1), cur(st.Active), "only the new block is active")
		assert.Zero(t, x.pendingFrees(), "no block waits for s2 any more")
		x.free(u)
	}

	// EmptyCache waits for frees still pending on other streams, then releases them.
	w := x.alloc(4*mib, 0)
	require.NoError(t, x.Dev.Memset(w, 0xcd, 4*mib, s2))
	require.NoError(t, x.a.RecordStream(w, s2))
	syncs := x.a.Stats().NumSyncAllStreams
	x.free(w)
	require.NoError(t, x.a.EmptyCache())
	st = x.a.Stats()
	assert.Equal(t, syncs+1, st.NumSyncAllStreams)
	assert.Zero(t, cur(st.Active))
	assert.Zero(t, cur(st.ReservedBytes))
}

// pendingFrees counts the blocks waiting for other streams' work.
func (x *session) pendingFrees() int {
	n := 0
	for _, seg := range x.a.Snapshot() {
		for _, b := range seg.Blocks {
			if b.State == alloc.ActivePendingFree {
				n++
			}
		}
	}
	return n
}
