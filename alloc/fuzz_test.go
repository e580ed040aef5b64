package alloc

import (
	"cmp"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/sim"
)

// fuzzInput decodes a fuzzer's bytes; past the end it reads zeros.
type fuzzInput struct {
	data []byte
	i    int
}

func (in *fuzzInput) byte() byte {
	if in.i >= len(in.data) {
		in.i++
		return 0
	}
	in.i++
	return in.data[in.i-1]
}

func (in *fuzzInput) more() bool { return in.i < len(in.data) }

// config picks a configuration from two bytes: every knob and its interactions.
func (in *fuzzInput) config() (Config, float64) {
	x, y := in.byte(), in.byte()
	var c Config
	c.ExpandableSegments = x&1 != 0
	switch x >> 1 & 3 {
	case 1:
		c.MaxSplitSize = 20 * MiB
	case 2:
		c.MaxSplitSize = 48 * MiB
		c.MaxNonSplitRounding = 32 * MiB
	}
	switch x >> 3 & 3 {
	case 1:
		c.RoundupPower2Divisions = fill(4)
	case 2:
		c.RoundupPower2Divisions = [RoundupIntervals]int{8, 2, 4, 0, 0, 1, 16}
	}
	fraction := 0.0
	if x>>5&1 != 0 {
		fraction = 0.5 + float64(y%5)/10
		if x>>6&1 != 0 {
			c.GarbageCollectionThreshold = 0.2 + float64(y>>4%7)/10
		}
	}
	return c, fraction
}

// size draws a request size: mostly small and medium, sometimes large.
func (in *fuzzInput) size() int64 {
	a, b := int64(in.byte()), int64(in.byte())
	switch a >> 6 {
	case 0:
		return 1 + (a&63)<<8 + b // up to 16 KiB
	case 1:
		return 1 + ((a&63)<<8+b)<<6 // up to 1 MiB
	case 2:
		return 1 + ((a&63)<<8+b)<<9 // up to 8 MiB
	}
	return 1 + ((a&63)<<8+b)<<12 // up to 64 MiB
}

// runAllocatorProgram executes the operations the bytes describe against an allocator
// over a small simulated device, checking every invariant after every step, and at the
// end that everything can be freed and released.
func runAllocatorProgram(t *testing.T, data []byte) {
	in := &fuzzInput{data: data}
	cfg, fraction := in.config()
	d, err := sim.New(sim.Options{Capacity: 256 * MiB, Cost: &sim.CostModel{}})
	require.NoError(t, err)
	a, err := New(d, cfg)
	require.NoError(t, err)
	if fraction > 0 {
		require.NoError(t, a.SetMemoryFraction(fraction))
	}
	streams := []device.Stream{0}
	for range 2 {
		s, err := d.NewStream()
		require.NoError(t, err)
		streams = append(streams, s)
	}
	held := make([]bool, len(streams))
	var lives []live
	var ooms int64
	for step := 0; in.more(); step++ {
		switch op := in.byte() % 8; op {
		case 0, 1, 2:
			size := in.size()
			s := streams[int(in.byte())%len(streams)]
			p, err := a.Alloc(size, s)
			if err != nil {
				var oom *OOMError
				require.True(t, errors.As(err, &oom), "step %d: Alloc(%d) failed with %v", step, size, err)
				ooms++
				break
			}
			for _, l := range lives {
				require.NotEqual(t, l.p, p, "step %d: address handed out twice", step)
			}
			lives = append(lives, live{p, size})
		case 3, 4:
			if len(lives) == 0 {
				break
			}
			i := int(in.byte()) % len(lives)
			require.NoError(t, a.Free(lives[i].p), "step %d", step)
			lives[i] = lives[len(lives)-1]
			lives = lives[:len(lives)-1]
		case 5:
			if len(lives) == 0 {
				break
			}
			l := lives[int(in.byte())%len(lives)]
			require.NoError(t, a.RecordStream(l.p, streams[int(in.byte())%len(streams)]), "step %d", step)
		case 6:
			switch sub := in.byte(); sub % 4 {
			case 0:
				require.NoError(t, a.EmptyCache(), "step %d", step)
			case 1:
				require.NoError(t, d.SetFaults(sim.Faults{Nth: 1 + int64(sub>>2%3)}))
			default:
				i := 1 + int(sub>>2)%(len(streams)-1)
				if held[i] {
					require.NoError(t, d.ReleaseStream(streams[i]))
				} else {
					require.NoError(t, d.HoldStream(streams[i]))
				}
				held[i] = !held[i]
			}
		case 7:
			if in.byte()%4 == 0 {
				a.ResetPeakStats()
			}
		}
		checkProgramStep(t, a, d, step, lives, ooms)
		// The fraction is checked against the segment size a, while expandable segments
		// map whole pages, which may be more (as in PyTorch).
		if fraction > 0 && !cfg.ExpandableSegments {
			require.LessOrEqual(t, cur(a.Stats().ReservedBytes), int64(fraction*float64(256*MiB)), "step %d: over the fraction", step)
		}
	}
	require.NoError(t, d.SetFaults(sim.Faults{}))
	for _, l := range lives {
		require.NoError(t, a.Free(l.p))
	}
	require.NoError(t, a.EmptyCache(), "waits for the frees still pending on held streams")
	requireDrained(t, a, d)
}

// live is an allocation a fuzzed program holds.
type live struct {
	p    device.Ptr
	size int64
}

// checkProgramStep checks, after step of a fuzzed program, the allocator's invariants,
// its statistics against the program's live allocations and out-of-memory count, that
// no two live allocations overlap, and that the device holds what the allocator
// reserved.
func checkProgramStep(t *testing.T, a *Allocator, d *sim.Device, step int, lives []live, ooms int64) {
	t.Helper()
	if err := invariantError(a); err != nil {
		t.Fatalf("step %d: %v", step, err)
	}
	st := a.Stats()
	require.Equal(t, int64(len(lives)), cur(st.Allocation), "step %d", step)
	require.Equal(t, ooms, st.NumOOMs, "step %d", step)
	var requested int64
	for _, l := range lives {
		requested += l.size
	}
	require.LessOrEqual(t, requested, cur(st.RequestedBytes), "step %d: pending frees add to live requests", step)
	for _, arr := range st.arrays() {
		for i, s := range arr.a {
			require.Equal(t, s.Current, s.Allocated-s.Freed, "step %d: %s.%s", step, arr.name, poolNames[i])
		}
	}
	sorted := slices.SortedFunc(slices.Values(lives), func(x, y live) int { return cmp.Compare(x.p, y.p) })
	for i := 1; i < len(sorted); i++ {
		prev := sorted[i-1]
		require.LessOrEqual(t, prev.p+device.Ptr(prev.size), sorted[i].p, "step %d: live allocations overlap", step)
	}
	require.Equal(t, cur(st.ReservedBytes), d.Stats().InUse, "step %d: the device holds what the allocator reserved", step)
}

func fuzzSeeds() [][]byte {
	r := rand.New(rand.NewPCG(7, 11))
	var seeds [][]byte
	for i := range 24 {
		b := make([]byte, 600+r.IntN(900))
		for j := range b {
			b[j] = byte(r.Uint32())
		}
		b[0] = byte(i * 11) // spread the configurations
		seeds = append(seeds, b)
	}
	return seeds
}

// FuzzAllocator drives random programs of Alloc, Free, RecordStream, EmptyCache,
// injected device failures and held streams, under random configurations. Its seed
// corpus runs in every `go test`; `go test -fuzz=FuzzAllocator ./alloc` searches on.
func FuzzAllocator(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	f.Fuzz(runAllocatorProgram)
}
