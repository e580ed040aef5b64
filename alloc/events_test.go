package alloc

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRecordStreamDefersFree(t *testing.T) {
	a, d := newAlloc(t, 0, Config{})
	s1 := newStream(t, d, true)

	p := mustAlloc(t, a, 4096, 0)
	require.NoError(t, a.RecordStream(p, s1))
	require.NoError(t, a.RecordStream(p, s1), "the same stream twice records one event")
	require.NoError(t, a.RecordStream(p, 0), "the allocation stream is ignored")
	mustFree(t, a, p)
	st := a.Stats()
	assert.Zero(t, cur(st.AllocatedBytes), "allocated drops at the free request")
	assert.Zero(t, cur(st.Allocation))
	assert.Equal(t, int64(4096), cur(st.ActiveBytes), "active until the event completes")
	assert.Equal(t, int64(1), cur(st.Active))
	segs := a.Snapshot()
	require.Len(t, segs, 1)
	assert.Equal(t, ActivePendingFree, segs[0].Blocks[0].State)
	assert.Equal(t, int64(4096), segs[0].Blocks[0].Requested)
	checkInvariants(t, a)

	// While s1 is held the block is not reused: the next request gets the next block.
	q := mustAlloc(t, a, 4096, 0)
	assert.Equal(t, p+4096, q)
	checkInvariants(t, a)

	// Once s1's work is done, the next Alloc's process_events frees the block.
	require.NoError(t, d.ReleaseStream(s1))
	r := mustAlloc(t, a, 4096, 0)
	assert.Equal(t, p, r)
	st = a.Stats()
	assert.Equal(t, int64(8192), cur(st.ActiveBytes))
	assert.Zero(t, st.NumSyncAllStreams)
	mustFree(t, a, q, r)
	requireDrained(t, a, d)
}

func TestEmptyCacheSynchronizesPendingFrees(t *testing.T) {
	a, d := newAlloc(t, 0, Config{})
	s1 := newStream(t, d, true)
	s2 := newStream(t, d, true)
	p := mustAlloc(t, a, 30*MiB, 0)
	require.NoError(t, a.RecordStream(p, s1))
	require.NoError(t, a.RecordStream(p, s2))
	mustFree(t, a, p)
	require.NoError(t, a.EmptyCache())
	st := a.Stats()
	assert.Equal(t, int64(1), st.NumSyncAllStreams)
	assert.Zero(t, cur(st.ActiveBytes), "both events were waited for")
	assert.Zero(t, cur(st.ReservedBytes), "and the segment released")
	requireDrained(t, a, d)
}

// Blocks waiting for events do not merge with their neighbours until freed.
func TestPendingBlocksDoNotMerge(t *testing.T) {
	a, d := newAlloc(t, 0, Config{})
	s1 := newStream(t, d, true)
	p := mustAlloc(t, a, 4096, 0)
	q := mustAlloc(t, a, 4096, 0)
	require.NoError(t, a.RecordStream(p, s1))
	mustFree(t, a, p, q)
	st := a.Stats()
	assert.Equal(t, int64(1), cur(st.InactiveSplit), "q merged with the tail only")
	assert.Equal(t, int64(SmallBuffer-4096), cur(st.InactiveSplitBytes))
	checkInvariants(t, a)
	require.NoError(t, d.ReleaseStream(s1))
	r := mustAlloc(t, a, 4096, 0) // process_events frees p, which merges with the rest
	assert.Equal(t, p, r)
	assert.Equal(t, int64(1), cur(a.Stats().Segment))
	mustFree(t, a, r)
	st = a.Stats()
	assert.Zero(t, cur(st.InactiveSplit), "the segment is whole again")
	requireDrained(t, a, d)
}

// The last-resort retry waits for pending frees, so memory held only by events is
// reclaimed before an OOM.
func TestRetryReclaimsPendingFrees(t *testing.T) {
	a, d := newAlloc(t, 64*MiB, Config{})
	s1 := newStream(t, d, true)
	p := mustAlloc(t, a, 40*MiB, 0)
	require.NoError(t, a.RecordStream(p, s1))
	mustFree(t, a, p)
	q := mustAlloc(t, a, 50*MiB, 0)
	st := a.Stats()
	assert.Equal(t, int64(1), st.NumSyncAllStreams)
	assert.Equal(t, int64(1), st.NumAllocRetries)
	assert.Equal(t, int64(1), st.NumDeviceFree)
	assert.Equal(t, int64(50*MiB), cur(st.ReservedBytes))
	mustFree(t, a, q)
	requireDrained(t, a, d)
}

// Events come from a pool: a second deferred free reuses the first one's event.
func TestEventsAreRecycled(t *testing.T) {
	a, d := newAlloc(t, 0, Config{})
	s1 := newStream(t, d, false)
	for range 3 {
		p := mustAlloc(t, a, 4096, 0)
		require.NoError(t, a.RecordStream(p, s1))
		mustFree(t, a, p)
	}
	a.mu.Lock()
	assert.Len(t, a.events.spare, 0, "the event is still queued until the next Alloc")
	a.mu.Unlock()
	p := mustAlloc(t, a, 4096, 0)
	a.mu.Lock()
	assert.Len(t, a.events.spare, 1, "one event served all three frees")
	a.mu.Unlock()
	mustFree(t, a, p)
	requireDrained(t, a, d)
}

// When no event can be recorded, Free synchronizes the other stream instead and the
// block is free at once; when that fails too, Free fails and the allocation stays live.
func TestRecordEventFailure(t *testing.T) {
	d := newSim(t, 0)
	s1 := newStream(t, d, false)
	eventless := newFlaky(d)
	eventless.failNext("RecordEvent", always)
	a, err := New(eventless, Config{})
	require.NoError(t, err)
	p := mustAlloc(t, a, 4096, 0)
	require.NoError(t, a.RecordStream(p, s1))
	mustFree(t, a, p)
	assert.Zero(t, cur(a.Stats().ActiveBytes))
	assert.Equal(t, int64(1), d.Stats().StreamSyncs)
	requireDrained(t, a, d)

	broken := newFlaky(d)
	broken.failNext("RecordEvent", always)
	broken.failNext("SynchronizeStream", always)
	b, err := New(broken, Config{})
	require.NoError(t, err)
	p = mustAlloc(t, b, 4096, 0)
	require.NoError(t, b.RecordStream(p, s1))
	before := b.Stats()
	err = b.Free(p)
	require.ErrorIs(t, err, errBroken)
	assert.Contains(t, err.Error(), "stays live")
	assert.Equal(t, before, b.Stats(), "nothing changed")
	checkInvariants(t, b)
	broken.heal("SynchronizeStream")
	mustFree(t, b, p)
	requireDrained(t, b, d)
}
