// Package pinned is a caching allocator for page-locked host memory, the staging memory
// of asynchronous host↔device copies, after PyTorch's CachingHostAllocator
// (spec/allocator.md §1.19).
//
// Memory comes from the device's cuMemHostAlloc (device.PinnedHost) when it offers one;
// otherwise from anonymous mmap (internal/hostmem), which is ordinary pageable memory
// with the same API: Pinned tells which. Either way it is outside the Go heap and the
// slices handed out alias it.
//
// Invariants:
//   - Every request is rounded up to a power of two and served whole by one block: no
//     splitting, no coalescing. Cached free blocks wait in 64 buckets, one per power of
//     two, each under its own mutex.
//   - A block is in exactly one of three states: in use (handed out by Alloc), parked
//     (freed while streams recorded by RecordEvent may still read or write it: one event
//     per stream was recorded at Free, and the block waits until all have completed),
//     or cached (in its bucket). Alloc first returns parked blocks whose events have
//     completed to their buckets, so a block is never reused before the copies that
//     used it are done.
//   - Memory goes back to the system only in EmptyCache and Close, and only from cached
//     blocks.
//   - Stats are exact (atomic counters, peaks included) and use the names of PyTorch's
//     torch.cuda.host_memory_stats(); see Stats.
package pinned

import (
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/internal/hostmem"
)

// numBuckets is one bucket per power of two a request can round up to.
const numBuckets = 64

// block is one host allocation from the source.
type block struct {
	// mem is what the source returned (freed whole); size is the power of two the block
	// serves, at most len(mem). Both immutable.
	mem  []byte
	size int64
	// bucket is log2(size). Immutable.
	bucket int

	mu sync.Mutex
	// Guarded by mu.
	inUse   bool
	streams []device.Stream // streams recorded by RecordEvent since Alloc
	events  int             // events recorded at Free not yet seen complete
}

// bucket is the cached free blocks of one size.
type bucket struct {
	mu   sync.Mutex
	free []*block // guarded by mu
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
	src source // immutable

	buckets [numBuckets]bucket

	blocksMu sync.Mutex
	// blocks is every block, in use, parked or cached, by base address. Guarded by
	// blocksMu, which is never held together with another lock.
	blocks map[uintptr]*block

	// processMu lets one goroutine at a time drain completed events (TryLock: the others
	// skip, the drainer does their work); it is the only remover from pending.
	processMu sync.Mutex
	eventsMu  sync.Mutex
	// Guarded by eventsMu: pending in record order, and idle events for reuse.
	pending []pendingEvent
	idle    []device.Event
	// parked is len(pending), readable without eventsMu, so that Alloc skips event
	// processing (and its locks) when nothing is parked: the common case.
	parked atomic.Int64

	stats counters
}

// New returns an allocator of host memory for copies to and from dev, page-locked when
// dev implements device.PinnedHost.
func New(dev device.Device) (*Allocator, error) {
	if dev == nil {
		return nil, errors.New("pinned.New: nil device")
	}
	a := &Allocator{dev: dev, src: mmapSource{}, blocks: make(map[uintptr]*block)}
	if p, ok := dev.(device.PinnedHost); ok {
		a.src = pinnedSource{p}
	}
	return a, nil
}

// Pinned reports whether the memory is page-locked (from the device's HostAlloc) rather
// than ordinary pageable memory.
func (a *Allocator) Pinned() bool {
	_, ok := a.src.(pinnedSource)
	return ok
}

// Device returns the device the allocator serves.
func (a *Allocator) Device() device.Device { return a.dev }

// Alloc returns size bytes of host memory (nil for size 0), from a cached block of the
// same power of two when one is free, else from a new block. A lack of memory, after the
// cache has been released and the request retried, is an error wrapping
// device.ErrOutOfMemory.
func (a *Allocator) Alloc(size int64) ([]byte, error) {
	if size < 0 || size > 1<<62 {
		return nil, fmt.Errorf("pinned: Alloc(%d): size out of range", size)
	}
	if size == 0 {
		return nil, nil
	}
	if err := a.processEvents(); err != nil {
		return nil, err
	}
	idx := bits.Len64(uint64(size - 1))
	bk := &a.buckets[idx]
	bk.mu.Lock()
	var b *block
	if n := len(bk.free); n > 0 {
		b = bk.free[n-1]
		bk.free = bk.free[:n-1]
	}
	bk.mu.Unlock()
	if b == nil {
		var err error
		if b, err = a.newBlock(idx); err != nil {
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

// newBlock gets a block of 1<<idx bytes from the source, releasing the cache and trying
// once more when the source is out of memory.
func (a *Allocator) newBlock(idx int) (*block, error) {
	size := int64(1) << idx
	mem, err := a.src.alloc(size)
	if errors.Is(err, device.ErrOutOfMemory) {
		if err := a.EmptyCache(); err != nil {
			return nil, err
		}
		mem, err = a.src.alloc(size)
	}
	if err != nil {
		return nil, fmt.Errorf("pinned: Alloc of a %d-byte block on %s: %w", size, a.dev.Name(), err)
	}
	b := &block{mem: mem, size: size, bucket: idx}
	a.blocksMu.Lock()
	a.blocks[base(mem)] = b
	a.blocksMu.Unlock()
	a.stats.numHostAlloc.Add(1)
	a.stats.allocations.increase(1)
	a.stats.allocatedBytes.increase(size)
	return b, nil
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
// the block is cached at once; otherwise an event is recorded on each stream and the
// block is parked until they have all completed.
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
		a.cache(blk)
		return nil
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
		a.cache(blk)
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

// cache puts a free block whose streams are done into its bucket.
func (a *Allocator) cache(b *block) {
	bk := &a.buckets[b.bucket]
	bk.mu.Lock()
	bk.free = append(bk.free, b)
	bk.mu.Unlock()
}

// processEvents caches the parked blocks whose events have completed, in record order,
// stopping at the first event still pending (as PyTorch does). If another goroutine is
// already at it, it returns at once.
func (a *Allocator) processEvents() error {
	if a.parked.Load() == 0 || !a.processMu.TryLock() {
		return nil
	}
	defer a.processMu.Unlock()
	for {
		a.eventsMu.Lock()
		if len(a.pending) == 0 {
			a.eventsMu.Unlock()
			return nil
		}
		p := a.pending[0]
		a.eventsMu.Unlock()
		done, err := a.dev.QueryEvent(p.e)
		if err != nil {
			return fmt.Errorf("pinned: querying the event of a parked block: %w", err)
		}
		if !done {
			return nil
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
			a.cache(p.b)
		}
	}
}

// EmptyCache returns every cached block to the system, after caching the parked blocks
// whose events have completed. Blocks in use and blocks still parked stay.
func (a *Allocator) EmptyCache() error {
	if err := a.processEvents(); err != nil {
		return err
	}
	var errs []error
	for i := range a.buckets {
		bk := &a.buckets[i]
		bk.mu.Lock()
		free := bk.free
		bk.free = nil
		bk.mu.Unlock()
		for _, b := range free {
			// Forget the address before the system may hand it out again.
			a.blocksMu.Lock()
			delete(a.blocks, base(b.mem))
			a.blocksMu.Unlock()
			if err := a.src.free(b.mem); err != nil {
				errs = append(errs, fmt.Errorf("pinned: EmptyCache: %w", err))
				a.blocksMu.Lock()
				a.blocks[base(b.mem)] = b
				a.blocksMu.Unlock()
				a.cache(b)
				continue
			}
			a.stats.numHostFree.Add(1)
			a.stats.allocations.decrease(1)
			a.stats.allocatedBytes.decrease(b.size)
		}
	}
	return errors.Join(errs...)
}

// Close releases the cache and the allocator's events. It refuses while blocks are in
// use or parked, which would otherwise be lost.
func (a *Allocator) Close() error {
	if err := a.EmptyCache(); err != nil {
		return err
	}
	a.blocksMu.Lock()
	left := len(a.blocks)
	a.blocksMu.Unlock()
	if left > 0 {
		return fmt.Errorf("pinned: Close on %s with %d block(s) in use or waiting for their streams; free them and let the streams finish first", a.dev.Name(), left)
	}
	a.eventsMu.Lock()
	idle := a.idle
	a.idle = nil
	a.eventsMu.Unlock()
	var errs []error
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

// source is where blocks come from.
type source interface {
	alloc(size int64) ([]byte, error)
	free(b []byte) error
}

// pinnedSource is the device's page-locked host memory.
type pinnedSource struct{ dev device.PinnedHost }

func (s pinnedSource) alloc(size int64) ([]byte, error) { return s.dev.HostAlloc(size) }
func (s pinnedSource) free(b []byte) error              { return s.dev.HostFree(b) }

// mmapSource is ordinary anonymous memory, rounded up to whole pages, for devices
// without pinned memory. A failed mmap counts as a lack of memory.
type mmapSource struct{}

func (mmapSource) alloc(size int64) ([]byte, error) {
	b, err := hostmem.Alloc(size)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", device.ErrOutOfMemory, err)
	}
	return b, nil
}

func (mmapSource) free(b []byte) error { return hostmem.Free(b) }
