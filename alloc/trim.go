package alloc

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/subletml/sublet/device"
)

// Trimming idle pages (the planned policy). EmptyCache gives cached memory back at
// once, after waiting for every stream, and pauses the running plan. TrimIdle gives back
// only whole free pages that have been idle since the previous TrimIdle, and waits for
// nothing: each call records an event on the streams whose pages it saw free, and the
// next call unmaps those pages, still free, in segments nothing was taken from since
// and whose stream's event has completed (the work queued before they were seen free
// is done, and none was queued on them after). Arenas, being allocated, are never
// trimmed, and a plan takes nothing from the segments' free blocks: while a plan runs,
// the pages it left free go back. TrimEvery calls TrimIdle at an interval, on the
// caller's goroutine.

// trimMark is pages of a segment seen free by TrimIdle: offsets [lo, hi) in seg, when
// seg.takes was takes.
type trimMark struct {
	seg    *segment
	lo, hi device.Ptr
	takes  uint64
}

// trimState is what the previous TrimIdle saw. Guarded by Allocator.mu.
type trimState struct {
	marks []trimMark
	// events has one event per stream of the marks, recorded when they were seen.
	events []streamEvent
}

// TrimIdle unmaps the whole free pages that were free at the previous call too and
// whose stream has completed the work queued before it, without waiting for any stream,
// and returns the bytes given back to the device. It needs the planned policy (an error
// otherwise); during a capture it does nothing.
func (a *Allocator) TrimIdle() (int64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	p := a.plan
	if p == nil {
		return 0, fmt.Errorf("alloc: TrimIdle on %s: needs policy:planned (EmptyCache gives the cache back under PyTorch's policy)", a.dev.Name())
	}
	if len(a.captures) > 0 || !a.expandable {
		return 0, nil
	}
	before := a.totalAllocated
	done, err := a.trimEventsDone(&p.trim)
	if err == nil {
		err = a.trimMarked(p.trim.marks, done)
	}
	p.trim = trimState{}
	if err == nil {
		err = a.markFreePages(&p.trim)
	}
	if err != nil {
		return before - a.totalAllocated, fmt.Errorf("alloc: TrimIdle on %s: %w", a.dev.Name(), err)
	}
	return before - a.totalAllocated, nil
}

// TrimEvery calls TrimIdle every interval until ctx ends, and returns ctx's error, or
// TrimIdle's first. Run it on a goroutine of its own: `go a.TrimEvery(ctx, time.Second)`.
func (a *Allocator) TrimEvery(ctx context.Context, every time.Duration) error {
	if every <= 0 {
		return fmt.Errorf("alloc: TrimEvery on %s: interval %v; want a positive one", a.dev.Name(), every)
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			if _, err := a.TrimIdle(); err != nil {
				return err
			}
		}
	}
}

// trimEventsDone queries the events of ts, without waiting, and returns the streams
// whose event has completed; the events go back to the pool.
func (a *Allocator) trimEventsDone(ts *trimState) (map[device.Stream]bool, error) {
	done := map[device.Stream]bool{}
	var errs []error
	for _, e := range ts.events {
		ok, err := a.dev.QueryEvent(e.ev)
		if err != nil {
			errs = append(errs, fmt.Errorf("querying an event of stream %d: %w", e.s, err))
		}
		done[e.s] = ok && err == nil
		a.events.spare = append(a.events.spare, e.ev)
	}
	return done, errors.Join(errs...)
}

// trimMarked unmaps the pages of marks that are still whole free pages, in segments
// whose stream is done.
func (a *Allocator) trimMarked(marks []trimMark, done map[device.Stream]bool) error {
	bySeg := map[*segment][]trimMark{}
	for _, m := range marks {
		if done[m.seg.stream] && m.seg.takes == m.takes {
			bySeg[m.seg] = append(bySeg[m.seg], m)
		}
	}
	for _, b := range a.freeExpandable() {
		ms := bySeg[b.seg]
		lo, hi := wholePages(b)
		// The marked pages inside b, highest first: unmapping them leaves the rest of b
		// below as the free block right before the unmapped piece.
		var spans []trimMark
		for _, m := range ms {
			if l, h := max(lo, m.lo), min(hi, m.hi); l < h {
				spans = append(spans, trimMark{b.seg, l, h, m.takes})
			}
		}
		slices.SortFunc(spans, func(x, y trimMark) int { return cmp.Compare(y.lo, x.lo) })
		cur := b
		for _, s := range spans {
			if err := a.unmapPages(cur, s.lo, s.hi, false); err != nil {
				return err
			}
			if cur = cur.prev; cur == nil || !cur.allocatable() || !cur.mapped {
				break
			}
		}
	}
	return nil
}

// markFreePages records in ts the whole free pages of the default pools' expandable
// segments, and an event on each of their streams.
func (a *Allocator) markFreePages(ts *trimState) error {
	streams := map[device.Stream]bool{}
	for _, b := range a.freeExpandable() {
		if lo, hi := wholePages(b); lo < hi {
			ts.marks = append(ts.marks, trimMark{b.seg, lo, hi, b.seg.takes})
			streams[b.seg.stream] = true
		}
	}
	for _, s := range slices.Sorted(maps.Keys(streams)) {
		ev, err := a.recordEvent(s)
		if err != nil {
			// Without an event the pages' stream cannot be known done: mark nothing.
			for _, e := range ts.events {
				a.events.spare = append(a.events.spare, e.ev)
			}
			*ts = trimState{}
			return fmt.Errorf("recording an event on stream %d: %w", s, err)
		}
		ts.events = append(ts.events, streamEvent{s, ev})
	}
	return nil
}

// freeExpandable returns the free blocks of the default pools' expandable segments.
func (a *Allocator) freeExpandable() []*block {
	var out []*block
	for _, ss := range a.streams {
		for k := smallPool; k <= largePool; k++ {
			for _, b := range ss.free[k].appendAll(nil) {
				if b.seg.expandable {
					out = append(out, b)
				}
			}
		}
	}
	return out
}
