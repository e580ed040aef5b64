package recorder

import (
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/alloc/replay"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/sim"
)

func newAlloc(t *testing.T, capacity int64) *alloc.Allocator {
	d, err := sim.New(sim.Options{Capacity: capacity, Cost: &sim.CostModel{}})
	require.NoError(t, err)
	a, err := alloc.New(d, alloc.Config{})
	require.NoError(t, err)
	return a
}

// A recording replayed under the same settings on the same device ends in exactly the
// statistics the program had: every key of memory_stats(), OOMs included.
func TestReplayOfARecordingReproducesTheRun(t *testing.T) {
	a := newAlloc(t, 1<<30)
	before, err := a.Alloc(3<<20, 0) // not recorded; its free is left out too
	require.NoError(t, err)
	r, err := Start(a)
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(1, 2))
	var live []device.Ptr
	ooms := 0
	for i := range 3000 {
		if len(live) > 0 && rng.IntN(2) == 0 {
			k := rng.IntN(len(live))
			require.NoError(t, a.Free(live[k]))
			live = append(live[:k], live[k+1:]...)
			continue
		}
		p, err := a.Alloc(int64(1+rng.IntN(64))<<20, 0)
		if err != nil {
			ooms++
			continue
		}
		live = append(live, p)
		if i%500 == 0 {
			require.NoError(t, a.EmptyCache())
		}
	}
	want := a.StatsMap()
	require.NoError(t, a.Free(before))
	r.Stop()
	events := r.Events()
	require.NoError(t, replay.Validate(events), "valid: the free of the block from before is left out")
	require.Positive(t, ooms, "the workload hits the device's limit")
	path := filepath.Join(t.TempDir(), "rec.jsonl")
	require.NoError(t, r.WriteFile(path))
	read, err := replay.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, events, read)

	b := newAlloc(t, 1<<30)
	keep, err := b.Alloc(3<<20, 0) // the block allocated before the recording
	require.NoError(t, err)
	res, err := replay.Replay(b, events, false)
	require.NoError(t, err)
	require.NoError(t, b.Free(keep))
	assert.Equal(t, want, res.Final)
	assert.Equal(t, int64(ooms), res.Final["num_ooms"])

	for _, p := range live {
		require.NoError(t, a.Free(p))
	}
	require.NoError(t, a.EmptyCache())
	assert.Zero(t, a.Stats().ReservedBytes[alloc.StatAll].Current)
	for _, p := range res.Live {
		require.NoError(t, b.Free(p))
	}
	require.NoError(t, b.EmptyCache())
	assert.Zero(t, b.Stats().ReservedBytes[alloc.StatAll].Current)
}

func TestStreamsAndStop(t *testing.T) {
	a := newAlloc(t, 0)
	s, err := a.Device().NewStream()
	require.NoError(t, err)
	r, err := Start(a)
	require.NoError(t, err)
	p, err := a.Alloc(1000, s)
	require.NoError(t, err)
	q, err := a.Alloc(2000, 0)
	require.NoError(t, err)
	require.NoError(t, a.Free(p))
	r.Stop()
	require.NoError(t, a.Free(q))
	require.NoError(t, a.EmptyCache())
	assert.Equal(t, []replay.Event{
		{Op: replay.OpAlloc, ID: 0, Size: 1000, Stream: 1},
		{Op: replay.OpAlloc, ID: 1, Size: 2000},
		{Op: replay.OpFree, ID: 0},
	}, r.Events(), "nothing after Stop")
	assert.Zero(t, a.Stats().ReservedBytes[alloc.StatAll].Current)
}

// A recording keeps each allocation's lifetime hint, so that replayed under the planned
// policy it places the blocks as the program's allocator did: the replay ends in the
// program's statistics. Without the hints (a trace of the old format) the same replay
// keeps parameters and optimizer state among the step's blocks and ends elsewhere.
func TestRecordingKeepsLifetimeHints(t *testing.T) {
	planned := func() *alloc.Allocator {
		d, err := sim.New(sim.Options{Capacity: 1 << 30, Cost: &sim.CostModel{}})
		require.NoError(t, err)
		a, err := alloc.New(d, alloc.Config{Policy: alloc.PolicyPlanned})
		require.NoError(t, err)
		return a
	}
	a := planned()
	r, err := Start(a)
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(3, 4))
	hinted := func(n int64, l alloc.Lifetime) device.Ptr {
		p, err := a.AllocTagged(n, 0, alloc.Tag{Op: "test", Lifetime: l})
		require.NoError(t, err)
		return p
	}
	var long, step []device.Ptr
	for layer := range 6 {
		size := int64(1+rng.IntN(6)) << 20
		long = append(long, hinted(size, alloc.LifetimeParameter), hinted(size, alloc.LifetimeOptimizerState))
		step = append(step, hinted(int64(1+layer)<<20, alloc.LifetimeActivation))
	}
	for _, p := range step {
		require.NoError(t, a.Free(p))
	}
	for range 40 {
		step = step[:0]
		for range 8 {
			step = append(step, hinted(int64(1+rng.IntN(9))<<20+int64(rng.IntN(4096)), alloc.LifetimeTemporary))
		}
		for _, k := range rng.Perm(len(step)) {
			require.NoError(t, a.Free(step[k]))
		}
	}
	want := a.StatsMap()
	r.Stop()

	path := filepath.Join(t.TempDir(), "hinted.jsonl.gz")
	require.NoError(t, r.WriteFile(path))
	events, err := replay.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, r.Events(), events, "the hints survive the file")
	require.Equal(t, alloc.LifetimeParameter, events[0].Lifetime)

	replayed := func(events []replay.Event) (map[string]int64, *alloc.Allocator, []device.Ptr) {
		b := planned()
		res, err := replay.Replay(b, events, false)
		require.NoError(t, err)
		return res.Final, b, res.Live
	}
	got, b, live := replayed(events)
	assert.Equal(t, want, got, "the replay decides as the program's allocator did")

	stripped := slices.Clone(events)
	for i := range stripped {
		stripped[i].Lifetime = alloc.LifetimeUnknown
	}
	unhinted, c, cLive := replayed(stripped)
	assert.NotEqual(t, want, unhinted, "without the hints the replay decides otherwise")

	for _, x := range []struct {
		a    *alloc.Allocator
		live []device.Ptr
	}{{a, long}, {b, live}, {c, cLive}} {
		for _, p := range x.live {
			require.NoError(t, x.a.Free(p))
		}
		require.NoError(t, x.a.EmptyCache())
		assert.Zero(t, x.a.Stats().AllocatedBytes[alloc.StatAll].Current)
		assert.Zero(t, x.a.Stats().ReservedBytes[alloc.StatAll].Current)
	}
}
