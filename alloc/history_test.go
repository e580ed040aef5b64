package alloc

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/subletml/sublet/device"
)

// event is the comparable part of a TraceEntry.
type event struct {
	act             Action
	addr            device.Ptr
	size, blockSize int64
}

func events(s *MemorySnapshot) []event {
	var out []event
	for _, e := range s.Trace {
		out = append(out, event{e.Action, e.Addr, e.Size, e.BlockSize})
	}
	return out
}

func TestHistoryOffRecordsNothing(t *testing.T) {
	a, d := newAlloc(t, 0, Config{})
	p, err := a.AllocTagged(1000, 0, Tag{Op: "MatMul"})
	require.NoError(t, err)
	s := a.MemorySnapshot()
	assert.Empty(t, s.Trace)
	require.Len(t, s.Segments, 1)
	assert.Nil(t, s.Segments[0].Blocks[0].Frames)
	assert.Equal(t, Tag{}, s.Segments[0].Blocks[0].Tag)
	assert.Nil(t, a.HistorySites())
	mustFree(t, a, p)
	requireDrained(t, a, d)
}

func TestHistoryTraceOfOneAllocation(t *testing.T) {
	a, d := newAlloc(t, 0, Config{})
	require.NoError(t, a.RecordHistory(HistoryOptions{Trace: true}))
	p, err := a.AllocTagged(1000, 0, Tag{Op: "MatMul", Scope: "layer1"})
	require.NoError(t, err)

	s := a.MemorySnapshot()
	require.Len(t, s.Segments, 1)
	b := s.Segments[0].Blocks[0]
	assert.Equal(t, ActiveAllocated, b.State)
	assert.Equal(t, Tag{Op: "MatMul", Scope: "layer1"}, b.Tag)
	require.NotEmpty(t, b.Frames)
	assert.Equal(t, "github.com/subletml/sublet/alloc.TestHistoryTraceOfOneAllocation", b.Frames[0].Name,
		"the first frame is the caller of AllocTagged")
	assert.True(t, strings.HasSuffix(b.Frames[0].Filename, "alloc/history_test.go"), b.Frames[0].Filename)
	assert.Positive(t, b.Frames[0].Line)

	require.NoError(t, a.Free(p))
	require.NoError(t, a.EmptyCache())
	s = a.MemorySnapshot()
	seg := 2 * MiB // a small request's segment
	assert.Equal(t, []event{
		{ActionSegmentAlloc, p, seg, seg},
		{ActionAlloc, p, 1000, 1024},
		{ActionSnapshot, 0, 0, 0},
		{ActionFreeRequested, p, 1000, 1024},
		{ActionFreeCompleted, p, 1000, 1024},
		{ActionEmptyCache, 0, 0, 0},
		{ActionSegmentFree, p, seg, seg},
		{ActionSnapshot, 0, 0, 0},
	}, events(s))
	assert.Zero(t, s.Dropped)
	assert.True(t, s.Recording)
	for i, e := range s.Trace {
		assert.Positive(t, e.TimeUs, "event %d", i)
		if i > 0 {
			assert.GreaterOrEqual(t, e.TimeUs, s.Trace[i-1].TimeUs, "event %d", i)
		}
	}
	assert.Equal(t, "MatMul", s.Trace[1].Tag.Op)
	// Every event but the snapshots was made by a call from this test.
	for _, i := range []int{0, 1, 3, 4, 5, 6} {
		require.NotEmpty(t, s.Trace[i].Frames, "event %d", i)
		assert.Equal(t, "github.com/subletml/sublet/alloc.TestHistoryTraceOfOneAllocation", s.Trace[i].Frames[0].Name, "event %d", i)
	}
	assert.Empty(t, s.Trace[2].Frames)
	requireDrained(t, a, d)
}

func TestHistoryRingKeepsTheNewest(t *testing.T) {
	a, d := newAlloc(t, 0, Config{})
	require.NoError(t, a.RecordHistory(HistoryOptions{Trace: true, MaxEntries: 4}))
	p := mustAlloc(t, a, 512, 0) // segment_alloc, alloc
	for range 3 {
		mustFree(t, a, p) // free_requested, free_completed
		p = mustAlloc(t, a, 512, 0)
	}
	// 2 + 3×(2+1) = 11 events, then the snapshot's: the ring keeps the last 4.
	s := a.MemorySnapshot()
	assert.Equal(t, []event{
		{ActionFreeRequested, p, 512, 512},
		{ActionFreeCompleted, p, 512, 512},
		{ActionAlloc, p, 512, 512},
		{ActionSnapshot, 0, 0, 0},
	}, events(s))
	assert.Equal(t, int64(8), s.Dropped)

	// Growing the ring keeps what it holds; shrinking keeps the newest.
	require.NoError(t, a.RecordHistory(HistoryOptions{Trace: true, MaxEntries: 10}))
	mustFree(t, a, p)
	s = a.MemorySnapshot()
	require.Len(t, s.Trace, 7)
	assert.Equal(t, ActionFreeRequested, s.Trace[0].Action)
	require.NoError(t, a.RecordHistory(HistoryOptions{Trace: true, MaxEntries: 2}))
	s = a.MemorySnapshot()
	assert.Equal(t, []event{{ActionSnapshot, 0, 0, 0}, {ActionSnapshot, 0, 0, 0}}, events(s))
	requireDrained(t, a, d)
}

func TestHistoryStateOnlyKeepsStacksOfLiveBlocks(t *testing.T) {
	a, d := newAlloc(t, 0, Config{})
	var seen []Action
	require.NoError(t, a.RecordHistory(HistoryOptions{Sink: func(e HistoryEvent) { seen = append(seen, e.Action) }}))
	var ps []device.Ptr
	for range 2 {
		ps = append(ps, mustAlloc(t, a, 4*MiB, 0)) // one site: same stack, no tag
	}
	p := ps[0]
	mustFree(t, a, ps[1])
	s := a.MemorySnapshot()
	assert.Empty(t, s.Trace, "no ring without Trace")
	require.Len(t, s.Segments, 1)
	blocks := s.Segments[0].Blocks
	require.Len(t, blocks, 2)
	require.NotEmpty(t, blocks[0].Frames)
	assert.Equal(t, "github.com/subletml/sublet/alloc.mustAlloc", blocks[0].Frames[0].Name)
	assert.Equal(t, "github.com/subletml/sublet/alloc.TestHistoryStateOnlyKeepsStacksOfLiveBlocks", blocks[0].Frames[1].Name)
	assert.Nil(t, blocks[1].Frames, "a free block has no stack")
	assert.Equal(t, []Action{ActionSegmentAlloc, ActionAlloc, ActionAlloc, ActionFreeRequested, ActionFreeCompleted, ActionSnapshot}, seen,
		"the sink sees every event")

	sites := a.HistorySites()
	require.Len(t, sites, 1, "one stack and tag allocated (the Free's site allocated nothing)")
	assert.Equal(t, int64(1), sites[0].LiveBlocks)
	assert.Equal(t, 4*MiB, sites[0].LiveBytes)
	assert.Equal(t, int64(2), sites[0].Allocs)
	assert.Equal(t, 8*MiB, sites[0].AllocBytes)
	assert.Equal(t, blocks[0].Frames, sites[0].Frames)
	require.NotEmpty(t, sites[0].PCs)

	a.StopHistory()
	r := mustAlloc(t, a, 4*MiB, 0)
	s = a.MemorySnapshot()
	assert.False(t, s.Recording)
	assert.Equal(t, ActionSnapshot, seen[len(seen)-1], "nothing recorded after StopHistory")
	assert.Nil(t, s.Segments[0].Blocks[1].Frames, "allocated while history was off")
	assert.NotNil(t, s.Segments[0].Blocks[0].Frames, "what was recorded stays")
	a.ClearHistory()
	assert.Empty(t, a.HistorySites())
	assert.Nil(t, a.MemorySnapshot().Segments[0].Blocks[0].Frames)
	mustFree(t, a, p, r)
	requireDrained(t, a, d)
}

func TestHistoryOOMAndDeferredFree(t *testing.T) {
	a, d := newAlloc(t, 64*MiB, Config{})
	require.NoError(t, a.RecordHistory(HistoryOptions{Trace: true}))
	p := mustAlloc(t, a, 40*MiB, 0)
	_, err := a.Alloc(40*MiB, 0)
	var oom *OOMError
	require.ErrorAs(t, err, &oom)
	s2 := newStream(t, d, true)
	require.NoError(t, a.RecordStream(p, s2))
	mustFree(t, a, p)
	s := a.MemorySnapshot()
	assert.Equal(t, []event{
		{ActionSegmentAlloc, p, 40 * MiB, 40 * MiB},
		{ActionAlloc, p, 40 * MiB, 40 * MiB},
		{ActionOOM, 0, 40 * MiB, 0},
		{ActionFreeRequested, p, 40 * MiB, 40 * MiB},
		{ActionSnapshot, 0, 0, 0},
	}, events(s), "the free completes only once the other stream's work is done")
	assert.Equal(t, 24*MiB, s.Trace[2].DeviceFree)
	assert.Equal(t, ActivePendingFree, s.Segments[0].Blocks[0].State)
	require.NoError(t, d.ReleaseStream(s2))
	require.NoError(t, a.EmptyCache())
	s = a.MemorySnapshot()
	tail := events(s)[5:]
	assert.Equal(t, []event{
		{ActionEmptyCache, 0, 0, 0},
		{ActionFreeCompleted, p, 40 * MiB, 40 * MiB},
		{ActionSegmentFree, p, 40 * MiB, 40 * MiB},
		{ActionSnapshot, 0, 0, 0},
	}, tail)
	requireDrained(t, a, d)
}

func TestHistoryExpandableSegmentsMapAndUnmap(t *testing.T) {
	a, d := newAlloc(t, 0, Config{ExpandableSegments: true})
	require.NoError(t, a.RecordHistory(HistoryOptions{Trace: true}))
	p := mustAlloc(t, a, 30*MiB, 0)
	mustFree(t, a, p)
	require.NoError(t, a.EmptyCache())
	s := a.MemorySnapshot()
	assert.Equal(t, []event{
		{ActionSegmentMap, p, 40 * MiB, 40 * MiB},
		{ActionAlloc, p, 30 * MiB, 30 * MiB},
		{ActionFreeRequested, p, 30 * MiB, 30 * MiB},
		{ActionFreeCompleted, p, 30 * MiB, 30 * MiB},
		{ActionEmptyCache, 0, 0, 0},
		{ActionSegmentUnmap, p, 40 * MiB, 40 * MiB},
		{ActionSnapshot, 0, 0, 0},
	}, events(s))
	requireDrained(t, a, d)
}

func TestRecordHistoryRefusesNegativeMaxEntries(t *testing.T) {
	a, _ := newAlloc(t, 0, Config{})
	err := a.RecordHistory(HistoryOptions{Trace: true, MaxEntries: -1})
	require.ErrorContains(t, err, "MaxEntries -1 is negative")
	assert.False(t, a.histOn.Load())
}

func TestActionNames(t *testing.T) {
	for act := ActionAlloc; act <= ActionEmptyCache; act++ {
		got, ok := ParseAction(act.String())
		assert.True(t, ok, act.String())
		assert.Equal(t, act, got)
	}
	assert.Equal(t, "alloc.Action(99)", Action(99).String())
	_, ok := ParseAction("")
	assert.False(t, ok)
}

func TestRegisteredListsTheAllocatorsOfFor(t *testing.T) {
	d := newSim(t, 0)
	a, err := For(d)
	require.NoError(t, err)
	assert.Contains(t, Registered(), a)
}

func TestAddHistorySinkKeepsWhatIsRecorded(t *testing.T) {
	a, d := newAlloc(t, 0, Config{})
	var first, second []Action
	require.NoError(t, a.RecordHistory(HistoryOptions{Trace: true, MaxEntries: 100, Sink: func(e HistoryEvent) { first = append(first, e.Action) }}))
	undo, err := a.AddHistorySink(func(e HistoryEvent) { second = append(second, e.Action) })
	require.NoError(t, err)
	p := mustAlloc(t, a, 512, 0)
	undo()
	mustFree(t, a, p)
	assert.Equal(t, []Action{ActionSegmentAlloc, ActionAlloc}, second, "the added sink, until undone")
	assert.Equal(t, []Action{ActionSegmentAlloc, ActionAlloc, ActionFreeRequested, ActionFreeCompleted}, first, "the program's sink throughout")
	o, on := a.HistoryOptions()
	assert.True(t, on)
	assert.Equal(t, 100, o.MaxEntries)
	assert.Len(t, a.MemorySnapshot().Trace, 5, "the ring kept recording")

	b, _ := newAlloc(t, 0, Config{})
	undo, err = b.AddHistorySink(func(HistoryEvent) {})
	require.NoError(t, err)
	_, on = b.HistoryOptions()
	assert.True(t, on, "on while the sink listens")
	undo()
	_, on = b.HistoryOptions()
	assert.False(t, on, "off again, as it was")
	requireDrained(t, a, d)
}

// A block reused whole (no split) by an allocation made while history is off has no
// site: neither the snapshot nor HistorySites may credit it to the allocation that used
// the block before.
func TestHistoryOffAllocationOfAReusedBlockHasNoSite(t *testing.T) {
	a, d := newAlloc(t, 0, Config{})
	require.NoError(t, a.RecordHistory(HistoryOptions{}))
	p := mustAlloc(t, a, 20*MiB, 0) // a whole 20 MiB segment: reused whole below
	mustFree(t, a, p)
	a.StopHistory()
	q := mustAlloc(t, a, 20*MiB, 0)
	require.Equal(t, p, q, "the same block")
	s := a.MemorySnapshot()
	require.Len(t, s.Segments, 1)
	require.Len(t, s.Segments[0].Blocks, 1)
	assert.Nil(t, s.Segments[0].Blocks[0].Frames, "allocated while history was off")
	sites := a.HistorySites()
	require.Len(t, sites, 1, "the first allocation's site")
	assert.Equal(t, int64(1), sites[0].Allocs)
	assert.Zero(t, sites[0].LiveBlocks, "its block was freed; the live one is not its")
	assert.Zero(t, sites[0].LiveBytes)
	mustFree(t, a, q)
	requireDrained(t, a, d)
}

// Dropped counts only what the ring pushed out: events recorded while there was no ring
// (stacks of live blocks only) were never in it.
func TestHistoryDroppedCountsOnlyTheRing(t *testing.T) {
	a, d := newAlloc(t, 0, Config{})
	require.NoError(t, a.RecordHistory(HistoryOptions{}))
	mustFree(t, a, mustAlloc(t, a, 512, 0)) // segment_alloc, alloc, free_requested, free_completed: no ring
	require.NoError(t, a.RecordHistory(HistoryOptions{Trace: true, MaxEntries: 3}))
	p := mustAlloc(t, a, 512, 0)
	s := a.MemorySnapshot()
	assert.Equal(t, []event{{ActionAlloc, p, 512, 512}, {ActionSnapshot, 0, 0, 0}}, events(s))
	assert.Zero(t, s.Dropped, "the ring dropped nothing")
	mustFree(t, a, p) // free_requested, free_completed: the ring of 3 drops 2
	s = a.MemorySnapshot()
	assert.Equal(t, []event{{ActionFreeRequested, p, 512, 512}, {ActionFreeCompleted, p, 512, 512}, {ActionSnapshot, 0, 0, 0}}, events(s))
	assert.Equal(t, int64(2), s.Dropped)
	require.NoError(t, a.RecordHistory(HistoryOptions{Trace: true, MaxEntries: 1}))
	assert.Equal(t, int64(2+2+1), a.MemorySnapshot().Dropped, "shrinking drops the oldest two, the snapshot one more")
	require.NoError(t, a.RecordHistory(HistoryOptions{}))
	assert.Zero(t, a.MemorySnapshot().Dropped, "no ring, nothing dropped from it")
	requireDrained(t, a, d)
}

// Two tools (a recorder, a profiler) stopping in the order they started: each undo
// takes away its own sink only, and history goes off once neither listens.
func TestAddHistorySinkUndoneInAnyOrder(t *testing.T) {
	a, d := newAlloc(t, 0, Config{})
	var first, second []Action
	undoFirst, err := a.AddHistorySink(func(e HistoryEvent) { first = append(first, e.Action) })
	require.NoError(t, err)
	undoSecond, err := a.AddHistorySink(func(e HistoryEvent) { second = append(second, e.Action) })
	require.NoError(t, err)
	p := mustAlloc(t, a, 512, 0)
	undoFirst()
	mustFree(t, a, p)
	undoSecond()
	_, on := a.HistoryOptions()
	assert.False(t, on, "off again: nobody listens and the program never turned it on")
	assert.False(t, a.histOn.Load(), "calls capture no stack any more")
	undoFirst() // a second undo does nothing
	_, on = a.HistoryOptions()
	assert.False(t, on)
	mustFree(t, a, mustAlloc(t, a, 512, 0))
	assert.Equal(t, []Action{ActionSegmentAlloc, ActionAlloc}, first)
	assert.Equal(t, []Action{ActionSegmentAlloc, ActionAlloc, ActionFreeRequested, ActionFreeCompleted}, second,
		"the second sink hears the free after the first was undone")
	_, err = a.AddHistorySink(nil)
	assert.ErrorContains(t, err, "AddHistorySink on sim: the sink is nil")
	requireDrained(t, a, d)
}

// The program turning history on (or changing it) while a tool listens keeps the tool's
// sink, and the tool's undo keeps what the program turned on.
func TestRecordHistoryWhileASinkListens(t *testing.T) {
	a, d := newAlloc(t, 0, Config{})
	var heard []Action
	undo, err := a.AddHistorySink(func(e HistoryEvent) { heard = append(heard, e.Action) })
	require.NoError(t, err)
	require.NoError(t, a.RecordHistory(HistoryOptions{Trace: true, MaxEntries: 100}))
	p := mustAlloc(t, a, 512, 0)
	undo()
	mustFree(t, a, p)
	assert.Equal(t, []Action{ActionSegmentAlloc, ActionAlloc}, heard, "the sink heard the program's allocation")
	o, on := a.HistoryOptions()
	assert.True(t, on, "the program's history stays on")
	assert.True(t, o.Trace)
	assert.Len(t, a.MemorySnapshot().Trace, 5, "segment_alloc, alloc, free_requested, free_completed, snapshot")

	// A program's StopHistory leaves a tool listening until its undo.
	heard = nil
	undo, err = a.AddHistorySink(func(e HistoryEvent) { heard = append(heard, e.Action) })
	require.NoError(t, err)
	a.StopHistory()
	mustFree(t, a, mustAlloc(t, a, 512, 0))
	undo()
	assert.Equal(t, []Action{ActionAlloc, ActionFreeRequested, ActionFreeCompleted}, heard)
	_, on = a.HistoryOptions()
	assert.False(t, on)
	assert.Len(t, a.MemorySnapshot().Trace, 5, "the program's ring, kept as it was when it stopped")
	requireDrained(t, a, d)
}

// A deferred free completed by EndCapture (whose call captures no stack) carries the
// block's own site, not that of the call before it.
func TestHistoryFreeCompletedByEndCaptureHasTheBlocksSite(t *testing.T) {
	a, f, d := newFlakyAlloc(t, 0, Config{})
	require.NoError(t, a.RecordHistory(HistoryOptions{Trace: true}))
	side := newStream(t, d, true)
	p, err := a.AllocTagged(4096, 0, Tag{Op: "Used"})
	require.NoError(t, err)
	require.NoError(t, a.RecordStream(p, side))
	pool := a.NewPool()
	require.NoError(t, a.BeginCapture(0, pool))
	mustFree(t, a, p) // used on side during a capture: deferred to the capture's end
	q, err := a.AllocTagged(4096, 0, Tag{Op: "InCapture"})
	require.NoError(t, err)
	f.failNext("RecordEvent", always) // EndCapture synchronizes side instead and frees p at once
	require.NoError(t, a.EndCapture(0))
	f.heal("RecordEvent")
	s := a.MemorySnapshot()
	last := s.Trace[len(s.Trace)-2]
	require.Equal(t, ActionFreeCompleted, last.Action)
	require.Equal(t, p, last.Addr)
	assert.Equal(t, "Used", last.Tag.Op, "the block's own site, as PyTorch falls back to the allocation's context")
	mustFree(t, a, q)
	require.NoError(t, a.ReleasePool(pool))
	require.NoError(t, d.ReleaseStream(side))
	requireDrained(t, a, d)
}

// Devices of one name are listed in the order their allocators were made, so that a
// collector can tell them apart the same way at every scrape.
func TestRegisteredOrdersDevicesOfOneNameByCreation(t *testing.T) {
	var made []*Allocator
	for range 8 {
		a, err := For(newSim(t, 0))
		require.NoError(t, err)
		made = append(made, a)
	}
	var listed []*Allocator
	for _, a := range Registered() {
		if slices.Contains(made, a) {
			listed = append(listed, a)
		}
	}
	assert.Equal(t, made, listed)
}
