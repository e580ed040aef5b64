package alloc

import (
	"slices"
	"sort"

	"github.com/subletml/sublet/device"
)

// block is a piece of a segment: allocated, free (cached), awaiting stream events, or
// (expandable segments only) unmapped address space. All fields are guarded by
// Allocator.mu.
type block struct {
	addr device.Ptr
	size int64
	// requested is the caller's unrounded size while the block is active.
	requested int64
	// seg is the segment the block lies in; blocks never change segment.
	seg *segment
	// prev and next are the physically adjacent blocks of the same segment.
	prev, next *block
	// gcBase is the pool's free-block search count when the block became free; the
	// difference to the current count is its age for garbage collection.
	gcBase int64
	// eventCount is the number of stream events still pending before a freed block
	// can be reused.
	eventCount int32
	allocated  bool
	// mapped is false only for unmapped address space of an expandable segment.
	mapped bool
	// site is the memory history's site of the allocation (0: none recorded).
	site int32
	// streamUses are the streams other than the allocation stream that RecordStream
	// named since the block was allocated (a set; usually empty).
	streamUses []device.Stream
	// serial numbers the block's allocation under the planned policy: the allocations
	// served before it. A free is known by its distance back to its allocation.
	serial int64
	// arena is the plan's arena this block is, or is a slot of; nil for every other
	// block.
	arena *arena
	// freedAt is Allocator.freeClock when memory of the block was last freed: the
	// device work that used it was queued before then. Merging keeps the later value;
	// pages just mapped have none (0).
	freedAt uint64
}

// isSplit reports whether the block is not its segment's only block.
func (b *block) isSplit() bool { return b.prev != nil || b.next != nil }

// kind is the pool of the block's segment.
func (b *block) kind() poolKind { return b.seg.kind }

// allocatable reports whether b may be merged or handed out: not allocated and with no
// pending stream use.
func (b *block) allocatable() bool {
	return b != nil && !b.allocated && b.eventCount == 0 && len(b.streamUses) == 0
}

// segment is one raw allocation from the device, or the reserved address range of an
// expandable segment. All fields are guarded by Allocator.mu.
type segment struct {
	// base and size are the raw allocation, or the whole reservation.
	base device.Ptr
	size int64
	// stream is the stream whose requests created the segment; ss its pools.
	stream device.Stream
	ss     *streamState
	kind   poolKind
	// head is the block at base.
	head *block
	// index is the segment's position in Allocator.segments.
	index int
	// expandable marks a reserved range that is mapped page by page.
	expandable bool
	// page is the unit of mapping of an expandable segment (Allocator.pageSize).
	page int64
	// takes counts the blocks taken from the segment's free blocks (TrimIdle trims no
	// page of a segment that has been used since it saw the page free).
	takes uint64
	// extents are the ranges of the Map calls of an expandable segment that are mapped,
	// as offsets from base, sorted; they tile its mapped space. A range is unmapped
	// whole, by one Unmap (the device's rule). Under PyTorch's policy each is a page.
	extents []extent
}

// extent is one Map call's range [lo, hi) of an expandable segment, offsets from its
// base.
type extent struct{ lo, hi device.Ptr }

// extentAt returns the index of the first extent that ends after off.
func (seg *segment) extentAt(off device.Ptr) int {
	return sort.Search(len(seg.extents), func(i int) bool { return seg.extents[i].hi > off })
}

// addExtent records that [lo, hi) was mapped by one call.
func (seg *segment) addExtent(lo, hi device.Ptr) {
	i := seg.extentAt(lo)
	seg.extents = slices.Insert(seg.extents, i, extent{lo, hi})
}

// removeExtent forgets the extent that starts at lo, just unmapped.
func (seg *segment) removeExtent(lo device.Ptr) {
	i := seg.extentAt(lo)
	if i == len(seg.extents) || seg.extents[i].lo != lo {
		panic("alloc: internal error: unmapping a range that no Map call mapped")
	}
	seg.extents = slices.Delete(seg.extents, i, i+1)
}

// extentEnd returns the end of the extent that starts at lo.
func (seg *segment) extentEnd(lo device.Ptr) device.Ptr { return seg.extents[seg.extentAt(lo)].hi }

// extentStart returns the start of the extent that holds off.
func (seg *segment) extentStart(off device.Ptr) device.Ptr { return seg.extents[seg.extentAt(off)].lo }

// extentsWithin returns the first and past the last offset of the contiguous extents
// that lie wholly inside [lo, hi), from the first that starts at lo or above; lo == hi
// when there is none.
func (seg *segment) extentsWithin(lo, hi device.Ptr) (device.Ptr, device.Ptr) {
	i := seg.extentAt(lo)
	for i < len(seg.extents) && seg.extents[i].lo < lo {
		i++
	}
	first, end := device.Ptr(0), device.Ptr(0)
	for ; i < len(seg.extents) && seg.extents[i].hi <= hi; i++ {
		e := seg.extents[i]
		if end == 0 {
			first = e.lo
		} else if e.lo != end {
			break
		}
		end = e.hi
	}
	if end == 0 {
		return lo, lo
	}
	return first, end
}

// streamState holds the pools of one stream: PyTorch keys its free sets by stream
// first, so a stream's blocks are a contiguous range of each pool; here each stream
// owns its range. Guarded by Allocator.mu.
type streamState struct {
	stream device.Stream
	// longLived marks the planned policy's pools of the stream's long-lived allocations
	// (Lifetime hints), kept apart from the default pools' segments.
	longLived bool
	// pool is the private pool the state belongs to, nil for the default pools.
	pool *Pool
	// free holds the cached free (mapped) blocks, indexed by poolKind.
	free [3]freeSet
	// unmapped holds the unmapped blocks of this stream's expandable segments, by
	// poolKind, sorted by address.
	unmapped [3][]*block
	// fence tells which free blocks of the state's segments the device is done with
	// (the planned policy: fence.go).
	fence fence
}

// newBlock returns a zeroed block, reusing a released one when there is one.
func (a *Allocator) newBlock() *block {
	if n := len(a.spareBlocks); n > 0 {
		b := a.spareBlocks[n-1]
		a.spareBlocks = a.spareBlocks[:n-1]
		return b
	}
	return &block{}
}

// dropBlock keeps b for reuse.
func (a *Allocator) dropBlock(b *block) {
	uses := b.streamUses[:0]
	*b = block{streamUses: uses}
	a.spareBlocks = append(a.spareBlocks, b)
}

// spliceAfter links nb into b's segment right after b.
func spliceAfter(b, nb *block) {
	nb.prev, nb.next = b, b.next
	if b.next != nil {
		b.next.prev = nb
	}
	b.next = nb
}

// spliceBefore links nb into b's segment right before b.
func spliceBefore(b, nb *block) {
	nb.prev, nb.next = b.prev, b
	if b.prev != nil {
		b.prev.next = nb
	} else {
		b.seg.head = nb
	}
	b.prev = nb
}
