package alloc

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/subletml/sublet/device"
)

// The garbage collector releases, in one pass, every unsplit large block at least as
// old as the average, even past the target; younger blocks stay.
func TestGarbageCollectionOnePass(t *testing.T) {
	a, d := newAlloc(t, 2000*MiB, Config{GarbageCollectionThreshold: 0.35})
	require.NoError(t, a.SetMemoryFraction(0.5)) // allowed 1000 MiB, GC above 350 MiB
	pa := mustAlloc(t, a, 100*MiB, 0)            // large-pool searches: 1
	pb := mustAlloc(t, a, 100*MiB, 0)            // 2
	pc := mustAlloc(t, a, 100*MiB, 0)            // 3
	mustFree(t, a, pa, pb)                       // ages count from 3
	pd := mustAlloc(t, a, 110*MiB, 0)            // 4: a miss; reserved 300 ≤ 350, no GC
	mustFree(t, a, pc)                           // age counts from 4
	require.Equal(t, int64(410*MiB), cur(a.Stats().ReservedBytes))
	// Search 5 misses with 410 > 350 reserved: target 60 MiB; ages 2, 2, 1, average
	// 5/3; the two 100 MiB blocks of age 2 go in one pass, the age-1 block stays.
	pe := mustAlloc(t, a, 120*MiB, 0)
	st := a.Stats()
	assert.Equal(t, int64(2), st.NumDeviceFree)
	assert.Equal(t, int64((410-200+120)*MiB), cur(st.ReservedBytes))
	assert.Zero(t, st.NumSyncAllStreams, "garbage collection does not synchronize")
	assert.Zero(t, st.NumAllocRetries)
	q := mustAlloc(t, a, 100*MiB, 0)
	assert.Equal(t, pc, q, "the younger block was kept")
	mustFree(t, a, pd, pe, q)
	requireDrained(t, a, d)
}

// When a pass does not reach the target, the next pass recomputes the average over the
// blocks left.
func TestGarbageCollectionSeveralPasses(t *testing.T) {
	a, d := newAlloc(t, 2000*MiB, Config{GarbageCollectionThreshold: 0.3})
	require.NoError(t, a.SetMemoryFraction(0.5)) // GC above 300 MiB
	pa := mustAlloc(t, a, 100*MiB, 0)            // 1
	pb := mustAlloc(t, a, 100*MiB, 0)            // 2
	pc := mustAlloc(t, a, 100*MiB, 0)            // 3
	mustFree(t, a, pa)                           // from 3
	pd := mustAlloc(t, a, 110*MiB, 0)            // 4: reserved 300, not above 300
	mustFree(t, a, pb)                           // from 4
	// Search 5: 410 > 300, target 110. Pass 1: ages 2 and 1, average 1.5: the first
	// block goes (100 < 110). Pass 2: the other, age 1 = average, goes too.
	pe := mustAlloc(t, a, 120*MiB, 0)
	st := a.Stats()
	assert.Equal(t, int64(2), st.NumDeviceFree)
	assert.Equal(t, int64((100+110+120)*MiB), cur(st.ReservedBytes))
	mustFree(t, a, pc, pd, pe)
	requireDrained(t, a, d)
}

// Split blocks are not candidates, and without a memory fraction the threshold does
// nothing (as in PyTorch).
func TestGarbageCollectionNeedsFractionAndSkipsSplitBlocks(t *testing.T) {
	a, d := newAlloc(t, 2000*MiB, Config{GarbageCollectionThreshold: 0.1})
	var ps []device.Ptr
	for range 5 {
		ps = append(ps, mustAlloc(t, a, 100*MiB, 0))
	}
	mustFree(t, a, ps...)
	p := mustAlloc(t, a, 200*MiB, 0)
	assert.Zero(t, a.Stats().NumDeviceFree, "no fraction set: no garbage collection")
	mustFree(t, a, p)
	requireDrained(t, a, d)

	a, d = newAlloc(t, 2000*MiB, Config{GarbageCollectionThreshold: 0.1})
	require.NoError(t, a.SetMemoryFraction(0.5)) // GC above 100 MiB
	live := mustAlloc(t, a, 5*MiB, 0)            // 20 MiB segment, split
	old := mustAlloc(t, a, 100*MiB, 0)
	mustFree(t, a, old)
	q := mustAlloc(t, a, 150*MiB, 0) // 120 > 100: only the unsplit 100 MiB block is a candidate
	st := a.Stats()
	assert.Equal(t, int64(1), st.NumDeviceFree)
	assert.Equal(t, int64((20+150)*MiB), cur(st.ReservedBytes))
	mustFree(t, a, live, q)
	requireDrained(t, a, d)
}
