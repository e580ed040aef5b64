package alloc

import (
	"errors"
	"fmt"

	"github.com/subletml/sublet/device"
)

// ErrCaptureUnderway is wrapped by the errors of calls that a graph capture forbids:
// EmptyCache, which would synchronize and free device memory inside the capture, and a
// second capture of one stream.
var ErrCaptureUnderway = errors.New("a graph capture is underway")

// Pool is a private memory pool (PyTorch's graph pool, a MemPoolId): segments that only
// the requests routed to it use. A stream being captured into a CUDA graph allocates
// from the graph's pool, so the addresses the graph bakes in stay its own: blocks freed
// during the capture are reused by the capture's later requests (replay repeats the same
// order), and the pool gives nothing back to the device, not even to EmptyCache, until
// the graph is released (ReleasePool) and its blocks are free.
//
// A Pool's fields are guarded by its allocator's mu.
type Pool struct {
	a *Allocator
	// streams holds the pool's free sets, one streamState per stream that allocated in
	// it, sorted by stream.
	streams []*streamState
	// uses counts the captures routing into the pool plus one for its owner until
	// ReleasePool.
	uses int
	// released says ReleasePool was called.
	released bool
}

// capture is one stream being captured into a pool.
type capture struct {
	s device.Stream
	p *Pool
}

// NewPool returns a private pool, held by the caller until ReleasePool.
func (a *Allocator) NewPool() *Pool {
	a.mu.Lock()
	defer a.mu.Unlock()
	p := &Pool{a: a, uses: 1}
	a.pools = append(a.pools, p)
	return p
}

// BeginCapture routes the requests on stream s into p until EndCapture(s), with
// PyTorch's capture rules for the whole allocator while any capture is underway: no
// stream event is recorded or queried (frees of blocks used on other streams wait for
// the end of the last capture), the release-and-retry steps of a miss are skipped (a
// capture never returns memory to the device), and EmptyCache fails with
// ErrCaptureUnderway.
func (a *Allocator) BeginCapture(s device.Stream, p *Pool) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case p == nil || p.a != a:
		return fmt.Errorf("alloc: BeginCapture(stream %d) on %s: the pool is nil or another allocator's", s, a.dev.Name())
	case p.released:
		return fmt.Errorf("alloc: BeginCapture(stream %d) on %s: the pool was released", s, a.dev.Name())
	}
	for _, c := range a.captures {
		if c.s == s {
			return fmt.Errorf("alloc: BeginCapture(stream %d) on %s: %w on that stream", s, a.dev.Name(), ErrCaptureUnderway)
		}
	}
	if a.plan != nil {
		a.plan.settle()
	}
	a.captures = append(a.captures, capture{s, p})
	p.uses++
	return nil
}

// EndCapture stops routing stream s into its capture's pool. When it was the last
// capture, the frees it deferred record their stream events now.
func (a *Allocator) EndCapture(s device.Stream) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	i := -1
	for j, c := range a.captures {
		if c.s == s {
			i = j
		}
	}
	if i < 0 {
		return fmt.Errorf("alloc: EndCapture(stream %d) on %s: the stream is not being captured", s, a.dev.Name())
	}
	a.captures[i].p.uses--
	a.captures = append(a.captures[:i], a.captures[i+1:]...)
	if len(a.captures) == 0 {
		if a.hist != nil {
			a.beginCall(nil) // the frees it completes carry their blocks' sites
		}
		return a.insertDeferredEvents()
	}
	return nil
}

// Capturing reports whether a capture is underway on any stream.
func (a *Allocator) Capturing() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.captures) > 0
}

// ReleasePool gives p back (the graph that used it is gone): once no capture routes into
// it, EmptyCache returns its free segments to the device, as it does the default pool's.
// Blocks still allocated from it (a graph's outputs) return to it when freed. Releasing
// twice is an error.
func (a *Allocator) ReleasePool(p *Pool) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if p == nil || p.a != a || p.released {
		return fmt.Errorf("alloc: ReleasePool on %s: the pool is nil, another allocator's or released already", a.dev.Name())
	}
	p.released = true
	p.uses--
	return nil
}

// requestState is the pools a request on stream s draws from: its capture's pool while
// s is captured, else the default pools.
func (a *Allocator) requestState(s device.Stream) *streamState {
	for _, c := range a.captures {
		if c.s == s {
			return c.p.streamState(s)
		}
	}
	return a.streamState(s)
}

// streamState returns the pool's free sets of stream s, creating them on first use.
func (p *Pool) streamState(s device.Stream) *streamState {
	i := 0
	for i < len(p.streams) && p.streams[i].stream < s {
		i++
	}
	if i == len(p.streams) || p.streams[i].stream != s {
		p.streams = append(p.streams, nil)
		copy(p.streams[i+1:], p.streams[i:])
		p.streams[i] = &streamState{stream: s, pool: p}
	}
	return p.streams[i]
}

// deferUntilNoCapture keeps b, freed during a capture while used on other streams,
// until the last capture ends (PyTorch's needs_events_deferred_until_no_capture): it
// stays active, and no event is recorded inside the capture.
func (a *Allocator) deferUntilNoCapture(b *block) {
	a.events.deferred = append(a.events.deferred, b)
}

// insertDeferredEvents records the stream events of the frees deferred during captures.
func (a *Allocator) insertDeferredEvents() error {
	var errs []error
	kept := a.events.deferred[:0]
	for _, b := range a.events.deferred {
		evs, err := a.recordUses(b)
		if err != nil {
			// The block cannot be freed safely yet: it stays deferred, and the next
			// Alloc outside a capture tries again.
			errs = append(errs, err)
			kept = append(kept, b)
			continue
		}
		a.deferFree(b, evs)
	}
	clear(a.events.deferred[len(kept):])
	a.events.deferred = kept
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("alloc: ending a capture on %s: %w", a.dev.Name(), err)
	}
	return nil
}

// freeablePools returns the free sets of the pools released and used by no capture:
// EmptyCache gives their free segments back.
func (a *Allocator) freeablePools() []*streamState {
	var out []*streamState
	for _, p := range a.pools {
		if p.uses == 0 {
			out = append(out, p.streams...)
		}
	}
	return out
}

// dropEmptyPools forgets the released pools that hold no segment.
func (a *Allocator) dropEmptyPools() {
	held := map[*Pool]bool{}
	for _, seg := range a.segments {
		if p := seg.ss.pool; p != nil {
			held[p] = true
		}
	}
	kept := a.pools[:0]
	for _, p := range a.pools {
		if p.uses > 0 || held[p] {
			kept = append(kept, p)
		}
	}
	clear(a.pools[len(kept):])
	a.pools = kept
}
