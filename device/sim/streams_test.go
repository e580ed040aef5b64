package sim

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/device"
)

func done(t *testing.T, d *Device, e device.Event) bool {
	t.Helper()
	ok, err := d.QueryEvent(e)
	require.NoError(t, err)
	return ok
}

func events(t *testing.T, d *Device, n int) []device.Event {
	t.Helper()
	es := make([]device.Event, n)
	for i := range es {
		var err error
		es[i], err = d.NewEvent()
		require.NoError(t, err)
	}
	return es
}

func heldStream(t *testing.T, d *Device) device.Stream {
	t.Helper()
	s, err := d.NewStream()
	require.NoError(t, err)
	require.NoError(t, d.HoldStream(s))
	return s
}

func TestHeldStreamKeepsEventsPending(t *testing.T) {
	d := newSim(t, Options{})
	s := heldStream(t, d)
	e := events(t, d, 2)
	require.NoError(t, d.RecordEvent(e[0], s))
	require.NoError(t, d.RecordEvent(e[1], 0))
	assert.False(t, done(t, d, e[0]), "recorded on a held stream")
	assert.True(t, done(t, d, e[1]), "the default stream is not held")
	require.NoError(t, d.ReleaseStream(s))
	assert.True(t, done(t, d, e[0]), "released")
	require.NoError(t, d.RecordEvent(e[0], s))
	assert.True(t, done(t, d, e[0]), "a released stream holds nothing more")
}

func TestSynchronizationCompletesHeldEvents(t *testing.T) {
	d := newSim(t, Options{})
	s := heldStream(t, d)
	e := events(t, d, 3)
	require.NoError(t, d.RecordEvent(e[0], s))
	require.NoError(t, d.RecordEvent(e[1], s))
	require.NoError(t, d.SynchronizeEvent(e[0]))
	assert.True(t, done(t, d, e[0]))
	assert.False(t, done(t, d, e[1]), "recorded after the synchronized event")
	require.NoError(t, d.SynchronizeStream(s))
	assert.True(t, done(t, d, e[1]))
	require.NoError(t, d.RecordEvent(e[2], s))
	assert.False(t, done(t, d, e[2]), "the stream stays held after a synchronization")
	require.NoError(t, d.Synchronize())
	assert.True(t, done(t, d, e[2]))

	// Re-recording an event follows its latest record.
	require.NoError(t, d.RecordEvent(e[0], s))
	assert.False(t, done(t, d, e[0]))
	require.NoError(t, d.DestroyStream(s))
	assert.True(t, done(t, d, e[0]), "a destroyed stream's work completes")

	st := d.Stats()
	assert.Equal(t, int64(1), st.EventSyncs)
	assert.Equal(t, int64(1), st.StreamSyncs)
	assert.Equal(t, int64(1), st.DeviceSyncs)
	assert.Equal(t, int64(7), st.EventQueries)
}

func TestHoldingTheDefaultStream(t *testing.T) {
	d := newSim(t, Options{})
	require.NoError(t, d.HoldStream(0))
	e := events(t, d, 1)
	require.NoError(t, d.RecordEvent(e[0], 0))
	assert.False(t, done(t, d, e[0]))
	require.NoError(t, d.SynchronizeStream(0))
	assert.True(t, done(t, d, e[0]))
}

func TestHoldUnknownStream(t *testing.T) {
	d := newSim(t, Options{})
	require.Error(t, d.HoldStream(5))
	require.Error(t, d.ReleaseStream(5))
	s, err := d.NewStream()
	require.NoError(t, err)
	require.NoError(t, d.DestroyStream(s))
	require.Error(t, d.HoldStream(s))
}

// Stats reads the counters mu guards and those streamMu guards each under its own lock,
// so it may run while other goroutines synchronize and allocate. Under go test -race a
// race, if any, is reported whatever the timing: the goroutines share nothing but the
// device's locks (and an atomic only stored on failure; no testing.T calls, which lock),
// and Stats is called until it has seen every counter move.
func TestStatsWhileOthersSynchronize(t *testing.T) {
	d := newSim(t, Options{Cost: &CostModel{}})
	e := events(t, d, 1)[0]
	var failed atomic.Bool
	var syncErr, mallocErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		syncErr = errors.Join(d.SynchronizeStream(0), d.Synchronize(), d.SynchronizeEvent(e))
		if _, err := d.QueryEvent(e); err != nil {
			syncErr = errors.Join(syncErr, err)
		}
		if syncErr != nil {
			failed.Store(true)
		}
	})
	wg.Go(func() {
		p, err := d.Malloc(mib)
		if err == nil {
			err = d.Free(p)
		}
		if mallocErr = err; err != nil {
			failed.Store(true)
		}
	})
	want := Stats{Peak: mib, Mallocs: 1, Frees: 1, StreamSyncs: 1, DeviceSyncs: 1, EventSyncs: 1, EventQueries: 1}
	for d.Stats() != want && !failed.Load() {
	}
	wg.Wait()
	require.NoError(t, syncErr)
	require.NoError(t, mallocErr)
	assert.Equal(t, want, d.Stats())
}
