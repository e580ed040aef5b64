package pinned

import (
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/sim"
)

var errBroken = errors.New("device broken")

// flakyEvents is a simulated device whose event calls fail while the matching flag is
// set. The flags are atomic: the background goroutine reads them.
type flakyEvents struct {
	*sim.Device
	newFails, queryFails, destroyFails atomic.Bool
}

func (d *flakyEvents) NewEvent() (device.Event, error) {
	if d.newFails.Load() {
		return 0, errBroken
	}
	return d.Device.NewEvent()
}

func (d *flakyEvents) QueryEvent(e device.Event) (bool, error) {
	if d.queryFails.Load() {
		return false, errBroken
	}
	return d.Device.QueryEvent(e)
}

func (d *flakyEvents) DestroyEvent(e device.Event) error {
	if d.destroyFails.Load() {
		return errBroken
	}
	return d.Device.DestroyEvent(e)
}

func newFlaky(t *testing.T, cfg alloc.PinnedConfig) (*sim.Device, *flakyEvents, *Allocator) {
	t.Helper()
	f, a := newOver(t, cfg, func(s *sim.Device) *flakyEvents { return &flakyEvents{Device: s} })
	return f.Device, f, a
}

// A failed event query keeps the parked block parked (it may still be in use) and is
// reported by every call that processes events; once queries work again, it is reused.
func TestQueryFailureKeepsTheBlockParked(t *testing.T) {
	s, f, a := newFlaky(t, alloc.PinnedConfig{})
	st := newStream(t, s, true)
	b := mustAlloc(t, a, 4096)
	require.NoError(t, a.RecordEvent(b, st))
	require.NoError(t, a.Free(b))

	f.queryFails.Store(true)
	_, err := a.Alloc(4096)
	require.ErrorIs(t, err, errBroken)
	assert.ErrorContains(t, err, "querying the event of a parked block")
	require.ErrorIs(t, a.EmptyCache(), errBroken)
	require.ErrorIs(t, a.Close(), errBroken)
	stats := a.Stats()
	assert.Equal(t, int64(1), stats.Allocations.Current, "the parked block is kept")
	assert.Zero(t, stats.ActiveRequests.Current)

	f.queryFails.Store(false)
	require.NoError(t, s.ReleaseStream(st))
	b2 := mustAlloc(t, a, 4096)
	assert.Equal(t, base(b), base(b2))
	require.NoError(t, a.Free(b2))
	requireEmpty(t, a)
}

// Without a new event, Free waits for the stream instead: the block is cached at once
// and Free reports why it waited.
func TestNewEventFailureWaitsForTheStream(t *testing.T) {
	s, f, a := newFlaky(t, alloc.PinnedConfig{})
	st := newStream(t, s, true)
	b := mustAlloc(t, a, 100)
	require.NoError(t, a.RecordEvent(b, st))
	f.newFails.Store(true)
	err := a.Free(b)
	require.ErrorIs(t, err, errBroken)
	assert.ErrorContains(t, err, "creating an event")
	assert.Equal(t, int64(1), s.Stats().StreamSyncs)
	f.newFails.Store(false)
	b2 := mustAlloc(t, a, 100)
	assert.Equal(t, base(b), base(b2), "the stream was waited for: the block was cached")
	require.NoError(t, a.Free(b2))
	requireEmpty(t, a)
}

// Close reports the events it cannot destroy, after releasing the cache.
func TestCloseReportsEventsItCannotDestroy(t *testing.T) {
	s, f, a := newFlaky(t, alloc.PinnedConfig{})
	st := newStream(t, s, false)
	b := mustAlloc(t, a, 100)
	require.NoError(t, a.RecordEvent(b, st))
	require.NoError(t, a.Free(b))
	b2 := mustAlloc(t, a, 100) // processes the completed event, which goes idle
	require.NoError(t, a.Free(b2))
	f.destroyFails.Store(true)
	err := a.Close()
	require.ErrorIs(t, err, errBroken)
	assert.ErrorContains(t, err, "pinned: Close")
	stats := a.Stats()
	assert.Zero(t, stats.Allocations.Current, "the cache was released first")
	assert.Equal(t, int64(1), stats.NumHostFree)
}

// A block the system will not take back stays cached, counted and usable.
func TestHostFreeFailureKeepsTheBlock(t *testing.T) {
	f, a := newFake(t, alloc.PinnedConfig{})
	b := mustAlloc(t, a, 3000)
	require.NoError(t, a.Free(b))
	f.freeErr = errBroken
	err := a.EmptyCache()
	require.ErrorIs(t, err, errBroken)
	assert.ErrorContains(t, err, "pinned: EmptyCache")
	stats := a.Stats()
	assert.Equal(t, int64(1), stats.Allocations.Current)
	assert.Equal(t, int64(4096), stats.AllocatedBytes.Current)
	assert.Zero(t, stats.NumHostFree)
	b2 := mustAlloc(t, a, 4000)
	assert.Equal(t, base(b), base(b2), "still cached")
	require.NoError(t, a.Free(b2))
	f.freeErr = nil
	requireEmpty(t, a)
	assert.Zero(t, f.live)
}

func TestRecordEventOfForeignMemory(t *testing.T) {
	_, a := newSim(t)
	assert.ErrorContains(t, a.RecordEvent(make([]byte, 8), 0), "not memory from this allocator")
}
