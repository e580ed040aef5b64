package alloc

import (
	"cmp"
	"iter"
	"slices"

	"github.com/subletml/sublet/device"
)

// arena is one pool's memory of a running plan: a block of the caching structures that
// the plan took whole. The arena block is allocated (nothing merges into it, nothing
// reuses it) but counted nowhere: its slots are, as the allocations they hold. Slot
// blocks are not linked into the segment's block list; the arena's pieces (its live
// slots and the gaps between them) stand for it wherever the blocks are listed.
type arena struct {
	block *block
	// slots are the plan's slot blocks of this pool, each at its offset.
	slots []*block
}

// carveArena takes a free block of at least size bytes of pool k on ss for an arena:
// a cached block, or pages stitched from free ones without raising reserved memory
// above arenaLimit. It returns nil when there is no such room.
func (p *planned) carveArena(k poolKind, size int64, ss *streamState) *arena {
	a := p.a
	r := request{size: size, rounded: size, kind: k, ss: ss}
	b := a.getFreeBlock(&r)
	if b == nil && a.expandable {
		// A device failure while stitching leaves the allocator consistent (what was
		// unmapped is accounted); the plan just does not start.
		b, _ = a.stitch(&r, p.arenaLimit(), true)
	}
	if b == nil {
		return nil
	}
	b = a.splitFound(&r, b)
	b.allocated = true
	ar := &arena{block: b}
	b.arena = ar
	return ar
}

// slot makes the block of a slot at off bytes into the arena.
func (ar *arena) slot(a *Allocator, off, size int64) *block {
	b := a.newBlock()
	b.addr, b.size, b.seg, b.mapped, b.arena = ar.block.addr+device.Ptr(off), size, ar.block.seg, true, ar
	ar.slots = append(ar.slots, b)
	return b
}

// freeSlot takes back slot block b, freed in the plan's order: nothing to merge, nothing
// to find; the counts and the history are those of any free.
func (a *Allocator) freeSlot(b *block) {
	a.countFree(b)
	if a.hist != nil {
		a.recordFree(ActionFreeCompleted, b)
	}
	a.countRetired(b.kind(), b.size, b.requested)
	b.requested = 0
}

// live returns the arena's allocated slots in address order.
func (ar *arena) live() []*block {
	var out []*block
	for _, b := range ar.slots {
		if b.allocated {
			out = append(out, b)
		}
	}
	slices.SortFunc(out, func(x, y *block) int { return cmp.Compare(x.addr, y.addr) })
	return out
}

// pieces yields the arena's live slots and, as blocks of their own that belong to no
// structure, the free gaps between them, in address order.
func (ar *arena) pieces(yield func(*block) bool) {
	A := ar.block
	cursor := A.addr
	gap := func(end device.Ptr) bool {
		if end == cursor {
			return true
		}
		return yield(&block{addr: cursor, size: int64(end - cursor), seg: A.seg, mapped: true})
	}
	for _, s := range ar.live() {
		if !gap(s.addr) || !yield(s) {
			return
		}
		cursor = s.addr + device.Ptr(s.size)
	}
	gap(A.addr + device.Ptr(A.size))
}

// blocks yields the segment's blocks in address order, each arena's pieces in place of
// its block.
func (seg *segment) blocks() iter.Seq[*block] {
	return func(yield func(*block) bool) {
		for b := seg.head; b != nil; b = b.next {
			if ar := b.arena; ar != nil && ar.block == b {
				ok := true
				ar.pieces(func(p *block) bool { ok = yield(p); return ok })
				if !ok {
					return
				}
			} else if !yield(b) {
				return
			}
		}
	}
}

// dissolve gives the arena back to the caching structures: its live slots become
// ordinary allocated blocks of the segment, in place, and the gaps between them free
// blocks, merged with free neighbours. The arena block and the free slots are dropped.
func (a *Allocator) dissolve(ar *arena) {
	A := ar.block
	var gaps []*block
	cursor := A.addr
	gap := func(end device.Ptr) {
		if end > cursor {
			g := a.newBlock()
			g.addr, g.size, g.seg, g.mapped = cursor, int64(end-cursor), A.seg, true
			spliceBefore(A, g)
			gaps = append(gaps, g)
		}
	}
	for _, s := range ar.live() {
		gap(s.addr)
		s.arena = nil
		spliceBefore(A, s)
		cursor = s.addr + device.Ptr(s.size)
	}
	gap(A.addr + device.Ptr(A.size))
	A.prev.next = A.next // A.prev is the last piece: there is at least one
	if A.next != nil {
		A.next.prev = A.prev
	}
	for _, s := range ar.slots {
		if s.arena != nil {
			a.dropBlock(s)
		}
	}
	a.dropBlock(A)
	for _, g := range gaps {
		a.coalesce(g)
	}
}
