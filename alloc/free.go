package alloc

import "github.com/subletml/sublet/device"

// freeBlock is PyTorch's free_block: b, no longer allocated and with no pending stream
// use, merges with its free neighbours and goes back to its free set.
func (a *Allocator) freeBlock(b *block) {
	if a.hist != nil {
		a.recordFree(ActionFreeCompleted, b)
	}
	origSize, requested := b.size, b.requested
	a.coalesce(b)
	a.countRetired(b.kind(), origSize, requested)
}

// countRetired counts a block of size bytes, requested bytes asked for, no longer
// active.
func (a *Allocator) countRetired(k poolKind, size, requested int64) {
	st := &a.stats
	st.Active.decrease(k, 1)
	st.ActiveBytes.decrease(k, size)
	st.RequestedBytes.decrease(k, requested)
}

// coalesce merges b, mapped, unallocated and with nothing pending, with its free
// neighbours and puts the result in its free set, counting the inactive split blocks
// and bytes that change.
func (a *Allocator) coalesce(b *block) {
	k := b.kind()
	a.freeClock++
	b.freedAt = a.freeClock
	var netBlocks, netBytes int64
	// The first free neighbour b absorbs keeps its entry in the free set for b to take
	// over (freeSet.replace): in place, where the merged key sorts there, instead of a
	// removal and an insert.
	var heir *block
	var heirSize int64
	var heirAddr device.Ptr
	for _, c := range [2]*block{b.prev, b.next} {
		if !mergeable(b, c) {
			continue
		}
		switch {
		case c.mapped && heir == nil:
			heir, heirSize, heirAddr = c, c.size, c.addr
		case c.mapped:
			c.seg.ss.free[c.kind()].remove(c)
		default:
			a.removeUnmapped(c)
		}
		netBlocks--
		netBytes -= a.absorb(b, c)
	}
	b.requested = 0
	if heir != nil {
		b.gcBase = a.freeSearches[k]
		b.seg.ss.free[k].replace(heir, heirSize, heirAddr, b)
	} else {
		a.insertFree(b)
	}
	if b.isSplit() {
		netBlocks++
		netBytes += b.size
	}
	st := &a.stats
	// Expandable segments are left out of inactive_split: their whole free pages can
	// always be released.
	if !b.seg.expandable {
		if netBlocks > 0 {
			st.InactiveSplit.increase(k, netBlocks)
		} else if netBlocks < 0 {
			st.InactiveSplit.decrease(k, -netBlocks)
		}
		if netBytes > 0 {
			st.InactiveSplitBytes.increase(k, netBytes)
		} else if netBytes < 0 {
			st.InactiveSplitBytes.decrease(k, -netBytes)
		}
	}
}

// tryMerge is PyTorch's try_merge_blocks: dst absorbs its neighbour src when src is
// free (or, for unmapped dst, unmapped) with nothing pending. It returns the bytes
// absorbed, 0 when src stays.
func (a *Allocator) tryMerge(dst, src *block) int64 {
	if !mergeable(dst, src) {
		return 0
	}
	if src.mapped {
		src.seg.ss.free[src.kind()].remove(src)
	} else {
		a.removeUnmapped(src)
	}
	return a.absorb(dst, src)
}

// mergeable reports whether dst may absorb its neighbour src (tryMerge).
func mergeable(dst, src *block) bool { return src.allocatable() && dst.mapped == src.mapped }

// absorb makes dst cover its neighbour src, out of its free set already (or, for one
// whose entry dst takes over, about to be replaced there), and drops src. It returns
// the bytes absorbed.
func (a *Allocator) absorb(dst, src *block) int64 {
	if dst.prev == src {
		dst.addr = src.addr
		dst.prev = src.prev
		if dst.prev != nil {
			dst.prev.next = dst
		} else {
			dst.seg.head = dst
		}
	} else {
		dst.next = src.next
		if dst.next != nil {
			dst.next.prev = dst
		}
	}
	sub := src.size
	dst.size += sub
	dst.freedAt = max(dst.freedAt, src.freedAt)
	a.dropBlock(src)
	return sub
}
