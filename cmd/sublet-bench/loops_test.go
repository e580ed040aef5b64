package main

import (
	"bytes"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/sim"
)

// newSim is a meta simulated device of capacity bytes (0: an H200) whose raw calls
// cost nothing.
func newSim(t *testing.T, capacity int64) *sim.Device {
	t.Helper()
	d, err := sim.New(sim.Options{Capacity: capacity, Cost: &sim.CostModel{}})
	require.NoError(t, err)
	return d
}

// newSimAllocator is an experiment's allocator over a fresh simulated H200.
func newSimAllocator(t *testing.T) (*alloc.Allocator, *sim.Device) {
	t.Helper()
	d := newSim(t, 0)
	a, err := newAllocator(d)
	require.NoError(t, err)
	return a, d
}

// requireDeviceEmpty checks that the experiment gave back all the device memory.
func requireDeviceEmpty(t *testing.T, d *sim.Device) {
	t.Helper()
	require.Zero(t, d.Stats().InUse, "device bytes in use after the experiment")
}

// quick is a bench whose figures are measured over a nanosecond: one batch each.
func quick() (*bench, *bytes.Buffer) {
	var out bytes.Buffer
	return &bench{per: time.Nanosecond, out: &out}, &out
}

func TestMeasureCountsEveryCall(t *testing.T) {
	calls := int64(0)
	per, n, err := measure(time.Millisecond, func() error { calls++; return nil })
	require.NoError(t, err)
	assert.Equal(t, calls, n)
	assert.GreaterOrEqual(t, per, time.Duration(0))

	// Batches of 1, 2, 4...: the error in the third call ends the second batch, and
	// only the first batch counts.
	calls = 0
	errStep := errors.New("step failed")
	_, n, err = measure(time.Hour, func() error {
		if calls++; calls == 3 {
			return errStep
		}
		return nil
	})
	require.ErrorIs(t, err, errStep)
	assert.Equal(t, int64(1), n)
}

// churn follows torch_alloc_cpp.py's LCG: the live slots are those a recount of the
// same sequence says, with the sizes it says.
func TestChurnFollowsTheLCG(t *testing.T) {
	a, d := newSimAllocator(t)
	c := &churn{a: a, x: 42}
	const steps = 5000
	for range steps {
		require.NoError(t, c.step())
	}
	var live [64]int64
	x := uint64(42)
	for range steps {
		x = x*6364136223846793005 + 1442695040888963407
		s := (x >> 33) % 64
		if live[s] != 0 {
			live[s] = 0
		} else {
			live[s] = int64(512 * (1 + (x>>17)%8192))
		}
	}
	var n, bytes int64
	for s, size := range live {
		assert.Equal(t, size != 0, c.slot[s] != 0, "slot %d", s)
		if size != 0 {
			n++
			bytes += size
		}
	}
	st := a.Stats()
	assert.Equal(t, n, st.Allocation[alloc.StatAll].Current)
	assert.Equal(t, bytes, st.RequestedBytes[alloc.StatAll].Current)
	require.NoError(t, c.drain())
	assert.Equal(t, [64]device.Ptr{}, c.slot)
	require.NoError(t, drain(a))
	requireDeviceEmpty(t, d)
}

func TestPairStepLeavesOneCachedSegment(t *testing.T) {
	a, d := newSimAllocator(t)
	step := pairStep(a, 20<<20)
	for range 10 {
		require.NoError(t, step())
	}
	st := a.Stats()
	assert.Zero(t, st.Allocation[alloc.StatAll].Current)
	assert.Equal(t, int64(10), st.Allocation[alloc.StatAll].Allocated)
	assert.Equal(t, int64(1), st.NumDeviceAlloc, "one segment, then the cache")
	require.NoError(t, drain(a))
	requireDeviceEmpty(t, d)
}

// drain refuses an allocator that still holds a live block.
func TestDrainReportsALeak(t *testing.T) {
	a, d := newSimAllocator(t)
	p, err := a.Alloc(1000, 0)
	require.NoError(t, err)
	assert.EqualError(t, drain(a), "1024 bytes still allocated at the end")
	require.NoError(t, a.Free(p))
	require.NoError(t, drain(a))
	requireDeviceEmpty(t, d)
}

// Each experiment's figures, on a simulated device with a free cost model.
func TestExperimentsReportTheirCases(t *testing.T) {
	for _, c := range []struct {
		run   func(*bench, device.Device) error
		cases []string
		unit  string
	}{
		{runPair, []string{"512B", "1MiB", "20MiB", "256MiB"}, "ns/pair"},
		{runChurn, []string{"64 slots 512B-4MiB"}, "ns/step"},
		{runEmptyCache, []string{"never", "every epoch (500)", "every 100", "every 1"}, "steps/s"},
	} {
		d := newSim(t, 0)
		b, out := quick()
		require.NoError(t, c.run(b, d))
		require.Len(t, b.results, len(c.cases))
		for i, r := range b.results {
			assert.Equal(t, c.cases[i], r.Case)
			assert.Equal(t, c.unit, r.Unit)
			assert.Equal(t, "sim", r.Device)
			assert.Positive(t, r.N)
		}
		assert.Equal(t, len(c.cases), bytes.Count(out.Bytes(), []byte("\n")), "one line per figure")
		requireDeviceEmpty(t, d)
	}
}

// An experiment that fails (here: the device is too small) reports the error and still
// gives the device back.
func TestFailedExperimentsGiveTheDeviceBack(t *testing.T) {
	for _, c := range []struct {
		name     string
		run      func(*bench, device.Device) error
		capacity int64
	}{
		{"pair", runPair, 100 << 20},
		{"churn", runChurn, 40 << 20},
		{"emptycache: the model does not fit", runEmptyCache, 500 << 20},
		{"emptycache: a step does not fit", runEmptyCache, 1000 << 20},
	} {
		d := newSim(t, c.capacity)
		b, _ := quick()
		err := c.run(b, d)
		var oom *alloc.OOMError
		require.ErrorAs(t, err, &oom, c.name)
		assert.Zero(t, d.Stats().InUse, "%s: device bytes in use after the failure", c.name)
	}
}

// A concurrent worker that fails gives back its blocks (its figures depend on timing;
// its cleanup does not).
func TestFailedChurnWorkerFreesItsSlots(t *testing.T) {
	for _, touch := range []bool{false, true} {
		d := newSim(t, 1<<20) // not even one 2 MiB segment
		a, err := newAllocator(d)
		require.NoError(t, err)
		var stop atomic.Bool
		var ops atomic.Int64
		err = churnWorker(d, a, 1, touch, &stop, &ops)
		var oom *alloc.OOMError
		require.ErrorAs(t, err, &oom)
		assert.Zero(t, ops.Load(), "no batch completed")
		require.NoError(t, drain(a))
		requireDeviceEmpty(t, d)
	}
}
