package alloc

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/sim"
)

func TestOversizeBlocksAreNeverSplit(t *testing.T) {
	a, d := newAlloc(t, 0, Config{MaxSplitSize: 40 * MiB})
	p := mustAlloc(t, a, 50*MiB, 0)
	mustFree(t, a, p)
	// A 45 MiB request is oversize (≥ M) and 50 < 45 + 20: it takes the whole block.
	q := mustAlloc(t, a, 45*MiB, 0)
	assert.Equal(t, p, q)
	st := a.Stats()
	assert.Equal(t, int64(50*MiB), cur(st.AllocatedBytes), "not split: the whole 50 MiB block")
	assert.Equal(t, int64(45*MiB), cur(st.RequestedBytes))
	assert.Zero(t, cur(st.InactiveSplit))
	assert.Equal(t, int64(1), st.OversizeAllocations.Current)
	mustFree(t, a, q)
	requireDrained(t, a, d)
}

func TestSmallRequestsNeverTakeOversizeBlocks(t *testing.T) {
	a, d := newAlloc(t, 0, Config{MaxSplitSize: 40 * MiB})
	p := mustAlloc(t, a, 50*MiB, 0)
	mustFree(t, a, p)
	q := mustAlloc(t, a, 30*MiB, 0) // < M: the cached 50 MiB block is not offered
	assert.NotEqual(t, p, q)
	st := a.Stats()
	assert.Equal(t, int64(2), cur(st.Segment))
	assert.Equal(t, int64(80*MiB), cur(st.ReservedBytes))
	assert.Equal(t, int64(1), st.OversizeSegments.Current)
	assert.Zero(t, st.OversizeAllocations.Current)
	mustFree(t, a, q)
	requireDrained(t, a, d)
}

func TestOversizeReuseNeedsWasteBelowR(t *testing.T) {
	for _, c := range []struct {
		r         int64 // MaxNonSplitRounding; 0 = 20 MiB
		request   int64
		reused    bool
		rationale string
	}{
		{0, 81 * MiB, true, "100 < 81 + 20"},
		{0, 80 * MiB, false, "100 ≥ 80 + 20"},
		{64 * MiB, 40 * MiB, true, "100 < 40 + 64"},
		{64 * MiB, 36 * MiB, false, "100 ≥ 36 + 64"},
	} {
		a, d := newAlloc(t, 0, Config{MaxSplitSize: 30 * MiB, MaxNonSplitRounding: c.r})
		p := mustAlloc(t, a, 100*MiB, 0)
		mustFree(t, a, p)
		q := mustAlloc(t, a, c.request, 0)
		assert.Equal(t, c.reused, p == q, c.rationale)
		mustFree(t, a, q)
		checkInvariants(t, a)
		requireDrained(t, a, d)
	}
}

// A large request below M still splits a non-oversize block; with M set it does not
// split an oversize segment it got fresh either.
func TestSplitRespectsMaxSplitSize(t *testing.T) {
	a, d := newAlloc(t, 0, Config{MaxSplitSize: 21 * MiB})
	p := mustAlloc(t, a, 20*MiB+512, 0) // 22 MiB segment ≥ M, request < M: split
	st := a.Stats()
	assert.Equal(t, int64(22*MiB), cur(st.ReservedBytes))
	assert.Equal(t, int64(20*MiB+512), cur(st.AllocatedBytes))
	assert.Equal(t, int64(1), cur(st.InactiveSplit))
	assert.Equal(t, int64(1), st.OversizeSegments.Current)
	assert.Zero(t, st.OversizeAllocations.Current)
	q := mustAlloc(t, a, 24*MiB-512, 0) // ≥ M: its 24 MiB segment is not split
	assert.Equal(t, 20*MiB+512+24*MiB, cur(a.Stats().AllocatedBytes), "the 24 MiB segment is handed out whole")
	mustFree(t, a, p, q)
	requireDrained(t, a, d)
}

// failNextMalloc makes the next raw allocation of d fail as out of memory.
func failNextMalloc(t *testing.T, d *sim.Device) {
	t.Helper()
	require.NoError(t, d.SetFaults(sim.Faults{Nth: 1}))
}

func TestReleaseAvailableCachedBlocksOneBlock(t *testing.T) {
	a, d := newAlloc(t, 0, Config{MaxSplitSize: 40 * MiB})
	big := mustAlloc(t, a, 100*MiB, 0)
	small := mustAlloc(t, a, 50*MiB, 0)
	mustFree(t, a, big, small)
	// 60 MiB: the cached 100 MiB block wastes ≥ 20 MiB, the 50 MiB one is too small.
	failNextMalloc(t, d)
	p := mustAlloc(t, a, 60*MiB, 0)
	st := a.Stats()
	// The first attempt failed; release_available_cached_blocks released the first
	// block ≥ max(60, 40) MiB (the 100 MiB one) and the second attempt succeeded.
	assert.Equal(t, int64(1), st.NumDeviceFree)
	assert.Equal(t, int64(3), st.NumDeviceAlloc)
	assert.Zero(t, st.NumAllocRetries)
	assert.Zero(t, st.NumSyncAllStreams)
	assert.Zero(t, st.NumOOMs)
	assert.Equal(t, int64(110*MiB), cur(st.ReservedBytes), "50 cached + 60 new")
	assert.Equal(t, int64(2), st.OversizeSegments.Current)
	mustFree(t, a, p)
	requireDrained(t, a, d)
}

func TestReleaseAvailableCachedBlocksLargestFirst(t *testing.T) {
	a, d := newAlloc(t, 0, Config{MaxSplitSize: 40 * MiB})
	var ps []device.Ptr
	for _, s := range []int64{44 * MiB, 50 * MiB, 60 * MiB, 30 * MiB} {
		ps = append(ps, mustAlloc(t, a, s, 0))
	}
	mustFree(t, a, ps...)
	// 100 MiB: no block ≥ 100 MiB; oversize blocks go from the largest down until
	// 100 MiB were released: 60 + 50. The 44 MiB one and the 30 MiB (not oversize)
	// stay.
	failNextMalloc(t, d)
	p := mustAlloc(t, a, 100*MiB, 0)
	st := a.Stats()
	assert.Equal(t, int64(2), st.NumDeviceFree)
	assert.Zero(t, st.NumAllocRetries)
	assert.Equal(t, int64((44+30+100)*MiB), cur(st.ReservedBytes))
	mustFree(t, a, p)

	// A shortfall: 400 MiB. The oversize blocks (100, 44) are released, which is not
	// enough, so the whole cache is released and the retry counted.
	failNextMalloc(t, d)
	p = mustAlloc(t, a, 400*MiB, 0)
	st = a.Stats()
	assert.Equal(t, int64(5), st.NumDeviceFree, "100 and 44 by the first step, 30 by release_cached_blocks")
	assert.Equal(t, int64(1), st.NumAllocRetries)
	assert.Equal(t, int64(1), st.NumSyncAllStreams)
	assert.Equal(t, int64(400*MiB), cur(st.ReservedBytes))
	mustFree(t, a, p)
	requireDrained(t, a, d)
}

func TestReleaseAvailableCachedBlocksOnlyOwnStream(t *testing.T) {
	a, d := newAlloc(t, 0, Config{MaxSplitSize: 40 * MiB})
	s1 := newStream(t, d, false)
	p := mustAlloc(t, a, 100*MiB, s1)
	mustFree(t, a, p)
	failNextMalloc(t, d)
	q := mustAlloc(t, a, 60*MiB, 0)
	st := a.Stats()
	// Stream 0 has no cached block: step one releases nothing, step two releases the
	// stream 1 block with the whole cache, and the retry succeeds.
	assert.Equal(t, int64(1), st.NumAllocRetries)
	assert.Equal(t, int64(1), st.NumDeviceFree)
	mustFree(t, a, q)
	requireDrained(t, a, d)
}

func TestWithoutMaxSplitOnlyTheLastResortRetry(t *testing.T) {
	a, d := newAlloc(t, 0, Config{})
	p := mustAlloc(t, a, 4096, 0)
	mustFree(t, a, p)
	failNextMalloc(t, d)
	q := mustAlloc(t, a, 30*MiB, 0)
	st := a.Stats()
	assert.Equal(t, int64(1), st.NumAllocRetries)
	assert.Equal(t, int64(1), st.NumSyncAllStreams)
	assert.Equal(t, int64(1), st.NumDeviceFree, "the cached small segment was released")
	assert.Equal(t, int64(2), st.NumDeviceAlloc)
	assert.Equal(t, int64(30*MiB), cur(st.ReservedBytes))
	assert.Zero(t, st.NumOOMs)
	mustFree(t, a, q)
	requireDrained(t, a, d)
}
