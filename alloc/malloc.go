package alloc

import (
	"errors"
	"fmt"

	"github.com/subletml/sublet/device"
)

// request is one Alloc on its way through the malloc path (PyTorch's AllocParams).
type request struct {
	// size is the caller's size, rounded its round_size.
	size, rounded int64
	kind          poolKind
	ss            *streamState
	// lifetime is the caller's hint (Tag.Lifetime).
	lifetime Lifetime
	// devErr is the device's out-of-memory error of the latest raw allocation attempt;
	// nil when the memory fraction refused it.
	devErr error
}

// allocSize is the segment size a miss asks for.
func (r *request) allocSize() int64 { return allocationSize(r.rounded) }

// getFreeBlock is PyTorch's get_free_block: best fit among this stream's cached blocks
// of the pool, subject to the oversize rules; the block found leaves its free set.
func (a *Allocator) getFreeBlock(r *request) *block {
	if a.fractionSet && a.gcThreshold > 0 {
		a.freeSearches[r.kind]++
	}
	set := &r.ss.free[r.kind]
	p := set.lowerBound(r.rounded, 0)
	if set.isEnd(p) {
		return nil
	}
	b := set.at(p)
	if a.expandable {
		// A block followed by unmapped space can grow into it, so best fit compares
		// what each candidate could become: move on while the next candidate's
		// expandable size is strictly smaller.
		for n := set.next(p); b.seg.expandable && !set.isEnd(n); n = set.next(n) {
			nb := set.at(n)
			if expandableSize(nb) >= expandableSize(b) {
				break
			}
			p, b = n, nb
		}
	}
	if r.rounded < a.maxSplit && b.size >= a.maxSplit {
		return nil // small requests never take oversize blocks
	}
	if r.rounded >= a.maxSplit && b.size >= r.rounded+a.maxNonSplitRounding {
		return nil // an oversize request takes an oversize block only if it wastes < R
	}
	set.removeAt(p)
	return b
}

// expandableSize is b's size plus the unmapped space right after it.
func expandableSize(b *block) int64 {
	if b.next != nil && !b.next.mapped {
		return b.size + b.next.size
	}
	return b.size
}

// shouldSplit is PyTorch's should_split for handing out the first rounded bytes of b.
func (a *Allocator) shouldSplit(b *block, rounded int64) bool {
	rem := b.size - rounded
	if b.kind() == smallPool || a.expandable {
		return rem >= MinBlockSize
	}
	return rounded < a.maxSplit && rem > SmallSize
}

// allocFoundBlock is PyTorch's alloc_found_block: split off the front of b when the
// remainder is worth keeping, mark the result allocated and count it. It returns the
// allocated block.
func (a *Allocator) allocFoundBlock(r *request, b *block) *block {
	b = a.splitFound(r, b)
	a.countAlloc(r, b)
	return b
}

// splitFound splits the first r.rounded bytes off free block b, out of its free set,
// when the rest is worth keeping, and returns them; the rest goes back to the free set.
// The block returned counts as neither free nor split any more.
func (a *Allocator) splitFound(r *request, b *block) *block {
	k := r.kind
	st := &a.stats
	b.seg.takes++
	alreadySplit := b.isSplit()
	exp := b.seg.expandable
	if a.shouldSplit(b, r.rounded) {
		rem := b
		b = a.newBlock()
		b.addr, b.size, b.seg, b.mapped = rem.addr, r.rounded, rem.seg, true
		spliceBefore(rem, b)
		rem.addr += device.Ptr(r.rounded)
		rem.size -= r.rounded
		a.insertFree(rem)
		if !exp {
			if alreadySplit {
				st.InactiveSplitBytes.decrease(k, b.size)
			} else {
				st.InactiveSplitBytes.increase(k, rem.size)
				st.InactiveSplit.increase(k, 1)
			}
		}
	} else if alreadySplit && !exp {
		st.InactiveSplitBytes.decrease(k, b.size)
		st.InactiveSplit.decrease(k, 1)
	}
	return b
}

// countAlloc marks b allocated for r and counts it.
func (a *Allocator) countAlloc(r *request, b *block) {
	k := b.kind()
	st := &a.stats
	b.allocated = true
	b.requested = r.size
	st.Allocation.increase(k, 1)
	st.AllocatedBytes.increase(k, b.size)
	st.Active.increase(k, 1)
	st.ActiveBytes.increase(k, b.size)
	st.RequestedBytes.increase(k, r.size)
	if b.size >= a.maxSplit {
		st.OversizeAllocations.increase(1)
	}
}

// insertFree puts a mapped, unallocated block into its free set; its garbage collection
// age starts at zero.
func (a *Allocator) insertFree(b *block) {
	k := b.kind()
	b.gcBase = a.freeSearches[k]
	b.seg.ss.free[k].insert(b)
}

// mallocSlow is the miss path of PyTorch's malloc: garbage collection, a new segment,
// then the two release-and-retry steps, and finally the OOM error.
func (a *Allocator) mallocSlow(r *request) (*block, error) {
	if a.fractionSet && a.gcThreshold > 0 {
		if err := a.garbageCollect(); err != nil {
			return nil, a.wrapErr(r, err)
		}
	}
	b, err := a.allocBlock(r, false)
	if b == nil && err == nil && a.plan != nil && a.plan.relieve(r) {
		if b = a.getFreeBlock(r); b == nil {
			b, err = a.allocBlock(r, false)
		}
	}
	// A capture returns nothing to the device: releasing would free memory (and
	// synchronize) inside it.
	capturing := len(a.captures) > 0
	if b == nil && err == nil && !capturing {
		var released bool
		if released, err = a.releaseAvailableCachedBlocks(r); released && err == nil {
			b, err = a.allocBlock(r, false)
		}
	}
	if b == nil && err == nil && !capturing {
		if err = a.releaseCachedBlocks(); err == nil {
			b, err = a.allocBlock(r, true)
		}
	}
	if err != nil {
		return nil, a.wrapErr(r, err)
	}
	if b == nil {
		return nil, a.oom(r)
	}
	return b, nil
}

func (a *Allocator) wrapErr(r *request, err error) error {
	return fmt.Errorf("alloc: Alloc(%d) on %s: %w", r.size, a.dev.Name(), err)
}

// allocBlock is PyTorch's alloc_block: get a new segment (or map expandable pages) for
// r. It returns nil, nil when the memory fraction or the device refuses for lack of
// memory, and an error for any other device failure.
func (a *Allocator) allocBlock(r *request, retry bool) (*block, error) {
	if retry {
		a.stats.NumAllocRetries++
	}
	size := r.allocSize()
	if a.fractionSet && a.totalAllocated+size > a.allowed {
		r.devErr = nil
		return nil, nil
	}
	if a.expandable {
		return a.tryAllocateExpandable(r)
	}
	p, err := a.dev.Malloc(size)
	if err != nil {
		if errors.Is(err, device.ErrOutOfMemory) {
			r.devErr = err
			return nil, nil
		}
		return nil, fmt.Errorf("getting a %d-byte segment: %w", size, err)
	}
	a.totalAllocated += size
	seg := a.addSegment(&segment{base: p, size: size, stream: r.ss.stream, ss: r.ss, kind: r.kind})
	b := a.newBlock()
	b.addr, b.size, b.seg, b.mapped = p, size, seg, true
	seg.head = b
	a.stats.Segment.increase(r.kind, 1)
	a.stats.ReservedBytes.increase(r.kind, size)
	if size >= a.maxSplit {
		a.stats.OversizeSegments.increase(1)
	}
	a.stats.NumDeviceAlloc++
	if a.hist != nil {
		a.recordSegment(ActionSegmentAlloc, p, size, seg)
	}
	return b, nil
}

// addSegment registers seg and returns it.
func (a *Allocator) addSegment(seg *segment) *segment {
	seg.index = len(a.segments)
	a.segments = append(a.segments, seg)
	return seg
}

// removeSegment forgets seg.
func (a *Allocator) removeSegment(seg *segment) {
	last := a.segments[len(a.segments)-1]
	a.segments[seg.index] = last
	last.index = seg.index
	a.segments[len(a.segments)-1] = nil
	a.segments = a.segments[:len(a.segments)-1]
}

// oom counts an out-of-memory failure and describes it.
func (a *Allocator) oom(r *request) error {
	free, total, _ := a.dev.MemInfo()
	a.stats.NumOOMs++
	if a.hist != nil {
		a.recordCall(ActionOOM, r.size, r.ss.stream, free)
	}
	e := &OOMError{
		Device:             a.dev.Name(),
		Requested:          r.size,
		Rounded:            r.rounded,
		SegmentSize:        r.allocSize(),
		Pool:               r.kind.String(),
		Stream:             r.ss.stream,
		Capacity:           total,
		DeviceFree:         free,
		Allocated:          a.stats.AllocatedBytes[StatAll].Current,
		Reserved:           a.stats.ReservedBytes[StatAll].Current,
		InactiveSplitBytes: a.stats.InactiveSplitBytes[StatAll].Current,
		Err:                r.devErr,
	}
	if a.fractionSet {
		e.Allowed = a.allowed
	}
	for _, ss := range a.streams {
		for k := smallPool; k <= largePool; k++ {
			set := &ss.free[k]
			if set.n == 0 {
				continue
			}
			last := set.chunks[len(set.chunks)-1]
			largest := last.e[last.n-1].size
			if k == smallPool {
				e.LargestFreeSmall = max(e.LargestFreeSmall, largest)
			} else {
				e.LargestFreeLarge = max(e.LargestFreeLarge, largest)
			}
			if ss == r.ss && k == r.kind {
				e.LargestFreeOnStream = largest
			}
		}
	}
	limit := total
	if a.fractionSet {
		limit = a.allowed
	}
	e.Hint = e.hint(limit, a.expandable, a.maxSplit != maxUnlimited)
	return e
}
