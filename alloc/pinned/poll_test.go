package pinned

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device/sim"
)

// pollers counts the live background goroutines of every allocator in the process. It
// looks for the creator's line, which a goroutine shows even before it first runs (its
// top frame is then a wrapper, not pollEvents).
func pollers() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "created by github.com/subletml/sublet/alloc/pinned.(*Allocator).startPolling ")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// requireNoPollers checks that no background goroutine is left. Close returns once the
// goroutine has closed its done channel, a moment before it ends: wait for the end.
func requireNoPollers(t *testing.T) {
	t.Helper()
	eventually(t, func() bool { return pollers() == 0 }, "a background goroutine is left")
}

// cached reports whether the block at b's address waits in its bucket.
func (a *Allocator) cached(b []byte) bool {
	for i := range a.buckets {
		bk := &a.buckets[i]
		bk.mu.Lock()
		for _, blk := range bk.free {
			if base(blk.mem) == base(b) {
				bk.mu.Unlock()
				return true
			}
		}
		bk.mu.Unlock()
	}
	return false
}

// eventually waits (up to 10 s) for cond, which the background goroutine makes true.
func eventually(t *testing.T, cond func() bool, msg string) {
	t.Helper()
	require.Eventually(t, cond, 10*time.Second, 100*time.Microsecond, msg)
}

// The goroutine retires a parked block once its event completed, with no call to the
// allocator; Close stops it and waits for it.
func TestBackgroundThreadRetiresParkedBlocks(t *testing.T) {
	requireNoPollers(t)
	d, err := sim.New(sim.Options{})
	require.NoError(t, err)
	a, err := NewConfig(d, alloc.PinnedConfig{UseBackgroundThreads: true})
	require.NoError(t, err)
	assert.Equal(t, 1, pollers())
	s := newStream(t, d, true)

	b := mustAlloc(t, a, 4096)
	require.NoError(t, a.RecordEvent(b, s))
	require.NoError(t, a.Free(b))
	time.Sleep(time.Millisecond) // rounds of the goroutine pass; the stream is held
	assert.False(t, a.cached(b), "still parked")
	require.NoError(t, d.ReleaseStream(s))
	eventually(t, func() bool { return a.cached(b) }, "the goroutine caches the block")
	b2 := mustAlloc(t, a, 4096)
	assert.Equal(t, base(b), base(b2))
	require.NoError(t, a.Free(b2))

	requireEmpty(t, a)
	requireNoPollers(t)
	_, err = a.Alloc(1)
	assert.ErrorContains(t, err, "pinned: Alloc(1) on sim after Close")
	assert.ErrorContains(t, a.Close(), "called twice")
}

// With the goroutine, Alloc leaves events alone (here the goroutine waits an hour
// between rounds); EmptyCache still processes them.
func TestBackgroundThreadAllocLeavesEventsToIt(t *testing.T) {
	d, err := sim.New(sim.Options{})
	require.NoError(t, err)
	a, err := newAllocator("test", d, alloc.PinnedConfig{UseBackgroundThreads: true}, time.Hour)
	require.NoError(t, err)
	s := newStream(t, d, false)

	b := mustAlloc(t, a, 4096)
	require.NoError(t, a.RecordEvent(b, s))
	require.NoError(t, a.Free(b)) // the stream is idle: the event completes at once
	b2 := mustAlloc(t, a, 4096)
	assert.NotEqual(t, base(b), base(b2), "Alloc did not process the completed event")
	require.NoError(t, a.EmptyCache())
	st := a.Stats()
	assert.Equal(t, int64(1), st.Allocations.Current, "EmptyCache processed it and released the block")
	assert.Equal(t, int64(1), st.NumHostFree)
	require.NoError(t, a.Free(b2))
	requireEmpty(t, a)
	requireNoPollers(t)
}

// A refused Close leaves the goroutine running.
func TestBackgroundThreadSurvivesARefusedClose(t *testing.T) {
	d, err := sim.New(sim.Options{})
	require.NoError(t, err)
	a, err := NewConfig(d, alloc.PinnedConfig{UseBackgroundThreads: true})
	require.NoError(t, err)
	s := newStream(t, d, true)
	b := mustAlloc(t, a, 64)
	require.NoError(t, a.RecordEvent(b, s))
	require.NoError(t, a.Free(b))
	assert.ErrorContains(t, a.Close(), "waiting for their streams")
	assert.Equal(t, 1, pollers())
	require.NoError(t, d.ReleaseStream(s))
	eventually(t, func() bool { return a.cached(b) }, "the goroutine still works")
	requireEmpty(t, a)
	requireNoPollers(t)
}

// An error the goroutine meets is reported once, by the next Alloc; the block stays
// parked until queries work again.
func TestBackgroundThreadReportsErrors(t *testing.T) {
	s, f, a := newFlaky(t, alloc.PinnedConfig{UseBackgroundThreads: true})
	st := newStream(t, s, true)
	b := mustAlloc(t, a, 4096)
	require.NoError(t, a.RecordEvent(b, st))
	require.NoError(t, a.Free(b))
	f.queryFails.Store(true)
	eventually(t, func() bool { return a.pollErr.Load() != nil }, "the goroutine met the failure")
	_, err := a.Alloc(4096)
	require.ErrorIs(t, err, errBroken)
	assert.ErrorContains(t, err, "querying the event of a parked block")
	assert.Equal(t, int64(1), a.Stats().Allocations.Current, "the failed Alloc took nothing")
	f.queryFails.Store(false)
	require.NoError(t, s.ReleaseStream(st))
	eventually(t, func() bool { return a.cached(b) }, "retired once queries work")
	// Rounds between the failed Alloc and the repair may have failed too, and left their
	// error for the next call; drop it.
	if err := a.takePollErr(); err != nil {
		require.ErrorIs(t, err, errBroken)
	}
	b2 := mustAlloc(t, a, 4096)
	assert.Equal(t, base(b), base(b2))
	require.NoError(t, a.Free(b2))
	requireEmpty(t, a)
}

// Close reports an error the goroutine met that no Alloc reported.
func TestCloseReportsTheBackgroundThreadsError(t *testing.T) {
	s, f, a := newFlaky(t, alloc.PinnedConfig{UseBackgroundThreads: true})
	st := newStream(t, s, false)
	b := mustAlloc(t, a, 64)
	require.NoError(t, a.RecordEvent(b, st))
	f.queryFails.Store(true)
	require.NoError(t, a.Free(b))
	eventually(t, func() bool { return a.pollErr.Load() != nil }, "the goroutine met the failure")
	f.queryFails.Store(false)
	err := a.Close()
	require.ErrorIs(t, err, errBroken)
	assert.Zero(t, a.Stats().Allocations.Current, "Close released everything all the same")
	requireNoPollers(t)
}
