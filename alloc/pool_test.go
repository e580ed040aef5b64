package alloc

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/device"
)

func TestCaptureAllocatesFromItsPrivatePool(t *testing.T) {
	a, d := newAlloc(t, 0, Config{})
	s1 := newStream(t, d, false)
	// A cached block in the default pools, free: the capture must not take it.
	warm := mustAlloc(t, a, MiB, s1)
	mustFree(t, a, warm)
	pool := a.NewPool()
	require.NoError(t, a.BeginCapture(s1, pool))
	assert.True(t, a.Capturing())
	x := mustAlloc(t, a, MiB, s1)
	assert.NotEqual(t, warm, x, "a capture allocates from its own pool, not the default pools' cache")
	mustFree(t, a, x)
	y := mustAlloc(t, a, MiB, s1)
	assert.Equal(t, x, y, "a block freed during the capture is reused by its later requests")
	// Other streams are not captured: the default pools serve them.
	z := mustAlloc(t, a, 4096, 0)
	mustFree(t, a, z)
	require.NoError(t, a.EndCapture(s1))
	assert.False(t, a.Capturing())
	checkInvariants(t, a)

	// After the capture, the stream uses the default pools again; the pool's free blocks
	// stay the graph's.
	w := mustAlloc(t, a, MiB, s1)
	assert.Equal(t, warm, w)
	mustFree(t, a, w, y)
	segs := a.Stats().Segment[StatAll].Current
	require.NoError(t, a.EmptyCache())
	st := a.Stats()
	assert.Equal(t, int64(1), st.Segment[StatAll].Current, "of %d segments only the pool's stays: its graph is alive", segs)
	assert.Equal(t, int64(2*MiB), cur(st.ReservedBytes))

	require.NoError(t, a.ReleasePool(pool))
	require.Error(t, a.ReleasePool(pool), "twice")
	require.Error(t, a.BeginCapture(s1, pool), "a released pool")
	requireDrained(t, a, d)
	assert.Empty(t, a.pools, "an empty released pool is forgotten")
}

func TestCaptureRefusesEmptyCacheAndReturnsNothing(t *testing.T) {
	a, d := newAlloc(t, 64*MiB, Config{})
	pool := a.NewPool()
	require.NoError(t, a.BeginCapture(0, pool))
	err := a.BeginCapture(0, pool)
	require.ErrorIs(t, err, ErrCaptureUnderway, "one capture per stream")
	p := mustAlloc(t, a, 30*MiB, 0)
	err = a.EmptyCache()
	require.ErrorIs(t, err, ErrCaptureUnderway)
	assert.Contains(t, err.Error(), "EmptyCache")
	// A miss the device cannot serve is an OOM at once: no release and retry inside the
	// capture.
	_, err = a.Alloc(40*MiB, 0)
	var oom *OOMError
	require.ErrorAs(t, err, &oom)
	st := a.Stats()
	assert.Zero(t, st.NumAllocRetries)
	assert.Zero(t, st.NumDeviceFree)
	mustFree(t, a, p)
	require.NoError(t, a.EndCapture(0))
	require.Error(t, a.EndCapture(0), "not captured any more")
	require.NoError(t, a.ReleasePool(pool))
	requireDrained(t, a, d)
}

func TestFreesDuringCaptureRecordNoEvent(t *testing.T) {
	a, d := newAlloc(t, 0, Config{})
	side := newStream(t, d, true)
	pool := a.NewPool()
	used := mustAlloc(t, a, 4096, 0) // allocated before the capture, used on side during it
	require.NoError(t, a.BeginCapture(0, pool))
	inCapture := mustAlloc(t, a, 4096, 0)
	require.NoError(t, a.RecordStream(used, side))
	require.NoError(t, a.RecordStream(inCapture, side))
	before := d.Stats()
	mustFree(t, a, used, inCapture)
	// More requests inside the capture query no event either.
	again := mustAlloc(t, a, 4096, 0)
	after := d.Stats()
	assert.Equal(t, before.EventQueries, after.EventQueries, "no event query during a capture")
	assert.NotEqual(t, inCapture, again, "a freed block used on another stream waits, even in the capture")
	segs := a.Snapshot()
	pending := 0
	for _, s := range segs {
		for _, b := range s.Blocks {
			if b.State == ActivePendingFree {
				pending++
			}
		}
	}
	assert.Equal(t, 2, pending, "both frees wait for the capture's end")
	checkInvariants(t, a)
	require.NoError(t, a.EndCapture(0))
	// The events are recorded at the end; while the side stream is busy both blocks stay
	// active beside the live one.
	assert.Equal(t, int64(3*4096), cur(a.Stats().ActiveBytes))
	assert.NotEqual(t, inCapture, mustAllocFree(t, a, 4096), "not reusable before the side stream's work is done")
	require.NoError(t, d.ReleaseStream(side))
	mustFree(t, a, again)
	require.NoError(t, a.ReleasePool(pool))
	requireDrained(t, a, d)
}

func TestPoolMisuse(t *testing.T) {
	a, _ := newAlloc(t, 0, Config{})
	b, _ := newAlloc(t, 0, Config{})
	other := b.NewPool()
	for _, err := range []error{
		a.BeginCapture(0, nil),
		a.BeginCapture(0, other),
		a.EndCapture(device.Stream(7)),
		a.ReleasePool(nil),
		a.ReleasePool(other),
	} {
		require.Error(t, err)
		assert.False(t, errors.Is(err, ErrCaptureUnderway), err.Error())
	}
}

// mustAllocFree allocates size bytes on stream 0 and frees them at once, returning the
// address it got.
func mustAllocFree(t *testing.T, a *Allocator, size int64) device.Ptr {
	p := mustAlloc(t, a, size, 0)
	mustFree(t, a, p)
	return p
}
