// Package alloc is a caching allocator over any device.Device whose decisions are those
// of PyTorch 2.11's native CUDA caching allocator (docs/allocator.md says each): request
// rounding, small and large pools, segment sizes, best fit by (stream, size, address),
// splitting and merging, max_split_size, garbage collection, expandable segments,
// per-stream pools with deferred frees through events, the release-and-retry path,
// private pools with PyTorch's graph-capture rules (NewPool, BeginCapture), and the
// same statistics, event by event (checked against PyTorch's own numbers in
// testdata/oracle).
//
// Those decisions are the default policy. Config.Policy selects another behind the
// same seam (policy.go): PolicyPlanned serves repeating request sequences from arenas
// laid out offline (plan.go, planned.go, arena.go) and stitches free pages instead of
// growing (stitch.go). The statistics, history, snapshots, summaries and OOM errors are
// the allocator's own under every policy.
//
// # Use
//
//	a, err := alloc.For(dev)      // dev's allocator, made on first use with SUBLET_ALLOC_CONF
//	p, err := a.Alloc(1<<20, 0)   // 1 MiB on stream 0, the default; an *OOMError when nothing fits
//	err = a.Free(p)               // the block goes back to the cache, not to the device
//	st := a.Stats()               // torch.cuda.memory_stats(); StatsMap has PyTorch's flat keys
//	fmt.Print(a.Summary(false))   // torch.cuda.memory_summary()
//	err = a.EmptyCache()          // cached segments without live blocks go back to the device
//
// Tensors allocate through alloc.For(dev) on their own: a program calls it to read the
// statistics, to set a memory fraction, to turn history on (RecordHistory, for
// snapshots and profiles) or to empty the cache. ForConfig takes a Config instead of
// the environment; New makes a private allocator (tests, replays). ParseConfig reads
// PYTORCH_CUDA_ALLOC_CONF's syntax.
//
// One mutex per Allocator guards all its state; the hot path (a cached block) takes it
// once and makes no heap allocation. Where PyTorch's code was ambiguous or the Go API
// differs, the choice is noted where it is made.
//
// Invariants, all under Allocator.mu:
//   - The blocks of a segment tile it exactly: linked by prev/next in address order,
//     each starting where the previous ends, the first at the segment's base.
//   - A block is in exactly one state: allocated (in ptrs); pending (freed, waiting for
//     eventCount stream events, each queued once, or, freed during a capture while
//     used on other streams, in events.deferred until the last capture ends); free
//     (mapped, in its stream's freeSet of its pool); or unmapped (expandable segments
//     only, in its stream's unmapped list). A segment's streamState is the default
//     pools' or a private Pool's, for good.
//   - While a capture is underway no stream event is recorded or queried and no memory
//     goes back to the device.
//   - Two free blocks, or two unmapped blocks, are never adjacent: freeing merges.
//   - Every statistic's Current equals a recount of the blocks and segments it
//     describes, and Allocated − Freed until ResetAccumulatedStats.
//   - totalAllocated is the device memory held: the sizes of the raw segments plus the
//     mapped pages of expandable segments; it equals ReservedBytes[all].Current.
//   - Under PolicyPlanned, a running plan's arenas are blocks of their segments, allocated
//     but counted nowhere; their live slots are allocated blocks outside the segments'
//     block lists, in ptrs and counted as any allocation, and never overlap.
//   - Device addresses are never 0, which is the null pointer: a size-0 request
//     returns 0 and touches nothing; Free(0) and RecordStream(0, s) do nothing, as in
//     PyTorch.
package alloc

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"sync"
	"sync/atomic"

	"github.com/subletml/sublet/device"
)

// Allocator is a caching allocator over one device. It is safe for concurrent use.
type Allocator struct {
	// Immutable after New.
	dev device.Device
	// vm is the device's virtual memory interface when expandable segments are on.
	vm  device.VirtualMemory
	cfg Config
	// maxSplit is Config.MaxSplitSize, math.MaxInt64 when unlimited (PyTorch: SIZE_MAX).
	maxSplit int64
	// maxNonSplitRounding is R of the oversize reuse rule.
	maxNonSplitRounding int64
	divisions           [RoundupIntervals]int
	gcThreshold         float64
	expandable          bool
	// total is the device's total memory, read at New when expandable segments are on:
	// it sizes their address reservations.
	total int64
	// smallPage is the planned policy's page of the small pool (plannedSmallPage), set
	// when expandable segments are on.
	smallPage int64

	// plan is the planned policy's state, nil under PyTorch's policy (policy.go); set
	// by New.
	plan *planned

	mu sync.Mutex
	// ptrs maps the address of every allocated block to it. Guarded by mu.
	ptrs ptrMap
	// streams holds the pools of every stream seen, sorted by stream. Guarded by mu.
	streams []*streamState
	// lastStream is the streamState of the latest request. Guarded by mu.
	lastStream *streamState
	// segments lists every segment. Guarded by mu.
	segments []*segment
	// freeSearches counts free-block searches per pool while garbage collection is
	// armed (PyTorch's get_free_blocks_call_count). Guarded by mu.
	freeSearches [3]int64
	// totalAllocated is the device memory held (PyTorch's total_allocated_memory).
	// Guarded by mu.
	totalAllocated int64
	// fractionSet and allowed are the memory fraction's cap. Guarded by mu.
	fractionSet bool
	allowed     int64
	// stats are the statistics. Guarded by mu.
	stats Stats
	// events holds the pending frees and the event pool. Guarded by mu.
	events eventState
	// spareBlocks are released block structs kept for reuse. Guarded by mu.
	spareBlocks []*block
	// freeClock counts the blocks freed (block.freedAt). Guarded by mu.
	freeClock uint64
	// held are the extents a stitch unmapped in the books and keeps mapped to move
	// under the pages it maps; holding is true while it does (move.go). Guarded by mu.
	held    []heldExtent
	holding bool
	// pools are the private pools (NewPool) until released and empty; captures the
	// streams being captured into one, in the order captured. Guarded by mu.
	pools    []*Pool
	captures []capture
	// hist is the memory history, nil until RecordHistory. Guarded by mu.
	hist *history
	// histOn says whether calls capture their stack for the history; read before
	// taking mu, so that calls pay nothing else while it is off. Set under mu.
	histOn atomic.Bool
	// histTrace says whether Free and EmptyCache capture theirs too: only the trace
	// ring keeps the stacks of their events. Set under mu.
	histTrace atomic.Bool
}

// New returns a caching allocator over dev. cfg is checked as ParseConfig checks a
// string; expandable segments are turned off (see Config) when dev does not implement
// device.VirtualMemory or its granularity does not divide 2 MiB, and turned on where it
// does under PolicyPlanned, whose segments are always mapped page by page.
func New(dev device.Device, cfg Config) (*Allocator, error) {
	if dev == nil {
		return nil, errors.New("alloc.New: nil device")
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	a := &Allocator{
		dev:                 dev,
		cfg:                 cfg,
		maxSplit:            maxUnlimited,
		maxNonSplitRounding: LargeBuffer,
		divisions:           cfg.RoundupPower2Divisions,
		gcThreshold:         cfg.GarbageCollectionThreshold,
	}
	if cfg.MaxSplitSize != 0 {
		a.maxSplit = cfg.MaxSplitSize
	}
	if cfg.MaxNonSplitRounding != 0 {
		a.maxNonSplitRounding = cfg.MaxNonSplitRounding
	}
	a.stats.MaxSplitSize = -1
	if cfg.MaxSplitSize != 0 {
		a.stats.MaxSplitSize = cfg.MaxSplitSize
	}
	if cfg.ExpandableSegments || cfg.Policy == PolicyPlanned {
		a.cfg.ExpandableSegments = true
		vm, ok := dev.(device.VirtualMemory)
		if ok && vm.Granularity() > 0 && SmallBuffer%vm.Granularity() == 0 {
			_, total, err := dev.MemInfo()
			if err != nil {
				return nil, fmt.Errorf("alloc.New on %s: reading total memory for expandable segments: %w", dev.Name(), err)
			}
			a.vm, a.expandable, a.total = vm, true, total
			a.smallPage = plannedSmallPage(vm.Granularity())
		} else {
			a.cfg.ExpandableSegments = false
		}
	}
	if cfg.Policy == PolicyPlanned {
		a.plan = newPlanned(a)
	}
	if f := cfg.PerProcessMemoryFraction; f > 0 {
		if err := a.SetMemoryFraction(f); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// maxUnlimited is maxSplit when MaxSplitSize is unlimited.
const maxUnlimited = math.MaxInt64

// registry holds the allocator of each device For has seen (m, which ops read without a
// lock: an op on a device none of whose tensors it reads, a factory, asks every time),
// and the same allocators in the order they were made (order). The Mutex serializes
// making them and guards order; an allocator, once in m, stays.
var registry struct {
	sync.Mutex
	m     sync.Map // device.Device → *Allocator
	order []*Allocator
}

// For returns dev's allocator, creating it on first use with ConfigFromEnv. dev must be
// a comparable value (device implementations are pointers).
func For(dev device.Device) (*Allocator, error) {
	return forDevice("For", dev, func() (Config, error) {
		cfg, err := ConfigFromEnv()
		if err != nil {
			return cfg, fmt.Errorf("%s: %w", ConfigEnv, err)
		}
		return cfg, nil
	}, nil)
}

// ForConfig is For with a Go configuration instead of SUBLET_ALLOC_CONF. If dev already
// has its allocator and that was configured otherwise, it is an error: a device has
// one allocator.
func ForConfig(dev device.Device, cfg Config) (*Allocator, error) {
	return forDevice("ForConfig", dev, func() (Config, error) { return cfg, nil }, &cfg)
}

// forDevice returns dev's allocator, creating it with config() when there is none.
// want, when not nil, is the configuration an existing allocator must have.
func forDevice(op string, dev device.Device, config func() (Config, error), want *Config) (*Allocator, error) {
	if dev == nil {
		return nil, fmt.Errorf("alloc.%s: nil device", op)
	}
	if !reflect.TypeOf(dev).Comparable() {
		return nil, fmt.Errorf("alloc.%s: device type %T is not comparable; pass a pointer", op, dev)
	}
	if a, ok := registry.m.Load(dev); ok {
		return existing(op, a.(*Allocator), want)
	}
	registry.Lock()
	defer registry.Unlock()
	if a, ok := registry.m.Load(dev); ok { // made while this call waited for the lock
		return existing(op, a.(*Allocator), want)
	}
	cfg, err := config()
	if err != nil {
		return nil, fmt.Errorf("alloc.%s(%s): %w", op, dev.Name(), err)
	}
	a, err := New(dev, cfg)
	if err != nil {
		return nil, err
	}
	registry.m.Store(dev, a)
	registry.order = append(registry.order, a)
	return a, nil
}

// existing returns a, a device's allocator, for op, after checking that it has the
// configuration want asks for (nil: any).
func existing(op string, a *Allocator, want *Config) (*Allocator, error) {
	if want != nil {
		w := *want
		if !a.expandable || w.Policy == PolicyPlanned {
			w.ExpandableSegments = a.expandable // what the device and the policy make of it
		}
		if w != a.cfg {
			return nil, fmt.Errorf("alloc.%s(%s): the device's allocator already exists with config %+v; asked for %+v", op, a.dev.Name(), a.cfg, *want)
		}
	}
	return a, nil
}

// Device returns the allocator's device.
func (a *Allocator) Device() device.Device { return a.dev }

// Config returns the configuration in force (ExpandableSegments false when the device
// cannot support them).
func (a *Allocator) Config() Config { return a.cfg }

// RoundSize returns the block size a request of n bytes gets (n > 0).
func (a *Allocator) RoundSize(n int64) int64 { return roundSize(n, &a.divisions) }

// Alloc returns size bytes of device memory whose use is ordered on stream s. Size 0
// returns 0 and touches nothing. When no cached block fits and the device has no memory
// left even after the cache is released, the error is an *OOMError.
func (a *Allocator) Alloc(size int64, s device.Stream) (device.Ptr, error) {
	if a.histOn.Load() {
		return a.allocRecorded(size, s, Tag{})
	}
	return a.alloc(size, s, 0, nil)
}

// AllocTagged is Alloc with a tag that the memory history keeps with the block and its
// events (the op and scope that asked for it, and its lifetime, which the planned policy
// also places the block by); with history off the tag's Lifetime is all that counts.
func (a *Allocator) AllocTagged(size int64, s device.Stream, tag Tag) (device.Ptr, error) {
	if a.histOn.Load() {
		return a.allocRecorded(size, s, tag)
	}
	return a.alloc(size, s, tag.Lifetime, nil)
}

// allocRecorded is Alloc capturing its caller's stack for the history.
//
//go:noinline
func (a *Allocator) allocRecorded(size int64, s device.Stream, tag Tag) (device.Ptr, error) {
	var c callSite
	return a.alloc(size, s, tag.Lifetime, c.capture(2, tag))
}

func (a *Allocator) alloc(size int64, s device.Stream, lt Lifetime, c *callSite) (device.Ptr, error) {
	if size <= 0 {
		if size == 0 {
			return 0, nil
		}
		return 0, fmt.Errorf("alloc: Alloc(%d) on %s: negative size", size, a.dev.Name())
	}
	if size >= MaxRequest {
		return 0, &OOMError{Device: a.dev.Name(), Requested: size, Stream: s,
			Hint: "the request is larger than any device; check the size computation"}
	}
	a.mu.Lock()
	if a.hist != nil {
		a.beginCall(c)
	}
	if len(a.captures) == 0 && (a.events.pending > 0 || len(a.events.deferred) > 0) {
		err := a.insertDeferredEvents()
		if err == nil {
			err = a.processEvents()
		}
		if err != nil {
			a.mu.Unlock()
			return 0, fmt.Errorf("alloc: Alloc(%d) on %s: %w", size, a.dev.Name(), err)
		}
	}
	r := request{size: size, rounded: roundSize(size, &a.divisions), ss: a.requestState(s), lifetime: lt}
	r.kind = kindOf(r.rounded)
	var b *block
	var err error
	if a.plan != nil {
		b, err = a.plan.malloc(&r)
	} else {
		b, err = a.cachingMalloc(&r)
	}
	if err != nil {
		a.mu.Unlock()
		return 0, err
	}
	a.ptrs.put(b.addr, b)
	if a.hist != nil {
		a.recordAlloc(b, s)
	}
	a.mu.Unlock()
	return b.addr, nil
}

// Free returns an allocation to the cache. If RecordStream named other streams, the
// block is reused only once the work queued on them so far has completed. Freeing 0
// does nothing; anything else that is not a live allocation of this allocator is an
// error. If the device can neither record an event on such a stream nor synchronize
// it, Free fails and the allocation stays live.
func (a *Allocator) Free(p device.Ptr) error {
	if p == 0 {
		return nil
	}
	if a.histTrace.Load() {
		return a.freeRecorded(p)
	}
	return a.free(p, nil)
}

// freeRecorded is Free capturing its caller's stack for the history.
//
//go:noinline
func (a *Allocator) freeRecorded(p device.Ptr) error {
	var c callSite
	return a.free(p, c.capture(2, Tag{}))
}

func (a *Allocator) free(p device.Ptr, c *callSite) error {
	a.mu.Lock()
	if a.hist != nil {
		a.beginCall(c)
	}
	b := a.ptrs.remove(p)
	if b == nil {
		a.mu.Unlock()
		return fmt.Errorf("alloc: Free(%#x) on %s: not a live allocation of this allocator (never allocated, already freed, or from another allocator)", uintptr(p), a.dev.Name())
	}
	var err error
	if a.plan != nil {
		err = a.plan.free(b)
	} else {
		err = a.cachingFree(b)
	}
	a.mu.Unlock()
	return err
}

// cachingFree is PyTorch's free of allocated block b, already out of the pointer map:
// if other streams used it, it waits for their events (or for the end of the captures);
// otherwise it merges with its free neighbours and goes back to its pool. If an event
// can be neither recorded nor replaced by a synchronization, b stays allocated.
func (a *Allocator) cachingFree(b *block) error {
	var evs []streamEvent
	capturing := len(a.captures) > 0
	if len(b.streamUses) > 0 && !capturing {
		var err error
		if evs, err = a.recordUses(b); err != nil {
			a.ptrs.put(b.addr, b)
			return fmt.Errorf("alloc: Free(%#x) on %s: the allocation stays live: %w", uintptr(b.addr), a.dev.Name(), err)
		}
	}
	a.countFree(b)
	switch {
	case len(b.streamUses) > 0 && capturing:
		a.deferUntilNoCapture(b)
	case len(b.streamUses) > 0:
		a.deferFree(b, evs)
	default:
		a.freeBlock(b)
	}
	return nil
}

// countFree marks b, being freed, no longer allocated: the allocation and its bytes
// stop counting at once, even while the block waits for stream events.
func (a *Allocator) countFree(b *block) {
	b.allocated = false
	if a.hist != nil {
		a.recordFree(ActionFreeRequested, b)
	}
	k := b.kind()
	a.stats.Allocation.decrease(k, 1)
	a.stats.AllocatedBytes.decrease(k, b.size)
	if b.size >= a.maxSplit {
		a.stats.OversizeAllocations.decrease(1)
	}
}

// streamState returns the pools of stream s, creating them on first use.
func (a *Allocator) streamState(s device.Stream) *streamState {
	if ss := a.lastStream; ss != nil && ss.stream == s {
		return ss
	}
	a.lastStream = a.stateOf(s, false)
	return a.lastStream
}

// stateOf returns the default pools of stream s, or (longLived) the planned policy's
// pools for its long-lived allocations, creating them on first use. a.streams is sorted
// by stream, the default pools of a stream first.
func (a *Allocator) stateOf(s device.Stream, longLived bool) *streamState {
	i := 0
	for i < len(a.streams) && (a.streams[i].stream < s || a.streams[i].stream == s && !a.streams[i].longLived && longLived) {
		i++
	}
	if i == len(a.streams) || a.streams[i].stream != s || a.streams[i].longLived != longLived {
		a.streams = append(a.streams, nil)
		copy(a.streams[i+1:], a.streams[i:])
		a.streams[i] = &streamState{stream: s, longLived: longLived}
	}
	return a.streams[i]
}

// SetMemoryFraction caps the memory the allocator may hold at f × the device's total
// memory (torch.cuda.set_per_process_memory_fraction): a new segment that would take
// reserved memory over the cap fails as out of memory without asking the device. It
// also arms GarbageCollectionThreshold. f must be in [0, 1].
func (a *Allocator) SetMemoryFraction(f float64) error {
	if !(f >= 0 && f <= 1) {
		return fmt.Errorf("alloc: SetMemoryFraction(%v) on %s: the fraction must be in [0, 1]", f, a.dev.Name())
	}
	_, total, err := a.dev.MemInfo()
	if err != nil {
		return fmt.Errorf("alloc: SetMemoryFraction(%v) on %s: %w", f, a.dev.Name(), err)
	}
	a.mu.Lock()
	a.allowed = int64(f * float64(total))
	a.fractionSet = true
	a.mu.Unlock()
	return nil
}

// Stats returns a copy of the statistics.
func (a *Allocator) Stats() Stats {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stats
}

// StatsMap returns the statistics under PyTorch 2.11's memory_stats() keys.
func (a *Allocator) StatsMap() map[string]int64 {
	st := a.Stats()
	return st.Map()
}

// ResetPeakStats sets every peak to the current value (reset_peak_memory_stats).
func (a *Allocator) ResetPeakStats() {
	a.mu.Lock()
	a.stats.resetPeak()
	a.mu.Unlock()
}

// ResetAccumulatedStats zeroes the cumulative allocated/freed values and the counters
// num_alloc_retries, num_ooms, num_sync_all_streams, num_device_alloc and
// num_device_free (reset_accumulated_memory_stats).
func (a *Allocator) ResetAccumulatedStats() {
	a.mu.Lock()
	a.stats.resetAccumulated()
	a.mu.Unlock()
}
