package alloc

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/sim"
)

// Device failures other than OOM: each is returned, wrapped with the operation, and
// leaves the allocator's accounts equal to what the device holds; once the device
// works again, everything is given back.

// requireAccountsMatch checks the invariants and that reserved bytes are what the device
// holds.
func requireAccountsMatch(t *testing.T, a *Allocator, d *sim.Device) {
	t.Helper()
	checkInvariants(t, a)
	require.Equal(t, d.Stats().InUse, cur(a.Stats().ReservedBytes), "reserved bytes are what the device holds")
}

func TestNewErrors(t *testing.T) {
	_, err := New(nil, Config{})
	assert.ErrorContains(t, err, "nil device")

	f := newFlaky(newSim(t, 0))
	f.failNext("MemInfo", always)
	_, err = New(f, Config{ExpandableSegments: true})
	require.ErrorIs(t, err, errBroken)
	assert.ErrorContains(t, err, "reading total memory for expandable segments")
	_, err = New(f, Config{PerProcessMemoryFraction: 0.5})
	require.ErrorIs(t, err, errBroken)
	assert.ErrorContains(t, err, "SetMemoryFraction(0.5)")

	_, err = New(f, Config{MaxSplitSize: MiB})
	assert.EqualError(t, err, "alloc: config: MaxSplitSize: 1048576 bytes is too small; want 0 (unlimited) or at least 20971520 (20 MiB)")
}

// Config.PerProcessMemoryFraction caps reserved memory as SetMemoryFraction does.
func TestConfigFractionCapsReservedMemory(t *testing.T) {
	a, d := newAlloc(t, 100*MiB, Config{PerProcessMemoryFraction: 0.5})
	p := mustAlloc(t, a, 30*MiB, 0)
	_, err := a.Alloc(30*MiB, 0)
	var oom *OOMError
	require.ErrorAs(t, err, &oom)
	assert.Equal(t, int64(50*MiB), oom.Allowed)
	assert.Equal(t, int64(1), d.Stats().Mallocs)
	mustFree(t, a, p)
	requireDrained(t, a, d)
}

func TestForConfigWithABadConfigRegistersNothing(t *testing.T) {
	d := newSim(t, 0)
	_, err := ForConfig(d, Config{MaxSplitSize: 1})
	var ce *ConfigError
	require.ErrorAs(t, err, &ce)
	a, err := ForConfig(d, Config{MaxSplitSize: 30 * MiB})
	require.NoError(t, err, "the failed call left no allocator behind")
	assert.Equal(t, int64(30*MiB), a.Config().MaxSplitSize)
	requireDrained(t, a, d)
}

func TestSetMemoryFractionWithoutMemInfo(t *testing.T) {
	a, f, d := newFlakyAlloc(t, 64*MiB, Config{})
	f.failNext("MemInfo", always)
	require.ErrorIs(t, a.SetMemoryFraction(0.1), errBroken)
	p := mustAlloc(t, a, 40*MiB, 0) // more than 0.1 × 64 MiB: no cap was set
	mustFree(t, a, p)
	requireDrained(t, a, d)
}

// A failed event query fails the Alloc that processes events; the pending block stays
// pending and is reused once queries work.
func TestQueryEventFailure(t *testing.T) {
	a, f, d := newFlakyAlloc(t, 0, Config{})
	s1 := newStream(t, d, true)
	p := mustAlloc(t, a, 4096, 0)
	require.NoError(t, a.RecordStream(p, s1))
	mustFree(t, a, p)
	before := a.Stats()
	f.failNext("QueryEvent", always)
	_, err := a.Alloc(4096, 0)
	require.ErrorIs(t, err, errBroken)
	assert.ErrorContains(t, err, "alloc: Alloc(4096) on sim")
	assert.Equal(t, before, a.Stats())
	requireAccountsMatch(t, a, d)
	f.heal("QueryEvent")
	require.NoError(t, d.ReleaseStream(s1))
	q := mustAlloc(t, a, 4096, 0)
	assert.Equal(t, p, q)
	mustFree(t, a, q)
	requireDrained(t, a, d)
}

// EmptyCache stops at an event it cannot wait for: the blocks of the events before it
// are freed, the rest stay pending.
func TestSynchronizeEventFailure(t *testing.T) {
	a, f, d := newFlakyAlloc(t, 0, Config{})
	s1 := newStream(t, d, true)
	p := mustAlloc(t, a, 4096, 0)
	q := mustAlloc(t, a, 8192, 0)
	require.NoError(t, a.RecordStream(p, s1))
	require.NoError(t, a.RecordStream(q, s1))
	mustFree(t, a, p, q)
	f.failNext("SynchronizeEvent", 2)
	err := a.EmptyCache()
	require.ErrorIs(t, err, errBroken)
	assert.ErrorContains(t, err, "alloc: EmptyCache on sim")
	st := a.Stats()
	assert.Equal(t, int64(8192), cur(st.ActiveBytes), "p's event was waited for, q's failed")
	assert.Equal(t, int64(SmallBuffer), cur(st.ReservedBytes), "nothing released")
	requireAccountsMatch(t, a, d)
	requireDrained(t, a, d)
}

// When the second of two streams can neither get an event nor be waited for, Free
// fails, the allocation stays live and the events go back to the pool.
func TestRecordUsesFailureOnTheSecondStream(t *testing.T) {
	a, f, d := newFlakyAlloc(t, 0, Config{})
	s1, s2 := newStream(t, d, true), newStream(t, d, true)
	p := mustAlloc(t, a, 4096, 0)
	require.NoError(t, a.RecordStream(p, s1))
	require.NoError(t, a.RecordStream(p, s2))
	before := a.Stats()
	f.failNext("RecordEvent", 2)
	f.failNext("SynchronizeStream", always)
	err := a.Free(p)
	require.ErrorIs(t, err, errBroken)
	assert.ErrorContains(t, err, "stays live")
	assert.Equal(t, before, a.Stats())
	a.mu.Lock()
	assert.Len(t, a.events.spare, 2, "both events are back in the pool: s1's and the one s2 could not record")
	a.mu.Unlock()
	checkInvariants(t, a)
	f.heal("SynchronizeStream")
	mustFree(t, a, p)
	require.NoError(t, d.ReleaseStream(s1))
	require.NoError(t, d.ReleaseStream(s2))
	requireDrained(t, a, d)
}

// Without a new event, Free waits for the other stream instead.
func TestNewEventFailureSynchronizesInstead(t *testing.T) {
	a, f, d := newFlakyAlloc(t, 0, Config{})
	s1 := newStream(t, d, true)
	p := mustAlloc(t, a, 4096, 0)
	require.NoError(t, a.RecordStream(p, s1))
	f.failNext("NewEvent", always)
	mustFree(t, a, p)
	assert.Zero(t, cur(a.Stats().ActiveBytes), "free at once")
	assert.Equal(t, int64(1), d.Stats().StreamSyncs)
	requireDrained(t, a, d)
}

// A segment the device will not take back stays cached and counted.
func TestDeviceFreeFailure(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  Config
		// fill leaves cached blocks; then Alloc(size) must release one.
		fill func(t *testing.T, a *Allocator)
		size int64
	}{
		{"EmptyCache", Config{}, func(t *testing.T, a *Allocator) { mustFree(t, a, mustAlloc(t, a, 30*MiB, 0)) }, 0},
		{"garbage collection", Config{GarbageCollectionThreshold: 0.5, PerProcessMemoryFraction: 1},
			func(t *testing.T, a *Allocator) {
				mustFree(t, a, mustAlloc(t, a, 30*MiB, 0), mustAlloc(t, a, 30*MiB, 0))
			}, 40 * MiB},
		{"release_available_cached_blocks", Config{MaxSplitSize: 20 * MiB},
			func(t *testing.T, a *Allocator) { mustFree(t, a, mustAlloc(t, a, 60*MiB, 0)) }, 70 * MiB},
		{"last-resort retry", Config{}, func(t *testing.T, a *Allocator) { mustFree(t, a, mustAlloc(t, a, 60*MiB, 0)) }, 70 * MiB},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, f, d := newFlakyAlloc(t, 100*MiB, c.cfg)
			c.fill(t, a)
			before := a.Stats()
			f.failNext("Free", always)
			var err error
			if c.size == 0 {
				err = a.EmptyCache()
			} else {
				_, err = a.Alloc(c.size, 0)
			}
			require.ErrorIs(t, err, errBroken)
			assert.ErrorContains(t, err, "freeing a ")
			var oom *OOMError
			assert.NotErrorAs(t, err, &oom)
			assert.Equal(t, cur(before.ReservedBytes), cur(a.Stats().ReservedBytes))
			assert.Zero(t, a.Stats().NumDeviceFree)
			requireAccountsMatch(t, a, d)
			f.heal("Free")
			requireDrained(t, a, d)
		})
	}
}

func TestExpandableDeviceFailures(t *testing.T) {
	for _, c := range []struct {
		op   string
		n    int64
		want string
		// free: the failure hits EmptyCache after a 50 MiB block was freed; otherwise
		// it hits Alloc(50 MiB).
		free bool
	}{
		{"Reserve", 1, "reserving", false},
		{"Map", 1, "Map: device broken", false},
		{"Map", 2, "Map: device broken", false},
		{"SynchronizeStream", 1, "synchronizing stream 0 before unmapping", true},
		{"Unmap", 1, "unmapping page", true},
		{"Unreserve", 1, "releasing the address range", true},
	} {
		a, f, d := newFlakyAlloc(t, 0, Config{ExpandableSegments: true})
		var err error
		if c.free {
			mustFree(t, a, mustAlloc(t, a, 50*MiB, 0))
			f.failNext(c.op, c.n)
			err = a.EmptyCache()
		} else {
			f.failNext(c.op, c.n)
			_, err = a.Alloc(50*MiB, 0)
		}
		require.ErrorIs(t, err, errBroken, c.op)
		assert.ErrorContains(t, err, c.want, c.op)
		assert.Zero(t, cur(a.Stats().AllocatedBytes), c.op)
		requireAccountsMatch(t, a, d)
		f.heal(c.op)
		p := mustAlloc(t, a, 50*MiB, 0)
		mustFree(t, a, p)
		requireDrained(t, a, d)
		assert.Equal(t, d.Stats().Reserves, d.Stats().Unreserves, "%s: every reservation went back", c.op)
	}
}

var _ device.VirtualMemory = (*flaky)(nil)
