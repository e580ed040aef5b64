package sim

import (
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/device"
)

const top = device.Ptr(mallocTop)

func TestTopDownPlacement(t *testing.T) {
	d := newSim(t, Options{})
	m := func(size int64) device.Ptr {
		t.Helper()
		p, err := d.Malloc(size)
		require.NoError(t, err)
		return p
	}
	a := m(20 * mib)
	assert.Equal(t, top-32*mib, a, "the first segment sits at the bottom of the top granule")
	b := m(20 * mib)
	assert.Equal(t, a-32*mib, b, "each new segment one granule below the previous")
	c := m(2 * mib)
	assert.Equal(t, a+20*mib, c, "a small segment fills the leftover of the highest granule")
	var small []device.Ptr
	for range 5 {
		small = append(small, m(2*mib))
	}
	assert.Equal(t, a+30*mib, small[4], "the first granule is full after six 2 MiB segments")
	d2 := m(2 * mib)
	assert.Equal(t, b+20*mib, d2, "then the next granule's leftover")
	e := m(100 * mib)
	assert.Equal(t, b-128*mib, e, "100 MiB takes four whole granules below the others")
	f := m(1)
	assert.Equal(t, b+22*mib, f, "sizes round up to 2 MiB")

	require.NoError(t, d.Free(a))
	a2 := m(20 * mib)
	assert.Equal(t, a, a2, "a freed range inside a live granule is reused")
	require.NoError(t, d.Free(e))
	e2 := m(64 * mib)
	assert.Equal(t, b-64*mib, e2, "freed granules go back to the free address space, reused from the top")

	for _, p := range append(small, a2, b, c, d2, e2, f) {
		require.NoError(t, d.Free(p))
	}
	assert.Equal(t, top-32*mib, m(2*mib), "with everything freed, placement starts at the top again")
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
		require.GreaterOrEqual(t, uint64(p), uint64(mallocTop)-fullVA)
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
	assert.Empty(t, td.runs)
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
	a, ok := s.takeHigh(64, 64)
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
}
