package sim

import (
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/device"
)

var fresh = ptr(freshTop)

// mallocer returns a Malloc that must succeed.
func mallocer(t *testing.T, d *Device) func(size int64) device.Ptr {
	return func(size int64) device.Ptr {
		t.Helper()
		p, err := d.Malloc(size)
		require.NoError(t, err)
		return p
	}
}

func TestTopDownPlacement(t *testing.T) {
	d := newSim(t, Options{})
	m := mallocer(t, d)
	sequence := func() []device.Ptr {
		ps := []device.Ptr{m(20 * mib)}
		assert.Equal(t, fresh+488*mib, ps[0], "the first 20 MiB fits the context's 24 MiB piece")
		ps = append(ps, m(2*mib))
		assert.Equal(t, fresh+414*mib, ps[1], "2 MiB fits the context's 2 MiB piece, at a lower address")
		ps = append(ps, m(2*mib), m(2*mib))
		assert.Equal(t, []device.Ptr{fresh + 508*mib, fresh + 510*mib}, ps[2:], "the rest of the 24 MiB piece")
		ps = append(ps, m(64*mib))
		assert.Equal(t, fresh-64*mib, ps[4], "nothing held fits: a fresh run, top-down")
		ps = append(ps, m(2*mib))
		assert.Equal(t, fresh-96*mib, ps[5], "a fresh 32 MiB granule below")
		ps = append(ps, m(20*mib))
		assert.Equal(t, fresh-94*mib, ps[6], "filling that granule's leftover")
		ps = append(ps, m(100*mib))
		assert.Equal(t, fresh-224*mib, ps[7], "100 MiB takes four whole granules below the others")
		ps = append(ps, m(1))
		assert.Equal(t, fresh-124*mib, ps[8], "sizes round up to 2 MiB; the lowest leftover that fits comes first")
		return ps
	}
	ps := sequence()

	require.NoError(t, d.Free(ps[8]))
	assert.Equal(t, ps[8], m(2*mib), "a freed range inside a live run is reused")
	require.NoError(t, d.Free(ps[4]))
	assert.Equal(t, fresh-32*mib, m(32*mib), "a run freed whole goes back to the fresh space, taken again from its top")
	require.NoError(t, d.Free(fresh-32*mib))
	require.NoError(t, d.Free(ps[0]))
	a, b := m(24*mib), m(20*mib)
	assert.Equal(t, fresh-122*mib, a, "the lowest piece that fits")
	assert.Equal(t, ps[0], b, "then the context's piece, freed")
	require.NoError(t, d.Free(a))
	for i, p := range ps {
		if i != 4 {
			require.NoError(t, d.Free(p))
		}
	}
	assert.Equal(t, int64(0), d.Stats().InUse)
	assert.Equal(t, ps, sequence(), "with everything freed, the same requests land at the same addresses")
	for _, p := range ps {
		require.NoError(t, d.Free(p))
	}
}

// The rules that only show once runs are freed: a fresh run needs a free range one granule
// larger than itself, the most recent run is searched first, and inside a run the
// smallest piece that fits wins.
func TestTopDownAfterFrees(t *testing.T) {
	d := newSim(t, Options{})
	m := mallocer(t, d)
	ctx := []device.Ptr{m(20 * mib), m(2 * mib), m(2 * mib), m(2 * mib)}
	require.Equal(t, []device.Ptr{fresh + 488*mib, fresh + 414*mib, fresh + 508*mib, fresh + 510*mib}, ctx, "the context's pieces are full")
	a := m(32 * mib)
	c := m(64 * mib)
	dd := m(64 * mib)
	require.Equal(t, []device.Ptr{fresh - 32*mib, fresh - 96*mib, fresh - 160*mib}, []device.Ptr{a, c, dd})
	require.NoError(t, d.Free(c))
	e := m(60 * mib)
	assert.Equal(t, fresh-224*mib, e, "a 64 MiB run needs 96 MiB free: the 64 MiB hole is passed over")
	f := m(20 * mib)
	assert.Equal(t, fresh-64*mib, f, "a 32 MiB run fits the 64 MiB hole, at its top")
	g := m(2 * mib)
	assert.Equal(t, f+20*mib, g, "the most recent run first, though an older one has room lower down")
	require.NoError(t, d.Free(f))
	h := m(8 * mib)
	assert.Equal(t, g+2*mib, h, "the smallest piece of the run that fits (10 MiB), not the lowest (20 MiB)")
	for _, p := range append(ctx, a, dd, e, g, h) {
		require.NoError(t, d.Free(p))
	}
	assert.Equal(t, int64(0), d.Stats().InUse)
}

// Random allocations and frees: addresses stay 2 MiB aligned, inside the Malloc region,
// never overlapping; freeing everything gives all the address space back.
func TestTopDownPlacementInvariants(t *testing.T) {
	d := newSim(t, Options{Cost: &CostModel{}})
	td := d.place.(*topDown)
	fullVA := td.va.bytes()
	rng := rand.New(rand.NewPCG(1, 2))
	live := map[device.Ptr]int64{}
	for i := range 3000 {
		if len(live) > 0 && rng.IntN(5) < 2 {
			for p := range live {
				require.NoError(t, d.Free(p))
				delete(live, p)
				break
			}
			continue
		}
		var size int64
		switch rng.IntN(3) {
		case 0:
			size = 2 * mib
		case 1:
			size = 20 * mib
		default:
			size = int64(1+rng.IntN(200)) * mib / 2
		}
		p, err := d.Malloc(size)
		require.NoError(t, err, "step %d", i)
		require.Zero(t, p%placeAlign)
		require.GreaterOrEqual(t, uint64(p), uint64(freshTop)-fullVA)
		require.LessOrEqual(t, uint64(p)+uint64(size), uint64(mallocTop))
		live[p] = size
	}
	ps := make([]device.Ptr, 0, len(live))
	for p := range live {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	for i := 1; i < len(ps); i++ {
		require.GreaterOrEqual(t, ps[i], ps[i-1]+device.Ptr(live[ps[i-1]]), "live segments overlap")
	}
	for _, p := range ps {
		require.NoError(t, d.Free(p))
	}
	require.Len(t, td.runs, 1, "only the context's run is left")
	assert.Equal(t, contextPieces[:], td.runs[0].free.free, "with the context's pieces free again")
	assert.Equal(t, fullVA, td.va.bytes())
	assert.Len(t, td.va.free, 1, "the free address space coalesced back into one range")
	assert.Equal(t, int64(0), d.Stats().InUse)
}

func TestReservationsNeverMeetMallocs(t *testing.T) {
	d := newSim(t, Options{})
	p, err := d.Malloc(DefaultCapacity)
	require.NoError(t, err)
	r, err := d.Reserve(DefaultCapacity / Granularity * Granularity * 2)
	require.NoError(t, err)
	assert.Less(t, uint64(r)+uint64(2*DefaultCapacity), uint64(p), "reservations lie below the Malloc region")
	r2, err := d.Reserve(Granularity)
	require.NoError(t, err)
	assert.Greater(t, r2, r, "reservations go upward")
	require.NoError(t, d.Unreserve(r, DefaultCapacity/Granularity*Granularity*2))
	r3, err := d.Reserve(Granularity)
	require.NoError(t, err)
	assert.Equal(t, r, r3, "a released reservation's range is reused")
	require.NoError(t, d.Unreserve(r2, Granularity))
	require.NoError(t, d.Unreserve(r3, Granularity))
	require.NoError(t, d.Free(p))
	assert.Equal(t, int64(0), d.Stats().InUse)
}

func TestSpans(t *testing.T) {
	var s spans
	s.give(100, 100)
	s.give(300, 100)
	s.give(200, 100)
	assert.Equal(t, []span{{100, 400}}, s.free, "coalesced on both sides")
	a, ok := s.takeHigh(64, 64, 64)
	require.True(t, ok)
	assert.Equal(t, uint64(320), a)
	b, ok := s.takeLow(64, 64)
	require.True(t, ok)
	assert.Equal(t, uint64(128), b)
	assert.Equal(t, []span{{100, 128}, {192, 320}, {384, 400}}, s.free)
	_, ok = s.takeLow(256, 64)
	assert.False(t, ok)
	s.give(128, 64)
	s.give(320, 64)
	assert.Equal(t, []span{{100, 400}}, s.free)
	assert.Equal(t, uint64(300), s.bytes())
	_, ok = s.takeHigh(64, 512, 64)
	assert.False(t, ok, "no interval of 512 bytes")

	s = spans{free: []span{{0, 100}, {200, 230}, {300, 330}, {400, 420}}}
	b, ok = s.takeBest(20, 1)
	require.True(t, ok)
	assert.Equal(t, uint64(400), b, "the exact fit")
	b, ok = s.takeBest(20, 1)
	require.True(t, ok)
	assert.Equal(t, uint64(200), b, "the lowest of the smallest that fit")
	_, ok = s.takeBest(200, 1)
	assert.False(t, ok)
}

// The reservation region holds 48 TiB of address space: a Reserve beyond what is free
// of it fails without taking any, and reservations that fit still come from its bottom.
func TestReservationSpaceRunsOut(t *testing.T) {
	d := newSim(t, Options{})
	const region = int64(reserveTop - reserveBase)
	r, err := d.Reserve(region - Granularity)
	require.NoError(t, err)
	assert.Equal(t, ptr(reserveBase), r)
	_, err = d.Reserve(2 * Granularity)
	require.ErrorContains(t, err, "address space for reservations exhausted (2097152 bytes free in pieces)")
	last, err := d.Reserve(Granularity)
	require.NoError(t, err, "the last granule is still free")
	assert.Equal(t, ptr(reserveTop-uint64(Granularity)), last)
	require.NoError(t, d.Unreserve(r, region-Granularity))
	require.NoError(t, d.Unreserve(last, Granularity))
	assert.Equal(t, Stats{Reserves: 2, Unreserves: 2}, d.Stats())
}
