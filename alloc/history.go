package alloc

import (
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/subletml/sublet/device"
)

// Memory history (torch.cuda.memory._record_memory_history): while it is on, every
// allocation remembers the Go call stack and the Tag it was made with, and, with
// HistoryOptions.Trace, every event (alloc, free, segment alloc/free/map/unmap, empty
// cache, OOM, snapshot) goes into a bounded ring. MemorySnapshot reads both out.
//
// Cost: off, Alloc and Free pay one atomic load and a branch (BenchmarkPairHistory/off
// against BenchmarkPair before history existed, docs/benchmarks.md). On, each Alloc
// (and with Trace each Free and EmptyCache) captures up to StackDepth return addresses
// with runtime.Callers before taking the lock, and interns (stack, tag) in a map:
// program counters become function names, files and lines only when a snapshot is
// taken.

// StackDepth is the number of frames history keeps of each call stack.
const StackDepth = 32

// DefaultMaxEntries is the ring's size when HistoryOptions.MaxEntries is 0.
const DefaultMaxEntries = 100_000

// Tag names what an allocation is for: the op that asked for it, the scope it ran in, and
// how long it is expected to live. The tensor package passes its op name; the zero Tag
// is "untagged".
type Tag struct {
	Op, Scope string
	// Lifetime is a placement hint as well: the planned policy keeps long-lived
	// allocations apart (PyTorch's policy ignores it).
	Lifetime Lifetime
}

// Action is what a history event records; String is PyTorch's trace entry "action".
type Action uint8

const (
	// ActionAlloc is a block handed to a caller.
	ActionAlloc Action = iota + 1
	// ActionFreeRequested is a Free call; the block is reusable once
	// ActionFreeCompleted follows (at once, or after other streams' events).
	ActionFreeRequested
	// ActionFreeCompleted is a freed block back in the cache.
	ActionFreeCompleted
	// ActionSegmentAlloc is a new segment from the device; ActionSegmentFree one given
	// back.
	ActionSegmentAlloc
	ActionSegmentFree
	// ActionSegmentMap and ActionSegmentUnmap are pages of an expandable segment mapped
	// or unmapped.
	ActionSegmentMap
	ActionSegmentUnmap
	// ActionOOM is an allocation that failed for lack of memory.
	ActionOOM
	// ActionSnapshot marks the moment a MemorySnapshot was taken.
	ActionSnapshot
	// ActionEmptyCache is an EmptyCache call (sublet's own action: PyTorch records only
	// the segment_free events it causes).
	ActionEmptyCache
)

var actionNames = [...]string{
	ActionAlloc: "alloc", ActionFreeRequested: "free_requested", ActionFreeCompleted: "free_completed",
	ActionSegmentAlloc: "segment_alloc", ActionSegmentFree: "segment_free",
	ActionSegmentMap: "segment_map", ActionSegmentUnmap: "segment_unmap",
	ActionOOM: "oom", ActionSnapshot: "snapshot", ActionEmptyCache: "empty_cache",
}

func (a Action) String() string {
	if int(a) < len(actionNames) && actionNames[a] != "" {
		return actionNames[a]
	}
	return fmt.Sprintf("alloc.Action(%d)", uint8(a))
}

// ParseAction is the Action named s (String's inverse).
func ParseAction(s string) (Action, bool) {
	for i, n := range actionNames {
		if n == s && n != "" {
			return Action(i), true
		}
	}
	return 0, false
}

// HistoryOptions says what RecordHistory keeps.
type HistoryOptions struct {
	// Trace keeps the ring of events (PyTorch's enabled="all"); false keeps only the
	// stacks and tags of live blocks and the per-site totals (enabled="state").
	Trace bool
	// MaxEntries bounds the ring: once full, each event replaces the oldest. 0 means
	// DefaultMaxEntries; negative is an error.
	MaxEntries int
	// Sink, when not nil, is called with every event, in order, under the allocator's
	// lock: it must return quickly and must not call the allocator. It sees events
	// whether or not Trace is set (the recorder writes a replay trace from them).
	Sink func(HistoryEvent)
}

// HistoryEvent is one event as the Sink sees it: no stack, which would have to be
// symbolised on the hot path.
type HistoryEvent struct {
	Action Action
	// Addr is the block's or segment's address; 0 for oom, snapshot and empty_cache.
	Addr device.Ptr
	// Size is PyTorch's "size": the caller's size for alloc, free_requested,
	// free_completed and oom, the segment's or mapped range's for the segment actions.
	Size int64
	// BlockSize is the rounded block size of alloc and free events (equal to Size for
	// the segment actions).
	BlockSize int64
	Stream    device.Stream
	// DeviceFree is the device's free memory at an oom.
	DeviceFree int64
	// TimeUs is the wall clock in microseconds since the Unix epoch.
	TimeUs int64
	Tag    Tag
}

// history is the recording state of an Allocator. Guarded by Allocator.mu.
type history struct {
	// opts are the program's options (RecordHistory), in force while program is set:
	// from RecordHistory to StopHistory.
	opts    HistoryOptions
	program bool
	// sinks are the sinks AddHistorySink added and their undo has not taken away, in
	// the order added. They hear every event while they listen, whatever the program
	// turns on or off, and keep history recording (stacks of live blocks only, when the
	// program has it off).
	sinks []*addedSink
	// ring holds the events, oldest at next once the ring is full (len == MaxEntries).
	ring []traceRec
	next int
	// dropped counts the events the ring pushed out (or a smaller MaxEntries cut); 0
	// while there is no ring.
	dropped int64
	// sites are the interned (stack, tag) pairs; sites[0] is "unknown".
	sites     []site
	siteIndex map[siteKey]int32
	// cur is the site of the call in progress (0 when it captured none).
	cur int32
}

// addedSink is a sink of AddHistorySink; its address tells it from the others.
type addedSink struct{ f func(HistoryEvent) }

// on reports whether history records, for the program or for a sink.
func (h *history) on() bool { return h.program || len(h.sinks) > 0 }

// tracing reports whether events go into the ring.
func (h *history) tracing() bool { return h.program && h.opts.Trace }

// siteKey is a call stack and a tag; the unused tail of pcs is zero.
type siteKey struct {
	pcs [StackDepth]uintptr
	tag Tag
}

// site is an interned siteKey with its cumulative totals since recording started.
type site struct {
	key               siteKey
	allocs, allocSize int64
}

// traceRec is one ring entry.
type traceRec struct {
	HistoryEvent
	site int32
}

// RecordHistory turns memory history on with o, or changes its options; what was
// recorded before is kept unless the ring shrinks (the newest events stay). Live blocks
// allocated before recording started have no stack.
func (a *Allocator) RecordHistory(o HistoryOptions) error {
	if o.MaxEntries < 0 {
		return fmt.Errorf("alloc: RecordHistory on %s: MaxEntries %d is negative (0 means %d)", a.dev.Name(), o.MaxEntries, DefaultMaxEntries)
	}
	if o.MaxEntries == 0 {
		o.MaxEntries = DefaultMaxEntries
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	h := a.historyLocked()
	if o.Trace {
		h.resize(o.MaxEntries)
	} else {
		h.ring, h.next, h.dropped = nil, 0, 0
	}
	h.opts, h.program = o, true
	a.setHistoryFlags()
	return nil
}

// historyLocked returns the history, created empty on first use.
func (a *Allocator) historyLocked() *history {
	if a.hist == nil {
		a.hist = &history{sites: make([]site, 1), siteIndex: make(map[siteKey]int32)}
	}
	return a.hist
}

// setHistoryFlags publishes, for the calls' check before the lock, whether they capture
// their stack.
func (a *Allocator) setHistoryFlags() {
	a.histOn.Store(a.hist.on())
	a.histTrace.Store(a.hist.tracing())
}

// HistoryOptions returns the options the program's RecordHistory set (zero when it has
// not, or has stopped), and whether history records: for the program, or for a sink
// AddHistorySink added.
func (a *Allocator) HistoryOptions() (HistoryOptions, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	h := a.hist
	if h == nil {
		return HistoryOptions{}, false
	}
	if !h.program {
		return HistoryOptions{}, h.on()
	}
	return h.opts, true
}

// AddHistorySink adds sink beside the program's history: it hears every event (as
// HistoryOptions.Sink does, under the allocator's lock) until undo, whatever the program
// records, turns on or stops meanwhile; while history is otherwise off it records
// stacks of live blocks only. Undo takes away this sink alone, in whatever order the
// sinks' undos come, and turns history off when it was on for the sinks only; a second
// undo does nothing. It is how a recorder or a profiler listens without disturbing what
// the program records.
func (a *Allocator) AddHistorySink(sink func(HistoryEvent)) (undo func(), err error) {
	if sink == nil {
		return nil, fmt.Errorf("alloc: AddHistorySink on %s: the sink is nil", a.dev.Name())
	}
	s := &addedSink{sink}
	a.mu.Lock()
	defer a.mu.Unlock()
	h := a.historyLocked()
	h.sinks = append(h.sinks, s)
	a.setHistoryFlags()
	return func() { a.removeSink(s) }, nil
}

// removeSink takes s away from the sinks, if it is still there.
func (a *Allocator) removeSink(s *addedSink) {
	a.mu.Lock()
	defer a.mu.Unlock()
	h := a.hist
	if i := slices.Index(h.sinks, s); i >= 0 {
		h.sinks = slices.Delete(h.sinks, i, i+1)
		a.setHistoryFlags()
	}
}

// StopHistory stops the program's recording (PyTorch's _record_memory_history(None)):
// calls no longer capture stacks, unless a sink AddHistorySink added still listens. What
// was recorded stays readable through MemorySnapshot until ClearHistory or the next
// RecordHistory's changes.
func (a *Allocator) StopHistory() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.hist != nil {
		a.hist.program = false
		a.setHistoryFlags()
	}
}

// ClearHistory forgets every recorded event, stack and total; recording goes on if it
// was on.
func (a *Allocator) ClearHistory() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.hist == nil {
		return
	}
	for _, seg := range a.segments {
		for b := range seg.blocks() {
			b.site = 0
		}
	}
	old := a.hist
	a.hist = &history{opts: old.opts, program: old.program, sinks: old.sinks, sites: make([]site, 1), siteIndex: make(map[siteKey]int32)}
}

// resize keeps the newest n events in order, oldest first.
func (h *history) resize(n int) {
	old := h.ordered()
	if len(old) > n {
		h.dropped += int64(len(old) - n)
		old = old[len(old)-n:]
	}
	h.ring = append(make([]traceRec, 0, min(n, max(len(old), 1024))), old...)
	h.next = 0
}

// ordered returns the ring's events oldest first (a new slice when it wrapped).
func (h *history) ordered() []traceRec {
	if h.next == 0 {
		return h.ring
	}
	out := make([]traceRec, 0, len(h.ring))
	out = append(out, h.ring[h.next:]...)
	return append(out, h.ring[:h.next]...)
}

// callSite is what a recording call captured before taking the lock.
type callSite struct {
	key siteKey
}

// capture fills c with the caller's stack, skipping skip frames above capture's caller.
//
//go:noinline
func (c *callSite) capture(skip int, tag Tag) *callSite {
	runtime.Callers(skip+2, c.key.pcs[:])
	c.key.tag = tag
	return c
}

// begin sets the site of the call in progress: c's, interned, or none.
func (h *history) begin(c *callSite) {
	if c == nil {
		h.cur = 0
		return
	}
	id, ok := h.siteIndex[c.key]
	if !ok {
		id = int32(len(h.sites))
		h.sites = append(h.sites, site{key: c.key})
		h.siteIndex[c.key] = id
	}
	h.cur = id
}

// record adds event e, made at site s.
func (h *history) record(e HistoryEvent, s int32) {
	e.TimeUs = time.Now().UnixMicro()
	e.Tag = h.sites[s].key.tag
	if h.program && h.opts.Sink != nil {
		h.opts.Sink(e)
	}
	for _, sk := range h.sinks {
		sk.f(e)
	}
	if !h.tracing() {
		return
	}
	r := traceRec{HistoryEvent: e, site: s}
	if len(h.ring) < h.opts.MaxEntries {
		h.ring = append(h.ring, r)
		return
	}
	h.ring[h.next] = r
	h.dropped++
	if h.next++; h.next == len(h.ring) {
		h.next = 0
	}
}

// The recording points below are called under mu.

// recording returns the history while it records, else nil.
func (a *Allocator) recording() *history {
	if h := a.hist; h != nil && h.on() {
		return h
	}
	return nil
}

// beginCall starts a call that may record events: c is what it captured (nil when
// history was off at its start).
func (a *Allocator) beginCall(c *callSite) {
	if h := a.recording(); h != nil {
		h.begin(c)
	}
}

// recordAlloc records b's allocation. Stopped, it still clears b's site: a block reused
// whole keeps the struct, and with it the site of the allocation that held it before.
func (a *Allocator) recordAlloc(b *block, s device.Stream) {
	h := a.recording()
	if h == nil {
		b.site = 0
		return
	}
	b.site = h.cur
	st := &h.sites[h.cur]
	st.allocs++
	st.allocSize += b.size
	h.record(HistoryEvent{Action: ActionAlloc, Addr: b.addr, Size: b.requested, BlockSize: b.size, Stream: s}, h.cur)
}

// recordFree records a free_requested or free_completed of b: with the site of the
// call in progress, or when it has none (a deferred free completed by another call
// that captured none) the block's own, as PyTorch falls back to the allocation's
// context.
func (a *Allocator) recordFree(act Action, b *block) {
	h := a.recording()
	if h == nil {
		return
	}
	s := h.cur
	if s == 0 {
		s = b.site
	}
	h.record(HistoryEvent{Action: act, Addr: b.addr, Size: b.requested, BlockSize: b.size, Stream: b.seg.stream}, s)
}

// recordSegment records a segment action over [addr, addr+size) of seg.
func (a *Allocator) recordSegment(act Action, addr device.Ptr, size int64, seg *segment) {
	if h := a.recording(); h != nil {
		h.record(HistoryEvent{Action: act, Addr: addr, Size: size, BlockSize: size, Stream: seg.stream}, h.cur)
	}
}

// recordCall records an event that concerns no block: oom, snapshot, empty_cache.
func (a *Allocator) recordCall(act Action, size int64, s device.Stream, deviceFree int64) {
	if h := a.recording(); h != nil {
		h.record(HistoryEvent{Action: act, Size: size, Stream: s, DeviceFree: deviceFree}, h.cur)
	}
}
