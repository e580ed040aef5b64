package replay

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/sim"
)

// newAllocator returns an allocator with config conf over a meta sim device.
func newAllocator(t *testing.T, conf string, o sim.Options) *alloc.Allocator {
	t.Helper()
	dev, err := sim.New(o)
	require.NoError(t, err)
	cfg, err := alloc.ParseConfig(conf)
	require.NoError(t, err)
	a, err := alloc.New(dev, cfg)
	require.NoError(t, err)
	return a
}

// requireReleased frees what a replay left live, empties the cache, and requires the
// allocator and its device to hold nothing.
func requireReleased(t *testing.T, a *alloc.Allocator, res *Result) {
	t.Helper()
	for _, p := range res.Live {
		require.NoError(t, a.Free(p))
	}
	require.NoError(t, a.EmptyCache())
	st := a.Stats()
	require.Equal(t, int64(0), st.AllocatedBytes[alloc.StatAll].Current)
	require.Equal(t, int64(0), st.ReservedBytes[alloc.StatAll].Current)
	free, total, err := a.Device().MemInfo()
	require.NoError(t, err)
	require.Equal(t, total, free, "the device holds nothing")
}

// col returns column key of a result's series.
func col(t *testing.T, res *Result, key string) []int64 {
	t.Helper()
	for j, k := range res.Keys {
		if k == key {
			out := make([]int64, len(res.Series))
			for i, row := range res.Series {
				out[i] = row[j]
			}
			return out
		}
	}
	t.Fatalf("no key %q", key)
	return nil
}

// wave allocates n blocks of size with ids from base, then frees them.
func wave(base, n, size int64) []Event {
	var ev []Event
	for i := range n {
		ev = append(ev, Event{Op: OpAlloc, ID: base + i, Size: size})
	}
	for i := range n {
		ev = append(ev, Event{Op: OpFree, ID: base + i})
	}
	return ev
}

// The PyTorch blog's numbers: 8x16 MiB then 4x32 MiB reserves 256 MiB; the reverse
// order 128 MiB.
func TestReplayBlogPattern(t *testing.T) {
	for _, c := range []struct {
		name     string
		first    [2]int64
		second   [2]int64
		reserved int64
	}{
		{"8x16 then 4x32", [2]int64{8, 16 * mib}, [2]int64{4, 32 * mib}, 256 * mib},
		{"4x32 then 8x16", [2]int64{4, 32 * mib}, [2]int64{8, 16 * mib}, 128 * mib},
	} {
		t.Run(c.name, func(t *testing.T) {
			ev := append(wave(0, c.first[0], c.first[1]), wave(100, c.second[0], c.second[1])...)
			a := newAllocator(t, "", sim.Options{})
			res, err := Replay(a, ev, true)
			require.NoError(t, err)
			defer requireReleased(t, a, res)
			require.Len(t, res.Series, len(ev))
			reserved := col(t, res, "reserved_bytes.all.current")
			assert.Equal(t, c.reserved, reserved[len(ev)-1])
			allocated := col(t, res, "allocated_bytes.all.current")
			assert.Equal(t, c.first[0]*c.first[1], allocated[c.first[0]-1], "after the first wave's allocs")
			assert.Equal(t, int64(0), res.Final["allocated_bytes.all.current"])
			assert.Equal(t, c.reserved, res.Final["reserved_bytes.all.peak"])
			assert.Equal(t, int64(0), res.Final["num_ooms"])
			assert.Zero(t, res.OOMs)
			assert.Nil(t, res.FirstOOM)
		})
	}
}

func TestReplayCountsOOMAndSkipsTheFreeOfItsID(t *testing.T) {
	a := newAllocator(t, "", sim.Options{Capacity: 100 * mib})
	ev := []Event{
		{Op: OpAlloc, ID: 1, Size: 80 * mib},
		{Op: OpAlloc, ID: 2, Size: 40 * mib}, // 40 MiB segment does not fit next to 80
		{Op: OpFree, ID: 2},
		{Op: OpFree, ID: 1},
		{Op: OpAlloc, ID: 2, Size: 40 * mib}, // id reused: fits in the cached 80 MiB block
		{Op: OpFree, ID: 2},
		{Op: OpEmptyCache},
	}
	res, err := Replay(a, ev, true)
	require.NoError(t, err)
	defer requireReleased(t, a, res)
	assert.Empty(t, res.Live)
	assert.Equal(t, []int64{0, 1, 1, 1, 1, 1, 1}, col(t, res, "num_ooms"))
	assert.Equal(t, []int64{0, 1, 1, 1, 1, 1, 1}, col(t, res, "num_alloc_retries"))
	assert.Equal(t, []int64{80 * mib, 80 * mib, 80 * mib, 0, 40 * mib, 0, 0}, col(t, res, "allocated_bytes.all.current"))
	assert.Equal(t, []int64{80 * mib, 80 * mib, 80 * mib, 80 * mib, 80 * mib, 80 * mib, 0}, col(t, res, "reserved_bytes.all.current"))
	assert.Equal(t, int64(0), res.Final["reserved_bytes.all.current"])
	assert.Equal(t, 1, res.OOMs)
	require.NotNil(t, res.FirstOOM)
	assert.Equal(t, 1, res.FirstOOM.Index, "line 2 of the trace")
	var oom *alloc.OOMError
	require.ErrorAs(t, res.FirstOOM, &oom)
	assert.Equal(t, int64(40*mib), oom.Requested)
	assert.Contains(t, res.FirstOOM.Error(), "replay line 2 (alloc id 2 size 41943040): alloc: out of memory on sim.")
}

func TestReplayStopsAtANonOOMErrorWithItsLine(t *testing.T) {
	// A recording of one 2 MiB segment; the trace's second alloc needs a 20 MiB one.
	a := newAllocator(t, "", sim.Options{Segments: []sim.Segment{{Size: 2 * mib, Addr: 0x7f0000000000}}})
	ev := []Event{
		{Op: OpAlloc, ID: 1, Size: 512},
		{Op: OpAlloc, ID: 2, Size: 3 * mib},
		{Op: OpFree, ID: 1},
	}
	res, err := Replay(a, ev, true)
	var ee *EventError
	require.ErrorAs(t, err, &ee)
	defer requireReleased(t, a, res)
	require.Len(t, res.Live, 1, "id 1 stays allocated")
	assert.Equal(t, 1, ee.Index)
	assert.Equal(t, ev[1], ee.Event)
	assert.Contains(t, err.Error(), "replay line 2 (alloc id 2 size 3145728): alloc: Alloc(3145728) on sim: getting a 20971520-byte segment: sim: Malloc(20971520): ",
		"each layer says what it did once, the device's name not doubled by the device's package")
	assert.Contains(t, err.Error(), "segment index 1")
	var oom *alloc.OOMError
	assert.False(t, errors.As(err, &oom), "a diverged recording is not an OOM")
	require.Len(t, res.Series, 1, "the rows before the failing event")
	assert.Equal(t, int64(512), res.Final["allocated_bytes.all.current"])
}

func TestReplayRefusesAnInvalidTrace(t *testing.T) {
	_, err := Replay(newAllocator(t, "", sim.Options{}), []Event{{Op: OpFree, ID: 3}}, false)
	var le *LineError
	require.ErrorAs(t, err, &le)
	assert.Equal(t, 1, le.Line)
}

func TestReplayKeepsStreamsApart(t *testing.T) {
	ev := []Event{
		{Op: OpAlloc, ID: 1, Size: 512},
		{Op: OpFree, ID: 1},
		{Op: OpAlloc, ID: 2, Size: 512, Stream: 5},
		{Op: OpAlloc, ID: 3, Size: 512},
		{Op: OpFree, ID: 2},
		{Op: OpFree, ID: 3},
	}
	a := newAllocator(t, "", sim.Options{})
	res, err := Replay(a, ev, true)
	require.NoError(t, err)
	defer requireReleased(t, a, res)
	assert.Equal(t, []int64{1, 1, 2, 2, 2, 2}, col(t, res, "segment.all.current"),
		"a block cached on stream 0 is not handed to stream 5")
	assert.Equal(t, int64(0), res.Final["allocated_bytes.all.current"])
}

func TestReplayWithoutSeries(t *testing.T) {
	a := newAllocator(t, "", sim.Options{})
	res, err := Replay(a, wave(0, 3, 5*mib), false)
	require.NoError(t, err)
	defer requireReleased(t, a, res)
	assert.Nil(t, res.Series)
	assert.Equal(t, SeriesKeys(), res.Keys)
	assert.Equal(t, int64(20*mib), res.Final["reserved_bytes.all.current"])
	assert.Equal(t, int64(3), res.Final["allocation.all.allocated"])
}

// Every series getter reads the statistic StatsMap reports under its name, and the key
// order is torch_replay.py's.
func TestSeriesKeysMatchStatsMap(t *testing.T) {
	assert.Equal(t, []string{"allocated_bytes.all.current", "reserved_bytes.all.current", "active_bytes.all.current",
		"inactive_split_bytes.all.current", "segment.all.current", "num_alloc_retries", "num_ooms",
		"num_device_alloc", "num_device_free", "requested_bytes.all.current"}, SeriesKeys())
	events, err := Generate("oom_fraction", 1)
	require.NoError(t, err)
	events = events[:3000]
	nonzero := make([]bool, len(seriesKeys))
	for n := 1; n <= len(events); n += 211 {
		a := newAllocator(t, "", sim.Options{Capacity: 3 * gib})
		res, err := Replay(a, events[:n], true)
		require.NoError(t, err)
		last := res.Series[n-1]
		assert.Len(t, res.Live, int(res.Final["allocation.all.current"]), "a block per live id")
		for j, k := range res.Keys {
			v, ok := res.Final[k]
			require.True(t, ok, "StatsMap has %s", k)
			require.Equal(t, v, last[j], "%s after %d events", k, n)
			nonzero[j] = nonzero[j] || v != 0
		}
		requireReleased(t, a, res)
	}
	for j, k := range SeriesKeys() {
		if k != "num_ooms" && k != "num_alloc_retries" {
			assert.True(t, nonzero[j], "%s was exercised", k)
		}
	}
}

// brokenDevice is a simulated device whose Free and NewStream fail while broken is set.
type brokenDevice struct {
	*sim.Device
	broken bool
}

var errBroken = errors.New("device broken")

func (d *brokenDevice) Free(p device.Ptr) error {
	if d.broken {
		return errBroken
	}
	return d.Device.Free(p)
}

func (d *brokenDevice) NewStream() (device.Stream, error) {
	if d.broken {
		return 0, errBroken
	}
	return d.Device.NewStream()
}

// An error stops the replay at its event, described by the fields its op has.
func TestReplayErrorNamesTheEvent(t *testing.T) {
	s, err := sim.New(sim.Options{})
	require.NoError(t, err)
	d := &brokenDevice{Device: s, broken: true}
	a, err := alloc.New(d, alloc.Config{})
	require.NoError(t, err)
	for _, c := range []struct {
		ev   []Event
		want string
	}{
		{[]Event{{Op: OpAlloc, ID: 1, Size: 512}, {Op: OpFree, ID: 1}, {Op: OpEmptyCache}},
			"replay line 3 (empty_cache): alloc: EmptyCache on sim: freeing a 2097152-byte segment: device broken"},
		{[]Event{{Op: OpAlloc, ID: 4, Size: 512, Stream: 2}},
			"replay line 1 (alloc id 4 size 512 stream 2): create device stream for trace stream 2: device broken"},
	} {
		res, err := Replay(a, c.ev, false)
		require.EqualError(t, err, c.want)
		require.ErrorIs(t, err, errBroken)
		assert.Empty(t, res.Live)
	}
	d.broken = false
	requireReleased(t, a, &Result{})
}
