package alloc

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/sim"
)

// trainLoop is a training step's allocations as sublet's tensors make them: parameters
// and optimizer state that live throughout, gradients from backward until the next
// step's zero_grad, activations from forward until backward, temporaries that die at
// once, in the small and the large pool.
type trainLoop struct {
	t      testing.TB
	a      *Allocator
	layers []int64 // activation bytes per layer
	// hinted passes the parameters' and the optimizer state's Lifetime.
	hinted bool
	params []device.Ptr
	state  []device.Ptr
	grads  []device.Ptr
}

func newTrainLoop(t testing.TB, a *Allocator, layers []int64) *trainLoop {
	return newHintedLoop(t, a, layers, false)
}

// newHintedLoop is newTrainLoop; with hinted, the parameters and the optimizer's state
// are allocated with their Lifetime.
func newHintedLoop(t testing.TB, a *Allocator, layers []int64, hinted bool) *trainLoop {
	l := &trainLoop{t: t, a: a, layers: layers, hinted: hinted}
	for _, n := range layers {
		l.params = append(l.params, l.allocFor(n/4+100, LifetimeParameter), l.allocFor(4*KiB+300, LifetimeParameter))
	}
	return l
}

// alloc and free are Alloc and Free failing the test on an error, at no cost otherwise
// (the loop is also a benchmark).
func (l *trainLoop) alloc(n int64) device.Ptr { return l.allocFor(n, LifetimeUnknown) }

// allocFor allocates n bytes with lifetime lt if the loop is hinted.
func (l *trainLoop) allocFor(n int64, lt Lifetime) device.Ptr {
	if !l.hinted {
		lt = LifetimeUnknown
	}
	p, err := l.a.AllocTagged(n, 0, Tag{Lifetime: lt})
	if err != nil {
		l.t.Fatalf("Alloc(%d): %v", n, err)
	}
	return p
}

func (l *trainLoop) free(ps ...device.Ptr) {
	for _, p := range ps {
		if err := l.a.Free(p); err != nil {
			l.t.Fatalf("Free(%#x): %v", p, err)
		}
	}
}

// step runs one step; at step 0 the optimizer creates its state.
func (l *trainLoop) step(i int) {
	l.free(l.grads...) // zero_grad(set_to_none)
	l.grads = l.grads[:0]
	acts := make([]device.Ptr, 0, 2*len(l.layers))
	for _, n := range l.layers {
		tmp := l.alloc(n/2 + 512)
		acts = append(acts, l.alloc(n), l.alloc(1000))
		l.free(tmp)
	}
	loss := l.alloc(4)
	for j := len(l.layers) - 1; j >= 0; j-- {
		g := l.alloc(l.layers[j])
		l.grads = append(l.grads, l.alloc(l.layers[j]/4+100), l.alloc(4*KiB+300))
		l.free(acts[2*j+1], acts[2*j], g)
	}
	l.free(loss)
	for j := range l.params {
		if i == 0 {
			l.state = append(l.state, l.allocFor(2*(l.layers[j/2]/4+100), LifetimeOptimizerState))
		}
		l.free(l.alloc(64 * KiB))
	}
}

// period is the events of one step once the optimizer's state exists: per layer three
// allocations in forward, three in backward and one per parameter in the optimizer, and
// the loss; each freed.
func (l *trainLoop) period() int { return 2 * (8*len(l.layers) + 1) }

func (l *trainLoop) close() {
	l.free(l.grads...)
	l.free(l.state...)
	l.free(l.params...)
}

// After two steps the loop's period is confirmed and laid out (shorter plans may come
// and go before: the optimizer's temporaries repeat within a step); once its arenas find
// room (a few steps at most), every step is served from the plan: no device allocation,
// reserved memory flat, each short-lived allocation from an arena, and the statistics
// those of any allocation (the invariants recount them).
func TestPlannedTrainingLoop(t *testing.T) {
	a, d := newAlloc(t, 0, Config{Policy: PolicyPlanned})
	l := newTrainLoop(t, a, []int64{3 * MiB, 5*MiB + 700, 300 * KiB, 7 * MiB})
	var reserved, deviceAllocs, served int64
	var plans PlanStats
	planned := -1
	for i := range 16 {
		l.step(i)
		checkInvariants(t, a)
		st, ps := a.Stats(), a.PlanStats()
		if planned < 0 && ps.Period == l.period() {
			planned = i
			plans = ps
			require.LessOrEqual(t, i, 6, "the plan starts within a few steps")
		} else if planned >= 0 {
			require.Equal(t, plans.Plans, ps.Plans, "step %d: one plan", i)
			require.Equal(t, plans.Ended, ps.Ended, "step %d: the plan holds", i)
			require.Equal(t, reserved, cur(st.ReservedBytes), "step %d: reserved memory is flat", i)
			require.Equal(t, deviceAllocs, st.NumDeviceAlloc, "step %d: no device allocation", i)
			require.Equal(t, int64(8*4+1), ps.Served-served, "step %d: every short-lived allocation from the plan", i)
		}
		reserved, deviceAllocs, served = cur(st.ReservedBytes), st.NumDeviceAlloc, ps.Served
	}
	require.GreaterOrEqual(t, planned, 0, "a plan started")
	l.close()
	requireDrained(t, a, d)
}

// untilPlanned runs steps of l from step i until the step's plan runs, and returns the
// next step.
func untilPlanned(t *testing.T, l *trainLoop, i int) int {
	t.Helper()
	for start := i; l.a.PlanStats().Period != l.period(); i++ {
		require.Less(t, i, start+8, "no plan after %d steps", i-start)
		l.step(i)
	}
	return i
}

// A step that departs from the plan ends it where it stands: the allocations the arena
// holds become ordinary blocks, freed as any other, the arena's free gaps go to the
// cache, and once the loop repeats again a new plan forms.
func TestPlannedDeviationFallsBack(t *testing.T) {
	a, d := newAlloc(t, 0, Config{Policy: PolicyPlanned})
	l := newTrainLoop(t, a, []int64{3 * MiB, 5*MiB + 700, 300 * KiB, 7 * MiB})
	i := untilPlanned(t, l, 0)
	before := a.PlanStats()
	// Half a step as planned, then an allocation the plan does not expect.
	mustFree(t, a, l.grads...)
	l.grads = l.grads[:0]
	x := mustAlloc(t, a, 3*MiB, 0)
	tmp := mustAlloc(t, a, 3*MiB/2+512, 0) // the step's first allocation
	odd := mustAlloc(t, a, 12345, 0)
	ps := a.PlanStats()
	require.Equal(t, before.Ended+1, ps.Ended, "the unexpected allocation ended the plan")
	require.Zero(t, ps.Period)
	checkInvariants(t, a)
	snapshotTiles(t, a)
	mustFree(t, a, odd, tmp, x)
	checkInvariants(t, a)
	for ; i < 20 && a.PlanStats().Period != l.period(); i++ {
		l.step(i)
		checkInvariants(t, a)
	}
	require.Equal(t, l.period(), a.PlanStats().Period, "the loop is planned again")
	l.close()
	requireDrained(t, a, d)
}

// snapshotTiles checks that every segment of a snapshot is tiled by its blocks and that
// its allocated bytes add up to the statistics'.
func snapshotTiles(t *testing.T, a *Allocator) {
	t.Helper()
	var allocated int64
	for _, seg := range a.Snapshot() {
		addr := seg.Address
		var sum int64
		for _, b := range seg.Blocks {
			require.Equal(t, addr, b.Address, "segment %#x: blocks tile it", seg.Address)
			addr += device.Ptr(b.Size)
			if b.State == ActiveAllocated {
				sum += b.Size
				require.Positive(t, b.Requested)
			}
		}
		require.Equal(t, seg.AllocatedSize, sum)
		require.Equal(t, seg.Address+device.Ptr(seg.TotalSize), addr)
		allocated += sum
	}
	require.Equal(t, cur(a.Stats().AllocatedBytes), allocated, "the snapshot shows every allocation")
}

// Snapshots show a plan's live slots as the allocations they are, with the arena's free
// gaps between them, and the memory history records their events as any others'.
func TestPlannedSnapshotAndHistory(t *testing.T) {
	a, d := newAlloc(t, 0, Config{Policy: PolicyPlanned})
	l := newTrainLoop(t, a, []int64{3 * MiB, 300 * KiB})
	i := untilPlanned(t, l, 0)
	require.NoError(t, a.RecordHistory(HistoryOptions{Trace: true}))
	served := a.PlanStats().Served
	l.step(i)
	require.Greater(t, a.PlanStats().Served, served)
	snapshotTiles(t, a)
	s := a.MemorySnapshot()
	live := map[device.Ptr]int64{}
	for _, e := range s.Trace {
		switch e.Action {
		case ActionAlloc:
			require.NotContains(t, live, e.Addr, "allocated twice without a free")
			live[e.Addr] = e.BlockSize
		case ActionFreeRequested:
			if n, ok := live[e.Addr]; ok {
				require.Equal(t, n, e.BlockSize)
			}
		case ActionFreeCompleted:
			delete(live, e.Addr)
		}
	}
	var held int64
	for _, n := range live {
		held += n
	}
	// The trace began after the last step's gradients were made: they are freed in it
	// without an allocation in it.
	require.LessOrEqual(t, held, cur(a.Stats().AllocatedBytes))
	l.close()
	requireDrained(t, a, d)
}

// EmptyCache ends the plan, whose arenas go back to the device with the rest of the
// cache; the loop is planned again afterwards.
func TestPlannedEmptyCache(t *testing.T) {
	a, d := newAlloc(t, 0, Config{Policy: PolicyPlanned})
	l := newTrainLoop(t, a, []int64{3 * MiB, 5*MiB + 700, 7 * MiB})
	i := untilPlanned(t, l, 0)
	require.NoError(t, a.EmptyCache())
	require.Zero(t, a.PlanStats().Period)
	checkInvariants(t, a)
	st := a.Stats()
	require.Less(t, cur(st.ReservedBytes)-cur(st.AllocatedBytes), 2*MiB*int64(cur(st.Allocation)+1),
		"only the partial pages of live blocks stay cached")
	untilPlanned(t, l, i)
	l.close()
	requireDrained(t, a, d)
}

// A slot used by another stream (RecordStream) ends the plan when it is freed: it waits
// for that stream's work as any block does, and is not handed out before.
func TestPlannedRecordStream(t *testing.T) {
	a, d := newAlloc(t, 0, Config{Policy: PolicyPlanned})
	s1 := newStream(t, d, true)
	l := newTrainLoop(t, a, []int64{3 * MiB, 7 * MiB})
	i := untilPlanned(t, l, 0)
	g := l.grads[0]
	require.NotNil(t, a.ptrs.get(g).arena, "the gradient is a slot")
	require.NoError(t, a.RecordStream(g, s1))
	l.step(i) // frees the gradient first
	require.Equal(t, int64(1), a.PlanStats().Ended)
	checkInvariants(t, a)
	st := a.Stats()
	require.Greater(t, cur(st.ActiveBytes), cur(st.AllocatedBytes), "the gradient waits for stream s1")
	require.NoError(t, d.ReleaseStream(s1))
	l.step(i + 1)
	checkInvariants(t, a)
	l.close()
	requireDrained(t, a, d)
}

// A capture ends the plan: the captured stream's requests go to the capture's pool.
func TestPlannedCaptureEndsPlan(t *testing.T) {
	a, d := newAlloc(t, 0, Config{Policy: PolicyPlanned})
	l := newTrainLoop(t, a, []int64{3 * MiB, 7 * MiB})
	i := untilPlanned(t, l, 0)
	pool := a.NewPool()
	require.NoError(t, a.BeginCapture(0, pool))
	require.Zero(t, a.PlanStats().Period)
	l.step(i)
	require.Zero(t, a.PlanStats().Period, "no plan while capturing")
	require.NoError(t, a.EndCapture(0))
	l.close()
	require.NoError(t, a.ReleasePool(pool))
	requireDrained(t, a, d)
}

// When the device is full, a request the plan's arenas could hold pauses the plan
// instead of failing, and the plan starts again at its next turn.
func TestPlannedDeviceFullPausesPlan(t *testing.T) {
	a, d := newAlloc(t, 64*MiB, Config{Policy: PolicyPlanned})
	l := newTrainLoop(t, a, []int64{3 * MiB, 5 * MiB, 7 * MiB})
	i := untilPlanned(t, l, 0)
	st, ps := a.Stats(), a.PlanStats()
	free := 64*MiB - cur(st.ReservedBytes)
	// More than the device has free, less than that and the arenas' free gaps.
	p := mustAlloc(t, a, free+MiB, 0)
	checkInvariants(t, a)
	require.Zero(t, a.PlanStats().Period, "the plan gave its memory back")
	require.Positive(t, ps.ArenaBytes)
	mustFree(t, a, p)
	untilPlanned(t, l, i)
	l.close()
	requireDrained(t, a, d)
}

// noVM hides a device's virtual memory management.
type noVM struct{ device.Device }

// Without virtual memory management the planned policy has no pages to stitch: its
// caching path is PyTorch's over raw segments, and plans take their arenas from cached
// blocks, when one is large enough (here the step's temporaries fit in one segment).
func TestPlannedWithoutVirtualMemory(t *testing.T) {
	d := newSim(t, 0)
	a, err := New(noVM{d}, Config{Policy: PolicyPlanned})
	require.NoError(t, err)
	require.False(t, a.Config().ExpandableSegments)
	l := newTrainLoop(t, a, []int64{3 * MiB, 300 * KiB})
	i := untilPlanned(t, l, 0)
	st := a.Stats()
	for j := range 4 {
		l.step(i + j)
		checkInvariants(t, a)
	}
	require.Equal(t, st.NumDeviceAlloc, a.Stats().NumDeviceAlloc, "no device allocation once planned")
	// A departure dissolves the arenas into their raw segments: their gaps count as
	// inactive split blocks (the invariants recount them).
	odd := mustAlloc(t, a, 12345, 0)
	checkInvariants(t, a)
	mustFree(t, a, odd)
	l.close()
	requireDrained(t, a, d)
}

// PyTorch's blog pattern: eight 16 MiB blocks, freed, then four 32 MiB ones. PyTorch's
// policy keeps the first segments and rents new ones (256 MiB reserved); stitching
// moves the free pages under the new blocks: 128 MiB, however the sizes come.
func TestStitchingBlogPattern(t *testing.T) {
	for _, c := range []struct {
		policy   Policy
		reserved int64
	}{{PolicyPyTorch, 256 * MiB}, {PolicyPlanned, 128 * MiB}} {
		t.Run(c.policy.String(), func(t *testing.T) {
			a, d := newAlloc(t, 0, Config{Policy: c.policy})
			var ps []device.Ptr
			for range 8 {
				ps = append(ps, mustAlloc(t, a, 16*MiB, 0))
			}
			mustFree(t, a, ps...)
			ps = ps[:0]
			for range 4 {
				ps = append(ps, mustAlloc(t, a, 32*MiB, 0))
			}
			checkInvariants(t, a)
			require.Equal(t, c.reserved, a.Stats().ReservedBytes[StatAll].Peak)
			mustFree(t, a, ps...)
			requireDrained(t, a, d)
		})
	}
}

func TestPolicyConfig(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Config
	}{
		{"policy:pytorch", Config{}},
		{"policy:planned", Config{Policy: PolicyPlanned}},
		{"policy:planned,max_split_size_mb:64", Config{Policy: PolicyPlanned, MaxSplitSize: 64 * MiB}},
	} {
		got, err := ParseConfig(c.in)
		require.NoError(t, err, c.in)
		require.Equal(t, c.want, got, c.in)
	}
	_, err := ParseConfig("policy:lifetime")
	var ce *ConfigError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "policy", ce.Key)
	require.Contains(t, err.Error(), "policy 'lifetime' is unknown; want 'pytorch'")
	require.ErrorContains(t, Config{Policy: numPolicies}.validate(), "Policy")
	require.Equal(t, "planned", PolicyPlanned.String())

	// The planned policy maps pages where the device can: its Config says so.
	a, _ := newAlloc(t, 0, Config{Policy: PolicyPlanned})
	require.True(t, a.Config().ExpandableSegments)
	d := newSim(t, 0)
	_, err = ForConfig(d, Config{Policy: PolicyPlanned})
	require.NoError(t, err)
	_, err = ForConfig(d, Config{Policy: PolicyPlanned})
	require.NoError(t, err, "the same configuration again")
	_, err = ForConfig(d, Config{})
	require.ErrorContains(t, err, "already exists", "another policy")
}

// The hot paths make no heap allocation: a cached block under PyTorch's policy, a slot
// under the planned one, and a step of the training loop under either.
func TestHotPathsDoNotAllocate(t *testing.T) {
	for _, p := range []Policy{PolicyPyTorch, PolicyPlanned} {
		a, d := newAlloc(t, 0, Config{Policy: p})
		for range 16 {
			mustFree(t, a, mustAlloc(t, a, MiB, 0))
		}
		n := testing.AllocsPerRun(100, func() {
			q, err := a.Alloc(MiB, 0)
			if err == nil {
				err = a.Free(q)
			}
			require.NoError(t, err)
		})
		require.Zero(t, n, "%s: a pair", p)
		l := newTrainLoop(t, a, []int64{3 * MiB, 300 * KiB})
		i := 0
		for ; i < 8; i++ {
			l.step(i)
		}
		n = testing.AllocsPerRun(20, func() { l.step(i); i++ })
		require.Zero(t, n, "%s: a step", p)
		l.close()
		requireDrained(t, a, d)
	}
}

// Hinted, the parameters and the optimizer's state live in segments of their own under
// the planned policy, never between blocks that die within a step: the step's plan
// finds its arenas sooner and with fewer pages moved. PyTorch's policy ignores the
// hints: every statistic is the same.
func TestLifetimeHints(t *testing.T) {
	type outcome struct {
		planned    int
		st         Stats
		longLived  int
		deviceCall int64
	}
	run := func(p Policy, hinted bool) outcome {
		a, d := newAlloc(t, 0, Config{Policy: p})
		l := newHintedLoop(t, a, []int64{3 * MiB, 5*MiB + 700, 300 * KiB, 7 * MiB}, hinted)
		var o outcome
		if p == PolicyPlanned {
			o.planned = untilPlanned(t, l, 0)
		} else {
			for ; o.planned < 6; o.planned++ {
				l.step(o.planned)
			}
		}
		checkInvariants(t, a)
		o.st = a.Stats()
		o.deviceCall = o.st.NumDeviceAlloc + o.st.NumDeviceFree
		for _, q := range append(slices.Clone(l.params), l.state...) {
			if a.ptrs.get(q).seg.ss.longLived {
				o.longLived++
			}
		}
		for _, seg := range a.segments {
			for b := range seg.blocks() {
				if b.allocated && seg.ss.longLived {
					require.True(t, slices.Contains(l.params, b.addr) || slices.Contains(l.state, b.addr), "only long-lived blocks in their segments")
				}
			}
		}
		l.close()
		requireDrained(t, a, d)
		return o
	}
	plain, hinted := run(PolicyPlanned, false), run(PolicyPlanned, true)
	require.Zero(t, plain.longLived)
	require.Equal(t, 4*4, hinted.longLived, "every parameter and state tensor apart")
	require.Less(t, hinted.planned, plain.planned, "the plan starts sooner")
	require.Less(t, hinted.deviceCall, plain.deviceCall, "fewer pages moved")
	py, pyHinted := run(PolicyPyTorch, false), run(PolicyPyTorch, true)
	require.Equal(t, py.st, pyHinted.st)
	require.Zero(t, pyHinted.longLived)
}

func TestLifetimeNames(t *testing.T) {
	require.Equal(t, "optimizer_state", LifetimeOptimizerState.String())
	require.Equal(t, "alloc.Lifetime(9)", Lifetime(9).String())
}

// Stitching moves a hole's pages without synchronizing their stream when the fence
// recorded at the hole's free has completed, and synchronizes it when the fence is
// still pending (the device may still be using the pages): the same pages move either
// way, one Remap each.
func TestStitchWaitsOnlyForPendingWork(t *testing.T) {
	for _, busy := range []bool{false, true} {
		t.Run(map[bool]string{false: "idle", true: "busy"}[busy], func(t *testing.T) {
			a, d := newAlloc(t, 0, Config{Policy: PolicyPlanned})
			lo := mustAlloc(t, a, 32*MiB, 0)
			hole := mustAlloc(t, a, 40*MiB, 0)
			hi := mustAlloc(t, a, 32*MiB, 0)
			if busy {
				require.NoError(t, d.HoldStream(0))
			}
			mustFree(t, a, hole)
			before := d.Stats()
			// 48 MiB fit in no free block: the hole's 40 MiB of pages move under it and
			// 8 MiB are new, the high-water mark being 104 MiB.
			big := mustAlloc(t, a, 48*MiB, 0)
			after := d.Stats()
			checkInvariants(t, a)
			require.Equal(t, 112*MiB, a.Stats().ReservedBytes[StatAll].Current)
			require.Equal(t, 8*MiB, after.InUse-before.InUse)
			syncs := int64(0)
			if busy {
				syncs = 1
			}
			require.Equal(t, syncs, after.StreamSyncs-before.StreamSyncs)
			// The hole's two 16 MiB extents and four pages move under the new block, which
			// takes four new pages.
			require.Equal(t, [3]int64{6, 4, 0}, [3]int64{after.Remaps - before.Remaps, after.Maps - before.Maps, after.Unmaps - before.Unmaps})
			require.NoError(t, d.ReleaseStream(0))
			mustFree(t, a, lo, hi, big)
			requireDrained(t, a, d)
		})
	}
}

// A request whose pages the device cannot hold is refused after one MemInfo, with no
// page mapped and unmapped again for nothing; the error still wraps the device's
// ErrOutOfMemory and the allocator's state is unchanged.
func TestPlannedMapsNothingTheDeviceCannotHold(t *testing.T) {
	a, d := newAlloc(t, 256*MiB, Config{Policy: PolicyPlanned})
	live := mustAlloc(t, a, 100*MiB, 0)
	before, st := d.Stats(), a.Stats()
	_, err := a.Alloc(200*MiB, 0)
	var oom *OOMError
	require.ErrorAs(t, err, &oom)
	require.ErrorIs(t, err, device.ErrOutOfMemory)
	after := d.Stats()
	require.Equal(t, before.Maps, after.Maps)
	require.Equal(t, before.Unmaps, after.Unmaps)
	require.Equal(t, st.ReservedBytes[StatAll].Current, a.Stats().ReservedBytes[StatAll].Current)
	checkInvariants(t, a)
	mustFree(t, a, live)
	requireDrained(t, a, d)
}

// When the device fails to move a hole's pages, and then to unmap them, the request
// fails with the device's error and the allocator's books stay the device's: the pages
// it could not unmap count as reserved free memory, and go back once the device works.
func TestStitchMoveFailures(t *testing.T) {
	for _, failUnmap := range []bool{false, true} {
		t.Run(map[bool]string{false: "remap", true: "remap and unmap"}[failUnmap], func(t *testing.T) {
			a, f, d := newFlakyAlloc(t, 0, Config{Policy: PolicyPlanned})
			lo := mustAlloc(t, a, 32*MiB, 0)
			hole := mustAlloc(t, a, 40*MiB, 0)
			hi := mustAlloc(t, a, 32*MiB, 0)
			mustFree(t, a, hole)
			f.failNext("Remap", always)
			if failUnmap {
				f.failNext("Unmap", 1)
			}
			_, err := a.Alloc(48*MiB, 0)
			require.ErrorIs(t, err, errBroken)
			checkInvariants(t, a)
			require.Equal(t, d.Stats().InUse, a.Stats().ReservedBytes[StatAll].Current, "the books are the device's")
			f.heal("Remap")
			f.heal("Unmap")
			big := mustAlloc(t, a, 48*MiB, 0)
			checkInvariants(t, a)
			mustFree(t, a, lo, hi, big)
			requireDrained(t, a, d)
		})
	}
}

// A hole's 16 MiB extent that stitching unmaps can become part of the run it then maps
// page by page: the held extent overlaps the first page mapped, so it is unmapped whole
// and the pages are mapped anew. Here the hole is oversize for a 6 MiB request (max
// split size 20 MiB) and shares its top extent with a live block, so only its bottom
// extent is whole; unmapped, it starts a run as cheap as the one above the live block
// and lower, which the stitch takes. When the device refuses that unmap, the request
// fails with its error, the books take the extent back as free memory, and the same
// request then succeeds the same way.
func TestStitchUnmapsHeldExtentUnderNewPages(t *testing.T) {
	for _, failUnmap := range []bool{false, true} {
		t.Run(map[bool]string{false: "unmap", true: "unmap fails"}[failUnmap], func(t *testing.T) {
			d, err := sim.New(sim.Options{Capacity: 256 * MiB, Cost: &sim.CostModel{}, Backing: true})
			require.NoError(t, err)
			f := newFlaky(d)
			a, err := New(f, Config{Policy: PolicyPlanned, MaxSplitSize: 20 * MiB})
			require.NoError(t, err)
			whole := mustAlloc(t, a, 32*MiB, 0) // extents [0, 16) and [16, 32) MiB
			mustFree(t, a, whole)
			hole := mustAlloc(t, a, 24*MiB, 0)
			live := mustAlloc(t, a, 8*MiB, 0)
			require.Equal(t, [2]device.Ptr{whole, whole + device.Ptr(24*MiB)}, [2]device.Ptr{hole, live})
			mustFree(t, a, hole)
			if failUnmap {
				f.failNext("Unmap", 1)
				_, err := a.Alloc(6*MiB, 0)
				require.ErrorIs(t, err, errBroken)
				checkInvariants(t, a)
				require.Equal(t, 32*MiB, a.Stats().ReservedBytes[StatAll].Current)
				require.Equal(t, d.Stats().InUse, a.Stats().ReservedBytes[StatAll].Current, "the books are the device's")
				_, mapped := d.Bytes(whole, 32*MiB)
				require.True(t, mapped, "the hole's extents stay mapped")
			}
			before := d.Stats()
			p := mustAlloc(t, a, 6*MiB, 0)
			after := d.Stats()
			checkInvariants(t, a)
			require.Equal(t, whole, p, "the new block lies where the hole's bottom extent was")
			// One Unmap of the held 16 MiB extent, three Maps of a page each, no Remap.
			require.Equal(t, [3]int64{0, 3, 1}, [3]int64{after.Remaps - before.Remaps, after.Maps - before.Maps, after.Unmaps - before.Unmaps})
			require.Equal(t, 22*MiB, a.Stats().ReservedBytes[StatAll].Current)
			require.Equal(t, after.InUse, a.Stats().ReservedBytes[StatAll].Current, "the books are the device's")
			_, mapped := d.Bytes(p, 6*MiB)
			require.True(t, mapped, "the new block is mapped")
			_, mapped = d.Bytes(p+device.Ptr(6*MiB), 2*MiB)
			require.False(t, mapped, "the rest of the extent is not")
			_, mapped = d.Bytes(p+device.Ptr(16*MiB), 16*MiB)
			require.True(t, mapped, "the hole's top and the live block keep their extent")
			mustFree(t, a, p, live)
			requireDrained(t, a, d)
		})
	}
}

// EmptyCache under the planned policy gives back pages whose fence has completed
// without synchronizing their stream, and synchronizes it while the fence is pending.
func TestPlannedEmptyCacheWaitsOnlyForPendingWork(t *testing.T) {
	for _, busy := range []bool{false, true} {
		t.Run(map[bool]string{false: "idle", true: "busy"}[busy], func(t *testing.T) {
			a, d := newAlloc(t, 0, Config{Policy: PolicyPlanned})
			p := mustAlloc(t, a, 40*MiB, 0)
			if busy {
				require.NoError(t, d.HoldStream(0))
			}
			mustFree(t, a, p)
			before := d.Stats().StreamSyncs
			require.NoError(t, a.EmptyCache())
			syncs := int64(0)
			if busy {
				syncs = 1
			}
			require.Equal(t, syncs, d.Stats().StreamSyncs-before)
			require.Zero(t, a.Stats().ReservedBytes[StatAll].Current)
			require.NoError(t, d.ReleaseStream(0))
			requireDrained(t, a, d)
		})
	}
}
