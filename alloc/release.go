package alloc

import (
	"fmt"
	"slices"
)

// EmptyCache is torch.cuda.empty_cache: it waits for every pending stream event, then
// gives back to the device every cached segment that holds no live block, and the whole
// free pages of expandable segments. Free blocks inside segments that still hold live
// blocks stay (InactiveSplitBytes).
func (a *Allocator) EmptyCache() error {
	if a.histTrace.Load() {
		return a.emptyCacheRecorded()
	}
	return a.emptyCache(nil)
}

// emptyCacheRecorded is EmptyCache capturing its caller's stack for the history.
//
//go:noinline
func (a *Allocator) emptyCacheRecorded() error {
	var c callSite
	return a.emptyCache(c.capture(2, Tag{}))
}

func (a *Allocator) emptyCache(c *callSite) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.captures) > 0 {
		return fmt.Errorf("alloc: EmptyCache on %s: %w (on stream %d): end it first", a.dev.Name(), ErrCaptureUnderway, a.captures[0].s)
	}
	if a.hist != nil {
		a.beginCall(c)
		a.recordCall(ActionEmptyCache, 0, 0, 0)
	}
	if a.plan != nil {
		a.plan.settle()
	}
	if err := a.releaseCachedBlocks(); err != nil {
		return fmt.Errorf("alloc: EmptyCache on %s: %w", a.dev.Name(), err)
	}
	return nil
}

// releaseCachedBlocks is PyTorch's release_cached_blocks: the default pools, then the
// private pools released and used by no capture, which are forgotten once empty.
func (a *Allocator) releaseCachedBlocks() error {
	if err := a.synchronizeAndFreeEvents(); err != nil {
		return err
	}
	for _, states := range [][]*streamState{a.streams, a.freeablePools()} {
		if err := a.releaseBlocks(states, largePool); err != nil {
			return err
		}
		if err := a.releaseBlocks(states, smallPool); err != nil {
			return err
		}
	}
	a.dropEmptyPools()
	return nil
}

// freeBlocks returns the free blocks of pool k of the streams states, in PyTorch's pool
// order (stream, size, address).
func freeBlocks(states []*streamState, k poolKind) []*block {
	var all []*block
	for _, ss := range states {
		all = ss.free[k].appendAll(all)
	}
	return all
}

// releaseBlocks is PyTorch's release_blocks: release every free block of pool k of the
// streams states that is a whole segment, then unmap the free pages of expandable
// segments, releasing those left wholly unmapped. It also releases the address range
// of an expandable segment that never had a page mapped (its first map ran out of
// memory), which PyTorch keeps until the process ends: it holds no memory, so no
// statistic changes, but a device cannot be closed while a range is reserved.
func (a *Allocator) releaseBlocks(states []*streamState, k poolKind) error {
	var unmap []*block
	for _, b := range freeBlocks(states, k) {
		if b.seg.expandable {
			unmap = append(unmap, b)
		} else if !b.isSplit() {
			if err := a.releaseBlock(b); err != nil {
				return err
			}
		}
	}
	for _, b := range unmap {
		if err := a.unmapBlock(b); err != nil {
			return err
		}
		if !b.mapped && !b.isSplit() {
			if err := a.releaseExpandableSegment(b); err != nil {
				return err
			}
		}
	}
	for _, ss := range states {
		for _, b := range slices.Clone(ss.unmapped[k]) {
			if !b.isSplit() {
				if err := a.releaseExpandableSegment(b); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// releaseBlock is PyTorch's release_block: give back a free block that is a whole
// segment to the device.
func (a *Allocator) releaseBlock(b *block) error {
	seg := b.seg
	if err := a.dev.Free(seg.base); err != nil {
		return fmt.Errorf("freeing a %d-byte segment: %w", seg.size, err)
	}
	a.stats.NumDeviceFree++
	if a.hist != nil {
		a.recordSegment(ActionSegmentFree, seg.base, seg.size, seg)
	}
	a.totalAllocated -= b.size
	a.stats.Segment.decrease(seg.kind, 1)
	a.stats.ReservedBytes.decrease(seg.kind, b.size)
	if b.size >= a.maxSplit {
		a.stats.OversizeSegments.decrease(1)
	}
	seg.ss.free[seg.kind].remove(b)
	a.removeSegment(seg)
	a.dropBlock(b)
	return nil
}

// releaseAvailableCachedBlocks is PyTorch's release_available_cached_blocks, the first
// retry step when max_split_size is set: release one cached block of this stream and
// pool of at least max(rounded, MaxSplitSize) bytes; without one, release oversize
// blocks from the largest down until that many bytes went back. It reports whether
// enough was released (blocks released before a shortfall stay released).
func (a *Allocator) releaseAvailableCachedBlocks(r *request) (bool, error) {
	if a.maxSplit == maxUnlimited {
		return false, nil
	}
	set := &r.ss.free[r.kind]
	target := max(r.rounded, a.maxSplit)
	p := set.lowerBound(target, 0)
	if !set.isEnd(p) && !set.at(p).seg.expandable {
		return true, a.releaseBlock(set.at(p))
	}
	// No single block is large enough: release oversize blocks, largest first. In
	// PyTorch's one ordered set the walk would run into another stream's blocks and
	// stop; here it stops at the start of this stream's set.
	var victims []*block
	var released int64
	for q, ok := set.prev(p); ok && released < target; q, ok = set.prev(q) {
		b := set.at(q)
		if b.size < a.maxSplit {
			break
		}
		if !b.seg.expandable {
			victims = append(victims, b)
			released += b.size
		}
	}
	for _, b := range victims {
		if err := a.releaseBlock(b); err != nil {
			return false, err
		}
	}
	return released >= target, nil
}

// garbageCollect is PyTorch's garbage_collect_cached_blocks: when reserved memory is
// over GarbageCollectionThreshold × the allowed memory, release cached unsplit large
// blocks whose age is at least the average age, pass after pass, until enough went back
// or a pass releases nothing. No stream is synchronized.
func (a *Allocator) garbageCollect() error {
	threshold := int64(a.gcThreshold * float64(a.allowed))
	if a.totalAllocated <= threshold {
		return nil
	}
	target := a.totalAllocated - threshold
	now := a.freeSearches[largePool]
	var totalAge, count int64
	for _, b := range freeBlocks(a.streams, largePool) {
		if !b.isSplit() {
			totalAge += now - b.gcBase
			count++
		}
	}
	var reclaimed int64
	for freed := true; reclaimed < target && freed && count > 0; {
		avg := float64(totalAge) / float64(count)
		freed = false
		for _, b := range freeBlocks(a.streams, largePool) {
			if age := now - b.gcBase; !b.isSplit() && !b.seg.expandable && float64(age) >= avg {
				freed = true
				reclaimed += b.size
				totalAge -= age
				count--
				if err := a.releaseBlock(b); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
