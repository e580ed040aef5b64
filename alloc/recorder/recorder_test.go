package recorder

import (
	"math/rand/v2"
	"path/filepath"
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
