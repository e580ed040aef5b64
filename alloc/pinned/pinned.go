// Package pinned is a caching allocator for page-locked host memory, the staging memory
// of asynchronous host↔device copies, after PyTorch's CachingHostAllocator
// (docs/allocator.md, "The host (pinned) allocator").
//
//	h, err := pinned.New(dev)      // pinned_* settings from SUBLET_ALLOC_CONF
//	buf, err := h.Alloc(1 << 20)   // a []byte outside the Go heap, page-locked on a GPU
//	// ... copy into buf, start the host-to-device copy on stream 0 ...
//	err = h.RecordEvent(buf, 0)    // buf is not reused before the copy has completed
//	err = h.Free(buf)              // cached for the next request of its size
//	defer h.Close()                // everything goes back to the system
//
// Package data's Loader uses one for its batches (data.Config.Pinned).
//
// Memory comes from the device's cuMemHostAlloc (device.PinnedHost) when it offers one;
// with pinned_use_cuda_host_register, from anonymous mmap that the device page-locks in
// place (device.HostRegisterer); otherwise from anonymous mmap (internal/hostmem), which
// is ordinary pageable memory with the same API: Pinned tells which. Either way it is
// outside the Go heap and the slices handed out alias it.
//
// Invariants:
//   - Every request is rounded up (roundSize) and served whole by one block: no
//     splitting, no coalescing. Cached free blocks wait in 64 buckets, one per power of
//     two their size rounds up to, each under its own mutex.
//   - A block is in exactly one of three states: in use (handed out by Alloc), parked
//     (freed while streams recorded by RecordEvent may still read or write it: one event
//     per stream was recorded at Free, and the block waits until all have completed),
//     or cached (in its bucket). Alloc first retires parked blocks whose events have
//     completed (or, with pinned_use_background_threads, a goroutine does that every
//     100 µs), so a block is never reused before the copies that used it are done.
//   - Memory goes back to the system in EmptyCache and Close, only from cached blocks,
//     and when a block larger than MaxCachedSize is retired. Blocks carved from the
//     reserve segment never go back on their own: the segment goes back whole, at Close.
//   - Stats are exact (atomic counters, peaks included) and use the names of PyTorch's
//     torch.cuda.host_memory_stats(); see Stats.
//
// Settings are the pinned_* keys of SUBLET_ALLOC_CONF, which New reads, or an
// alloc.PinnedConfig given to NewConfig. Each is applied, as PyTorch does except where
// said, or refused by New with an error naming it; none is ignored:
//   - pinned_max_round_threshold_mb (MaxRoundThreshold): requests larger than it are
//     rounded up to whole pages instead of a power of two. Their blocks share the
//     buckets, so a request takes the smallest cached block of its bucket that holds
//     it.
//   - pinned_max_cached_size_mb (MaxCachedSize): a block larger than it is not cached;
//     it goes back to the system when freed, or once its events have completed.
//   - pinned_use_background_threads (UseBackgroundThreads): one goroutine per allocator,
//     started by New, processes events every 100 µs and Alloc no longer does; an error
//     it meets is returned by the next Alloc (or Close). Close stops it and waits for it,
//     so an allocator with it must be closed. EmptyCache still processes events itself.
//   - pinned_reserve_segment_size_mb (ReserveSegmentSize): New takes one segment of that
//     size from the system; new blocks are carved from it one after another while it has
//     room, as in PyTorch (blocks larger than MaxCachedSize excepted). The segment counts
//     as one allocation in Stats, carved blocks as none. EmptyCache drops the carved
//     blocks and carves the segment from its beginning again once all of them are cached
//     (PyTorch keeps them for good); Close returns the segment.
//   - pinned_use_cuda_host_register (UseHostRegister): blocks are anonymous mmap whose
//     pages are faulted in (one byte written per page) and which is then registered with
//     the device (cuMemHostRegister), unregistered and unmapped when it goes back. New
//     refuses it on a device that does not implement device.HostRegisterer (cpu, sim).
//   - pinned_num_register_threads (NumRegisterThreads): that many goroutines fault in a
//     new block's pages, each its share, as PyTorch's threads do; one when the block has
//     less than a page per goroutine. New refuses it without UseHostRegister, where it
//     would do nothing.
//   - pinned_free_catch_all: refused; what it does in PyTorch is not established.
package pinned

import (
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/internal/hostmem"
)

// numBuckets is one bucket per power of two a request can round up to.
const numBuckets = 64

// block is one host allocation from the source.
type block struct {
	// mem is what the source returned (freed whole), or the piece carved from the
	// reserve segment; size is the rounded request the block serves (roundSize), at
	// most len(mem). Both immutable.
	mem  []byte
	size int64
	// bucket is ceil(log2(size)). Immutable.
	bucket int

	// carved is set for a block carved from the reserve segment, which is never returned
	// to the system on its own. Immutable.
	carved bool

	mu sync.Mutex
	// Guarded by mu.
	inUse   bool
	streams []device.Stream // streams recorded by RecordEvent since Alloc
	events  int             // events recorded at Free not yet seen complete
}

// bucket is the cached free blocks whose size rounds up to one power of two.
type bucket struct {
	mu   sync.Mutex
	free []*block // guarded by mu
}

// take removes and returns the cached block that best fits size bytes (the smallest of
// at least size), or nil. Below MaxRoundThreshold every block of a bucket has the same
// size, so the last one fits exactly and the scan stops there.
func (bk *bucket) take(size int64) *block {
	bk.mu.Lock()
	defer bk.mu.Unlock()
	best := -1
	for i := len(bk.free) - 1; i >= 0; i-- {
		s := bk.free[i].size
		if s == size {
			best = i
			break
		}
		if s > size && (best < 0 || s < bk.free[best].size) {
			best = i
		}
	}
	if best < 0 {
		return nil
	}
	b := bk.free[best]
	last := len(bk.free) - 1
	bk.free[best] = bk.free[last]
	bk.free[last] = nil
	bk.free = bk.free[:last]
	return b
}

// pendingEvent is an event recorded at Free on a stream that used b.
type pendingEvent struct {
	e device.Event
	b *block
}

// Allocator is a caching allocator of host memory for one device. Its methods are safe
// for concurrent use.
type Allocator struct {
	dev device.Device
	src source             // immutable
	cfg alloc.PinnedConfig // immutable

	buckets [numBuckets]bucket

	blocksMu sync.Mutex
	// blocks is every block, in use, parked or cached, by base address. Guarded by
	// blocksMu, the innermost lock: only reserve.mu is ever held while taking it.
	blocks map[uintptr]*block

	// reserve is the segment of ReserveSegmentSize, if any.
	reserve reserve

	// processMu lets one goroutine at a time drain completed events (Alloc and the
	// background goroutine TryLock it: the others skip, the drainer does their work;
	// EmptyCache waits for it); it is the only remover from pending.
	processMu sync.Mutex
	eventsMu  sync.Mutex
	// Guarded by eventsMu: pending in record order, and idle events for reuse.
	pending []pendingEvent
	idle    []device.Event
	// parked is len(pending), readable without eventsMu, so that Alloc skips event
	// processing (and its locks) when nothing is parked: the common case.
	parked atomic.Int64

	// polling is set while the background goroutine (UseBackgroundThreads) processes
	// events instead of Alloc; pollErr holds the first error it met that no call has
	// reported yet.
	polling atomic.Bool
	pollErr atomic.Pointer[error]
	// closed is set by a Close that got past its checks; Alloc refuses from then on.
	closed atomic.Bool
	// closeMu serializes Close.
	closeMu sync.Mutex
	// poller is the background goroutine, nil without one or once stopped. Set by New,
	// then guarded by closeMu.
	poller *poller

	stats counters
}

// New returns an allocator of host memory for copies to and from dev, page-locked when
// dev implements device.PinnedHost, configured by the pinned_* keys of SUBLET_ALLOC_CONF
// (alloc.ConfigFromEnv), read now. See NewConfig.
func New(dev device.Device) (*Allocator, error) {
	cfg, err := alloc.ConfigFromEnv()
	if err != nil {
		return nil, fmt.Errorf("pinned.New: %s: %w", alloc.ConfigEnv, err)
	}
	return newAllocator("pinned.New", dev, cfg.Pinned, pollInterval)
}

// NewConfig is New with a Go configuration instead of SUBLET_ALLOC_CONF. A setting it
// cannot apply on dev is an error naming the key, never ignored.
func NewConfig(dev device.Device, cfg alloc.PinnedConfig) (*Allocator, error) {
	return newAllocator("pinned.NewConfig", dev, cfg, pollInterval)
}

// newAllocator is New and NewConfig; the background goroutine, if any, processes events
// every pollEvery.
func newAllocator(op string, dev device.Device, cfg alloc.PinnedConfig, pollEvery time.Duration) (*Allocator, error) {
	if dev == nil {
		return nil, fmt.Errorf("%s: nil device", op)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if err := refuse(op, dev, cfg); err != nil {
		return nil, err
	}
	a := &Allocator{dev: dev, src: mmapSource{}, cfg: cfg, blocks: make(map[uintptr]*block)}
	if p, ok := dev.(device.PinnedHost); ok {
		a.src = pinnedSource{p}
	}
	if cfg.UseHostRegister {
		a.src = registerSource{dev: dev.(device.HostRegisterer), threads: max(cfg.NumRegisterThreads, 1)}
	}
	if cfg.ReserveSegmentSize > 0 {
		if err := a.takeReserve(cfg.ReserveSegmentSize); err != nil {
			return nil, fmt.Errorf("%s on %s: pinned_reserve_segment_size_mb (PinnedConfig.ReserveSegmentSize): taking the %d-byte segment: %w", op, dev.Name(), cfg.ReserveSegmentSize, err)
		}
	}
	if cfg.UseBackgroundThreads {
		a.startPolling(pollEvery)
	}
	return a, nil
}

// refuse reports the first setting of cfg that cannot be applied on dev.
func refuse(op string, dev device.Device, cfg alloc.PinnedConfig) error {
	unsupported := func(key, field, why string) error {
		return fmt.Errorf("%s on %s: %s (PinnedConfig.%s) is set, but %s; unset it", op, dev.Name(), key, field, why)
	}
	if cfg.FreeCatchAll {
		return unsupported("pinned_free_catch_all", "FreeCatchAll", "what it does in PyTorch is not established (docs/allocator.md), so sublet does not implement a guess")
	}
	if _, ok := dev.(device.HostRegisterer); cfg.UseHostRegister && !ok {
		return unsupported("pinned_use_cuda_host_register", "UseHostRegister", dev.Name()+" cannot page-lock ordinary host memory (it does not implement device.HostRegisterer; CUDA devices do)")
	}
	if cfg.NumRegisterThreads != 0 && !cfg.UseHostRegister {
		return unsupported("pinned_num_register_threads", "NumRegisterThreads", "register threads only pre-fault memory for pinned_use_cuda_host_register:True, which is not set")
	}
	return nil
}

// Config returns the settings the allocator applies.
func (a *Allocator) Config() alloc.PinnedConfig { return a.cfg }

// Pinned reports whether the memory is page-locked (from the device's HostAlloc, or
// registered with pinned_use_cuda_host_register) rather than ordinary pageable memory.
func (a *Allocator) Pinned() bool {
	_, pageable := a.src.(mmapSource)
	return !pageable
}

// Device returns the device the allocator serves.
func (a *Allocator) Device() device.Device { return a.dev }

// Alloc returns size bytes of host memory (nil for size 0), from the cached block of its
// bucket that best fits the rounded size (roundSize) when there is one, else from a new
// block. A lack of memory, after the cache has been released and the request retried,
// is an error wrapping device.ErrOutOfMemory.
func (a *Allocator) Alloc(size int64) ([]byte, error) {
	if size < 0 || size > 1<<62 {
		return nil, fmt.Errorf("pinned: Alloc(%d): size out of range", size)
	}
	if size == 0 {
		return nil, nil
	}
	if a.closed.Load() {
		return nil, fmt.Errorf("pinned: Alloc(%d) on %s after Close", size, a.dev.Name())
	}
	if a.polling.Load() {
		if err := a.takePollErr(); err != nil {
			return nil, err
		}
	} else if err := a.processEvents(false); err != nil {
		return nil, err
	}
	rounded := a.roundSize(size)
	b := a.buckets[bucketOf(rounded)].take(rounded)
	if b == nil {
		var err error
		if b, err = a.newBlock(rounded); err != nil {
			return nil, err
		}
	}
	b.mu.Lock()
	b.inUse = true
	b.mu.Unlock()
	a.stats.activeRequests.increase(1)
	a.stats.activeBytes.increase(b.size)
	return b.mem[:size:size], nil
}

// roundSize is the size of the block that serves a request of size bytes: the next
// power of two, or above MaxRoundThreshold (when set) the next whole page, so that a
// large buffer does not cost up to twice its size.
func (a *Allocator) roundSize(size int64) int64 {
	if t := a.cfg.MaxRoundThreshold; t > 0 && size > t {
		return hostmem.RoundUp(size, hostmem.PageSize())
	}
	return 1 << bits.Len64(uint64(size-1))
}

// bucketOf is the bucket of blocks of size bytes: ceil(log2(size)).
func bucketOf(size int64) int { return bits.Len64(uint64(size - 1)) }

// cacheable reports whether a free block of size bytes may wait in the cache:
// MaxCachedSize (when set) sends larger ones back to the system.
func (a *Allocator) cacheable(size int64) bool {
	return a.cfg.MaxCachedSize == 0 || size <= a.cfg.MaxCachedSize
}

// newBlock makes a block of size bytes, releasing the cache and trying once more when
// there is no memory for it.
func (a *Allocator) newBlock(size int64) (*block, error) {
	b, err := a.fresh(size)
	if errors.Is(err, device.ErrOutOfMemory) {
		if err := a.EmptyCache(); err != nil {
			return nil, err
		}
		b, err = a.fresh(size)
	}
	if err != nil {
		return nil, fmt.Errorf("pinned: Alloc of a %d-byte block on %s: %w", size, a.dev.Name(), err)
	}
	a.blocksMu.Lock()
	a.blocks[base(b.mem)] = b
	a.blocksMu.Unlock()
	return b, nil
}

// fresh is a block of size bytes carved from the reserve segment when it has room and
// the block may be cached (the segment cannot return one block to the system), else
// taken from the source.
func (a *Allocator) fresh(size int64) (*block, error) {
	if a.cacheable(size) {
		if mem := a.reserve.carve(size); mem != nil {
			return &block{mem: mem, size: size, bucket: bucketOf(size), carved: true}, nil
		}
	}
	mem, err := a.src.alloc(size)
	if err != nil {
		return nil, err
	}
	a.countHostAlloc(size)
	return &block{mem: mem, size: size, bucket: bucketOf(size)}, nil
}

// countHostAlloc and countHostFree count size bytes taken from and returned to the
// system.
func (a *Allocator) countHostAlloc(size int64) {
	a.stats.numHostAlloc.Add(1)
	a.stats.allocations.increase(1)
	a.stats.allocatedBytes.increase(size)
}

func (a *Allocator) countHostFree(size int64) {
	a.stats.numHostFree.Add(1)
	a.stats.allocations.decrease(1)
	a.stats.allocatedBytes.decrease(size)
}

// lookup returns the block b was cut from (b must start where the block starts).
func (a *Allocator) lookup(op string, b []byte) (*block, error) {
	a.blocksMu.Lock()
	blk := a.blocks[base(b)]
	a.blocksMu.Unlock()
	if blk == nil || int64(len(b)) > blk.size {
		return nil, fmt.Errorf("pinned: %s(%#x, %d bytes): not memory from this allocator's Alloc", op, base(b), len(b))
	}
	return blk, nil
}

// RecordEvent notes that stream s uses b (memory from Alloc, in use), so that Free keeps
// the block from reuse until the work ordered on s so far has completed. Call it after
// ordering an asynchronous copy from or to b on s.
func (a *Allocator) RecordEvent(b []byte, s device.Stream) error {
	blk, err := a.lookup("RecordEvent", b)
	if err != nil {
		return err
	}
	blk.mu.Lock()
	defer blk.mu.Unlock()
	if !blk.inUse {
		return fmt.Errorf("pinned: RecordEvent(%#x, stream %#x): the block is not in use (freed already)", base(b), uintptr(s))
	}
	if !slices.Contains(blk.streams, s) {
		blk.streams = append(blk.streams, s)
	}
	return nil
}

// Free gives back memory from Alloc (Free of nil does nothing). Without recorded streams
// the block is retired at once; otherwise an event is recorded on each stream and the
// block is parked until they have all completed. Retiring caches the block, or returns
// it to the system when it is larger than MaxCachedSize.
func (a *Allocator) Free(b []byte) error {
	if b == nil {
		return nil
	}
	blk, err := a.lookup("Free", b)
	if err != nil {
		return err
	}
	blk.mu.Lock()
	if !blk.inUse {
		blk.mu.Unlock()
		return fmt.Errorf("pinned: Free(%#x): the block is not in use (freed twice?)", base(b))
	}
	blk.inUse = false
	streams := blk.streams
	blk.streams = nil
	blk.events = len(streams)
	blk.mu.Unlock()
	a.stats.activeRequests.decrease(1)
	a.stats.activeBytes.decrease(blk.size)
	if len(streams) == 0 {
		return a.retire(blk)
	}
	return a.park(blk, streams)
}

// park records one event per stream and queues them; a stream whose event cannot be
// recorded is waited for instead, so the block still cannot be reused too early.
func (a *Allocator) park(blk *block, streams []device.Stream) error {
	var errs []error
	recorded := make([]pendingEvent, 0, len(streams))
	for _, s := range streams {
		e, err := a.recordOn(s)
		if err != nil {
			errs = append(errs, err)
			if err := a.dev.SynchronizeStream(s); err != nil {
				errs = append(errs, fmt.Errorf("pinned: Free: waiting for stream %#x instead: %w", uintptr(s), err))
			}
			continue
		}
		recorded = append(recorded, pendingEvent{e, blk})
	}
	if len(recorded) < len(streams) {
		blk.mu.Lock()
		blk.events = len(recorded)
		blk.mu.Unlock()
	}
	if len(recorded) == 0 {
		errs = append(errs, a.retire(blk))
	} else {
		a.eventsMu.Lock()
		a.pending = append(a.pending, recorded...)
		a.parked.Store(int64(len(a.pending)))
		a.eventsMu.Unlock()
	}
	return errors.Join(errs...)
}

// recordOn records an idle (or new) event on s.
func (a *Allocator) recordOn(s device.Stream) (device.Event, error) {
	a.eventsMu.Lock()
	var e device.Event
	if n := len(a.idle); n > 0 {
		e = a.idle[n-1]
		a.idle = a.idle[:n-1]
	}
	a.eventsMu.Unlock()
	if e == 0 {
		var err error
		if e, err = a.dev.NewEvent(); err != nil {
			return 0, fmt.Errorf("pinned: Free: creating an event: %w", err)
		}
	}
	if err := a.dev.RecordEvent(e, s); err != nil {
		a.eventsMu.Lock()
		a.idle = append(a.idle, e)
		a.eventsMu.Unlock()
		return 0, fmt.Errorf("pinned: Free: recording an event on stream %#x: %w", uintptr(s), err)
	}
	return e, nil
}

// cache puts a free block into its bucket.
func (a *Allocator) cache(b *block) {
	bk := &a.buckets[b.bucket]
	bk.mu.Lock()
	bk.free = append(bk.free, b)
	bk.mu.Unlock()
}

// retire caches a free block whose streams are done, or releases it when it is too large
// to cache.
func (a *Allocator) retire(b *block) error {
	if a.cacheable(b.size) {
		a.cache(b)
		return nil
	}
	return a.release("Free", b)
}

// release returns a free block to the system. A block the system does not take back is
// cached instead, still counted and usable, and the error says so.
func (a *Allocator) release(op string, b *block) error {
	// Forget the address before the system may hand it out again.
	a.blocksMu.Lock()
	delete(a.blocks, base(b.mem))
	a.blocksMu.Unlock()
	if err := a.src.free(b.mem); err != nil {
		a.blocksMu.Lock()
		a.blocks[base(b.mem)] = b
		a.blocksMu.Unlock()
		a.cache(b)
		return fmt.Errorf("pinned: %s: returning a %d-byte block to the system (it stays cached): %w", op, b.size, err)
	}
	a.countHostFree(b.size)
	return nil
}

// processEvents retires the parked blocks whose events have completed, in record order,
// stopping at the first event still pending (as PyTorch does). If another goroutine is
// already at it, it returns at once, unless wait is set: then it waits its turn, so that
// it returns only once every event that had completed at the call has been processed.
func (a *Allocator) processEvents(wait bool) error {
	if a.parked.Load() == 0 {
		return nil
	}
	if wait {
		a.processMu.Lock()
	} else if !a.processMu.TryLock() {
		return nil
	}
	defer a.processMu.Unlock()
	var errs []error
	for {
		a.eventsMu.Lock()
		if len(a.pending) == 0 {
			a.eventsMu.Unlock()
			return errors.Join(errs...)
		}
		p := a.pending[0]
		a.eventsMu.Unlock()
		done, err := a.dev.QueryEvent(p.e)
		if err != nil {
			return errors.Join(append(errs, fmt.Errorf("pinned: querying the event of a parked block: %w", err))...)
		}
		if !done {
			return errors.Join(errs...)
		}
		a.eventsMu.Lock()
		a.pending[0] = pendingEvent{}
		a.pending = a.pending[1:]
		a.parked.Store(int64(len(a.pending)))
		a.idle = append(a.idle, p.e)
		a.eventsMu.Unlock()
		p.b.mu.Lock()
		p.b.events--
		ready := p.b.events == 0
		p.b.mu.Unlock()
		if ready {
			errs = append(errs, a.retire(p.b))
		}
	}
}

// EmptyCache returns every cached block to the system, after retiring the parked blocks
// whose events have completed. Blocks in use and blocks still parked stay. Blocks carved
// from the reserve segment are dropped, and the segment carved from its beginning again,
// when all of them are cached; otherwise they stay cached. The segment itself stays.
func (a *Allocator) EmptyCache() error {
	if err := a.processEvents(true); err != nil {
		return err
	}
	var errs []error
	var carved []*block
	for i := range a.buckets {
		bk := &a.buckets[i]
		bk.mu.Lock()
		free := bk.free
		bk.free = nil
		bk.mu.Unlock()
		for _, b := range free {
			if b.carved {
				carved = append(carved, b)
				continue
			}
			errs = append(errs, a.release("EmptyCache", b))
		}
	}
	if len(carved) > 0 && !a.rewind(carved) {
		for _, b := range carved {
			a.cache(b)
		}
	}
	return errors.Join(errs...)
}

// Close releases the cache and the allocator's events, and stops its background
// goroutine; the allocator cannot be used afterwards. It refuses while blocks are in use
// or parked, which would otherwise be lost, and then leaves everything as it was.
func (a *Allocator) Close() error {
	a.closeMu.Lock()
	defer a.closeMu.Unlock()
	if a.closed.Load() {
		return fmt.Errorf("pinned: Close on %s called twice", a.dev.Name())
	}
	if err := a.EmptyCache(); err != nil {
		return err
	}
	a.blocksMu.Lock()
	left := len(a.blocks)
	a.blocksMu.Unlock()
	if left > 0 {
		return fmt.Errorf("pinned: Close on %s with %d block(s) in use or waiting for their streams; free them and let the streams finish first", a.dev.Name(), left)
	}
	a.closed.Store(true)
	a.stopPolling()
	errs := []error{a.takePollErr(), a.releaseReserve()}
	a.eventsMu.Lock()
	idle := a.idle
	a.idle = nil
	a.eventsMu.Unlock()
	for _, e := range idle {
		if err := a.dev.DestroyEvent(e); err != nil {
			errs = append(errs, fmt.Errorf("pinned: Close: %w", err))
		}
	}
	return errors.Join(errs...)
}

// base is the address of b's first byte; blocks are outside the Go heap, so it never
// moves.
func base(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
