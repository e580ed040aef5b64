package pinned

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device/sim"
	"github.com/subletml/sublet/internal/hostmem"
)

const mib int64 = 1 << 20

// sameSim is the simulated device as it is, for newOver.
func sameSim(s *sim.Device) *sim.Device { return s }

// newSimConfig is newSim with settings.
func newSimConfig(t *testing.T, cfg alloc.PinnedConfig) (*sim.Device, *Allocator) {
	t.Helper()
	d, a := newOver(t, cfg, sameSim)
	t.Cleanup(func() { requireEmpty(t, a) })
	return d, a
}

func TestNewReadsTheEnvironment(t *testing.T) {
	t.Setenv(alloc.ConfigEnv, "pinned_max_cached_size_mb:1,pinned_max_round_threshold_mb:2")
	d, err := sim.New(sim.Options{})
	require.NoError(t, err)
	a, err := New(d)
	require.NoError(t, err)
	assert.Equal(t, alloc.PinnedConfig{MaxCachedSize: mib, MaxRoundThreshold: 2 * mib}, a.Config())
	b := mustAlloc(t, a, 2*mib)
	require.NoError(t, a.Free(b))
	assert.Zero(t, a.Stats().AllocatedBytes.Current, "the setting applies: a 2 MiB block is not cached")
	requireEmpty(t, a)

	t.Setenv(alloc.ConfigEnv, "pinned_max_cached_size_mb:0")
	_, err = New(d)
	assert.ErrorContains(t, err, "pinned.New: SUBLET_ALLOC_CONF")
	assert.ErrorContains(t, err, "pinned_max_cached_size_mb")
}

func TestNewConfigValidates(t *testing.T) {
	d, err := sim.New(sim.Options{})
	require.NoError(t, err)
	_, err = NewConfig(d, alloc.PinnedConfig{MaxCachedSize: -1})
	var ce *alloc.ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "Pinned.MaxCachedSize", ce.Key)
	assert.ErrorContains(t, err, "pinned.NewConfig")
	_, err = NewConfig(nil, alloc.PinnedConfig{})
	assert.ErrorContains(t, err, "pinned.NewConfig: nil device")
}

// Settings that cannot be applied are errors naming the key, never ignored.
func TestNewRefusesWhatItCannotApply(t *testing.T) {
	d, err := sim.New(sim.Options{})
	require.NoError(t, err)
	for _, c := range []struct {
		cfg  alloc.PinnedConfig
		want []string
	}{
		{alloc.PinnedConfig{FreeCatchAll: true}, []string{"pinned_free_catch_all", "FreeCatchAll", "not established", "unset it"}},
		{alloc.PinnedConfig{NumRegisterThreads: 4}, []string{"pinned_num_register_threads", "pinned_use_cuda_host_register:True", "unset it"}},
	} {
		_, err := NewConfig(d, c.cfg)
		for _, w := range c.want {
			assert.ErrorContains(t, err, w, "%+v", c.cfg)
		}
		assert.ErrorContains(t, err, "pinned.NewConfig on sim")
	}
}

// Up to MaxRoundThreshold requests round to a power of two; above it to whole pages
// only, and a request takes the cached block of its bucket that fits it best.
func TestMaxRoundThreshold(t *testing.T) {
	const threshold = 3 * mib / 2
	page := hostmem.PageSize()
	_, a := newSimConfig(t, alloc.PinnedConfig{MaxRoundThreshold: threshold})

	at := mustAlloc(t, a, threshold) // not above: a power of two
	small := mustAlloc(t, a, 5*mib/4)
	large := mustAlloc(t, a, 7*mib/4+1)
	st := a.Stats()
	largeBlock := hostmem.RoundUp(7*mib/4+1, page)
	assert.Equal(t, 2*mib+2*mib+largeBlock, st.AllocatedBytes.Current, "2 MiB, 2 MiB and 1.75 MiB + one page")
	assert.Equal(t, st.AllocatedBytes.Current, st.ActiveBytes.Current)
	require.NoError(t, a.Free(at))
	require.NoError(t, a.Free(small))
	require.NoError(t, a.Free(large))

	// The bucket of (1 MiB, 2 MiB] holds two 2 MiB blocks and the large one: a request
	// above the threshold takes the smallest that fits, not a 2 MiB one.
	b := mustAlloc(t, a, 3*mib/2+1)
	assert.Equal(t, base(large), base(b))
	// One that is larger than the large block gets a 2 MiB block...
	c := mustAlloc(t, a, largeBlock+1)
	assert.Contains(t, []uintptr{base(at), base(small)}, base(c))
	// ... and a request rounded to 2 MiB gets the other one, not a new block.
	d := mustAlloc(t, a, mib+1)
	assert.Contains(t, []uintptr{base(at), base(small)}, base(d))
	assert.Equal(t, int64(3), a.Stats().NumHostAlloc)
	// Nothing fits a 2 MiB + 1 request in use or cached: a new block of whole pages.
	e := mustAlloc(t, a, 2*mib+1)
	st = a.Stats()
	assert.Equal(t, int64(4), st.NumHostAlloc)
	assert.Equal(t, 4*mib+largeBlock+2*mib+page, st.AllocatedBytes.Current)
	for _, x := range [][]byte{b, c, d, e} {
		require.NoError(t, a.Free(x))
	}
	require.NoError(t, a.EmptyCache())
	assert.Zero(t, a.Stats().AllocatedBytes.Current)
}

// Blocks larger than MaxCachedSize go back to the system when freed, once their streams
// are done; others are cached as usual.
func TestMaxCachedSize(t *testing.T) {
	d, a := newSimConfig(t, alloc.PinnedConfig{MaxCachedSize: mib})
	s := newStream(t, d, true)

	kept := mustAlloc(t, a, mib)
	big := mustAlloc(t, a, mib+1)
	require.NoError(t, a.Free(kept))
	require.NoError(t, a.Free(big))
	st := a.Stats()
	assert.Equal(t, mib, st.AllocatedBytes.Current, "the 1 MiB block is cached, the 2 MiB one released")
	assert.Equal(t, int64(1), st.NumHostFree)
	assert.Zero(t, st.ActiveBytes.Current)

	// A large block a stream may still use waits for it, then is released.
	big = mustAlloc(t, a, 2*mib)
	require.NoError(t, a.RecordEvent(big, s))
	require.NoError(t, a.Free(big))
	again := mustAlloc(t, a, mib)
	assert.Equal(t, base(kept), base(again))
	assert.Equal(t, mib+2*mib, a.Stats().AllocatedBytes.Current, "parked, not released")
	require.NoError(t, d.ReleaseStream(s))
	tiny := mustAlloc(t, a, 1) // processes the completed event
	assert.Equal(t, mib+1, a.Stats().AllocatedBytes.Current, "released once its event completed")
	require.NoError(t, a.Free(again))
	require.NoError(t, a.Free(tiny))
	require.NoError(t, a.EmptyCache())
	st = a.Stats()
	assert.Zero(t, st.AllocatedBytes.Current)
	assert.Equal(t, int64(4), st.NumHostAlloc)
	assert.Equal(t, int64(4), st.NumHostFree)
}

// A large block the system will not take back at Free stays cached, counted and usable.
func TestMaxCachedSizeReleaseFailureKeepsTheBlock(t *testing.T) {
	f, a := newFake(t, alloc.PinnedConfig{MaxCachedSize: mib})
	b := mustAlloc(t, a, 2*mib)
	f.freeErr = errBroken
	err := a.Free(b)
	require.ErrorIs(t, err, errBroken)
	assert.ErrorContains(t, err, "pinned: Free: returning a 2097152-byte block to the system (it stays cached)")
	st := a.Stats()
	assert.Equal(t, 2*mib, st.AllocatedBytes.Current)
	assert.Zero(t, st.ActiveBytes.Current)
	b2 := mustAlloc(t, a, 2*mib)
	assert.Equal(t, base(b), base(b2))
	f.freeErr = nil
	require.NoError(t, a.Free(b2))
	assert.Equal(t, 1, f.frees)
	requireEmpty(t, a)
	assert.Zero(t, f.live)
}
