package alloc

import (
	"fmt"

	"github.com/subletml/sublet/device"
)

// Fences (the planned policy): a page may be unmapped only once the device has finished
// the work queued on it. PyTorch synchronizes the segment's stream before unmapping,
// which on the allocation path stalls the host until the device has caught up. Instead,
// each free on the caching path that leaves a free block of a page or more re-records
// its stream's fence, an event, after stamping the block (block.freedAt); a plan that
// ends records one for its arenas' streams. When stitching unmaps a page, a block freed
// before its stream's fence was recorded needs only that fence completed, which one
// event query tells without waiting; the stream is synchronized only for a block freed
// after the fence, or while the fence is still pending, and then once for all the
// stream's blocks that the stitch unmaps. (Recording only when no fence is pending, one
// record between two stitches, leaves the holes freed after it uncovered: 73
// synchronizations on oversize, 50 on growing, 35 on random, against none.) EmptyCache
// and the release before an OOM retry settle each block the same way (having waited for
// the events of other streams' uses, as PyTorch's do); expandable segments under
// PyTorch's policy keep PyTorch's synchronizing.

// fence is a streamState's: its events go on the state's stream. Guarded by
// Allocator.mu.
type fence struct {
	// ev is the stream's fence event (0 until first recorded); it was last recorded
	// when Allocator.freeClock was at, and pending says it was not seen completed since.
	ev      device.Event
	at      uint64
	pending bool
	// idle is a free clock value the stream is known done with: the device finished
	// the work on every block with freedAt < idle.
	idle uint64
}

// fenceFree re-records the fence of b's stream after the caching path freed b, when b
// is free in an expandable segment and at least a page, which stitching may unmap: an
// event record (on cuda a cuEventRecord, which does not wait) for each such free. A
// fence that cannot be recorded is no error: the stream is synchronized instead when
// the pages are unmapped.
func (p *planned) fenceFree(b *block) {
	a := p.a
	if len(a.captures) > 0 || !b.seg.expandable || !b.mapped || !b.allocatable() || b.size < b.seg.page {
		return
	}
	p.recordFence(b.seg.ss)
}

// recordFence re-records the fence of ss: the blocks freed so far are covered once it
// completes.
func (p *planned) recordFence(ss *streamState) {
	a, s, f := p.a, ss.stream, &ss.fence
	var err error
	if f.ev == 0 {
		f.ev, err = a.recordEvent(s)
	} else {
		err = a.dev.RecordEvent(f.ev, s)
	}
	f.at, f.pending = a.freeClock, err == nil
	if err != nil && f.ev != 0 {
		a.events.spare = append(a.events.spare, f.ev)
		f.ev = 0
	}
}

// settleForUnmap makes sure the device has finished the work that used free block b's
// memory, so that its pages can be unmapped: by the stream's completed fence, without
// waiting, or else by synchronizing the stream.
func (p *planned) settleForUnmap(b *block) error {
	a, s, f := p.a, b.seg.stream, &b.seg.ss.fence
	if b.freedAt < f.idle {
		return nil
	}
	if f.pending && b.freedAt <= f.at {
		if done, err := a.dev.QueryEvent(f.ev); err == nil && done {
			f.pending, f.idle = false, f.at+1
			return nil
		}
	}
	if err := a.dev.SynchronizeStream(s); err != nil {
		return fmt.Errorf("synchronizing stream %d before unmapping: %w", s, err)
	}
	f.pending, f.idle = false, a.freeClock+1
	return nil
}
