package alloc

import (
	"errors"
	"fmt"
	"sort"

	"github.com/subletml/sublet/device"
)

// Expandable segments (PyTorch's expandable_segments:True): one reserved address range
// per (pool, stream), 1.125 × the device's memory, backed page by page (2 MiB pages for
// the small pool, 20 MiB for the large) as requests need. Pages are mapped one Map call
// each so that any page can be unmapped alone. Mapping and unmapping count in
// ReservedBytes, NumDeviceAlloc and NumDeviceFree (once per map or unmap step, whatever
// its number of pages), never in Segment or InactiveSplit.

// pageSize is the mapping unit of an expandable segment of pool k. Under PyTorch's
// policy: 2 MiB for the small pool, 20 MiB for the large. Under the planned one, whose
// pages go where they are needed: 2 MiB for the large pool, and for the small pool the
// finer unit the device allows (smallPage).
func (a *Allocator) pageSize(k poolKind) int64 {
	switch {
	case a.plan != nil && k == smallPool:
		return a.smallPage
	case k == smallPool || a.plan != nil:
		return SmallBuffer
	}
	return LargeBuffer
}

// plannedSmallPage is the planned policy's page for the small pool on a device of
// granularity g (a divisor of 2 MiB): g rounded up to a multiple of 64 KiB where that
// still divides 2 MiB, else 2 MiB. With 2 MiB pages a small pool's live blocks of
// 512 B-1 MiB leave partly used pages at every hole between them: small_churn's 24.1 MiB
// at its peak need 28 MiB of pages (1.164), and never less than 26 (1.079). On the cpu
// device (4 KiB pages) 64 KiB pages bring it to 1.036 for 28 times the map steps of
// 2 MiB ones; 16 KiB pages to 1.009 for 60 times, 256 KiB ones only to 1.122
// (docs/allocator.md). On a GPU and on sim, whose granularity is 2 MiB, it stays 2 MiB.
func plannedSmallPage(g int64) int64 {
	if p := (smallPageMin + g - 1) / g * g; SmallBuffer%p == 0 {
		return p
	}
	return SmallBuffer
}

// extentGrid is the alignment and the largest size of one Map call of the planned
// policy's large pool. Unmapping takes whole extents only, so larger ones cost
// reclaimable memory; smaller ones cost driver calls. On the committed traces
// (docs/allocator.md) 16 MiB cuts the calls 5-8 times against 2 MiB, and peak reserved
// stays within 5% of peak allocated on each (with 32 MiB oversize reaches 1.07; single
// extents per run, 1.30).
const extentGrid = 16 << 20

// smallPageMin is the smallest small-pool page of the planned policy.
const smallPageMin = 64 << 10

// tryAllocateExpandable is PyTorch's try_allocate_expandable_block: find room for
// r.rounded bytes in this stream's expandable segments of the pool (or make a new
// segment), map the pages it needs, and return the resulting free block, taken out of
// its free set. It returns nil, nil when the device is out of memory; pages mapped
// before that stay mapped, as free blocks.
func (a *Allocator) tryAllocateExpandable(r *request) (*block, error) {
	c, err := a.findExpandableBlock(r)
	if err != nil {
		return nil, err
	}
	return a.mapRun(r, c)
}

// mapRun maps the pages r needs in the run of unallocated blocks starting at c
// (findExpandableBlock's) and returns the resulting free block, out of its free set;
// nil, nil when the device is out of memory.
func (a *Allocator) mapRun(r *request, c *block) (*block, error) {
	if a.plan != nil && !a.hasRoomFor(r, c) {
		return nil, nil
	}
	if !c.mapped {
		if ok, err := a.mapBlock(r, c, min(c.size, r.rounded)); !ok {
			return nil, err
		}
	}
	// c is now free and mapped, followed by unmapped space where it is too small.
	for c.size < r.rounded {
		n := c.next
		if ok, err := a.mapBlock(r, n, min(r.rounded-c.size, n.size)); !ok {
			return nil, err
		}
		c = n // n absorbed c when it was mapped
	}
	c.seg.ss.free[c.kind()].remove(c)
	return c, nil
}

// hasRoomFor reports whether the device may have the new pages r needs from c beyond
// the held ones (move.go), asking it (MemInfo) when they are many: a run mapped until
// the device refuses is unmapped again, two calls per extent for nothing. It reports
// true when the device cannot tell.
func (a *Allocator) hasRoomFor(r *request, c *block) bool {
	need := pagesToMap(c, r.rounded) - a.heldBytes()
	if need < roomCheckMin {
		return true
	}
	free, _, err := a.dev.MemInfo()
	if err != nil || need <= free {
		return true
	}
	r.devErr = fmt.Errorf("%s has %d bytes free for %d bytes of pages: %w", a.dev.Name(), free, need, device.ErrOutOfMemory)
	return false
}

// roomCheckMin is the bytes of new pages from which the planned policy asks the device
// for its free memory before mapping them: four Map calls or more, and as many Unmaps to
// undo them.
const roomCheckMin = 4 * extentGrid

// findExpandableBlock is PyTorch's find_expandable_block: the lowest-address unmapped
// block of this (pool, stream), together with a free block right before it, whose run
// of unallocated blocks holds r.rounded bytes; otherwise the whole unmapped range of a
// new segment.
func (a *Allocator) findExpandableBlock(r *request) (*block, error) {
	for _, c := range r.ss.unmapped[r.kind] {
		if c, ok := expandableRun(c, r.rounded); ok {
			return c, nil
		}
	}
	page := a.pageSize(r.kind)
	// PyTorch reserves page × ceil((total + total/8) / page): the extra eighth lets
	// holes left by unmapping be refilled further up.
	size := (a.total + a.total/8 + page - 1) / page * page
	base, err := a.vm.Reserve(size)
	if err != nil {
		return nil, fmt.Errorf("reserving %d bytes of address space for an expandable segment: %w", size, err)
	}
	seg := a.addSegment(&segment{base: base, size: size, stream: r.ss.stream, ss: r.ss, kind: r.kind, expandable: true, page: page})
	b := a.newBlock()
	b.addr, b.size, b.seg = base, size, seg
	seg.head = b
	a.insertUnmapped(b)
	return b, nil
}

// expandableRun returns the run of unallocated blocks that unmapped block c offers: c,
// or the free block right before it; and whether the run holds rounded bytes.
func expandableRun(c *block, rounded int64) (*block, bool) {
	if c.prev.allocatable() {
		c = c.prev
	}
	var room int64
	for b := c; room < rounded && b.allocatable(); b = b.next {
		room += b.size
	}
	return c, room >= rounded
}

// mapBlock is PyTorch's map_block: back the first size bytes of unmapped block b (whole
// pages) with memory, merge them with free neighbours and put the result in the free
// set. It reports false with a nil error when the device is out of memory; then nothing
// new stays mapped. If a piece cannot be unmapped again after a failure, the pieces below
// it stay mapped and are accounted as free memory, so the allocator's view stays the
// device's.
//
// PyTorch maps one page per Map call, so that any page can be unmapped alone. The
// planned policy maps each aligned 16 MiB of the segment (extentGrid) that a run covers
// whole in one call, the pages at the run's ends one by one: a 1 GiB block costs 64
// calls (and up to 14 for its ends) instead of 512, a block under 16 MiB still maps and
// unmaps page by page, and a free hole can still give back every aligned 16 MiB inside
// it. Its small pool maps page by page, as PyTorch's does.
func (a *Allocator) mapBlock(r *request, b *block, size int64) (bool, error) {
	seg, page := b.seg, b.seg.page
	pages := (size + page - 1) / page
	off := b.addr - seg.base
	var chunk int64
	for i := int64(0); i < pages; i += chunk {
		lo := off + device.Ptr(i*page)
		chunk = 1
		if grid := extentGrid / page; a.plan != nil && seg.kind == largePool && int64(lo)/page%grid == 0 && pages-i >= grid {
			chunk = grid
		}
		err := a.mapExtent(seg.base+lo, chunk*page)
		if err == nil {
			seg.addExtent(lo, lo+device.Ptr(chunk*page))
			continue
		}
		for end := lo; end > off; { // last first: what stays mapped is contiguous from b.addr
			jlo := seg.extentStart(end - 1)
			if uerr := a.vm.Unmap(seg.base+jlo, int64(end-jlo)); uerr != nil {
				a.commitMapped(b, int64(end-off))
				return false, fmt.Errorf("mapping page %#x: %w; unmapping the page %#x mapped before it: %w",
					uintptr(seg.base+lo), err, uintptr(seg.base+jlo), uerr)
			}
			seg.removeExtent(jlo)
			end = jlo
		}
		if errors.Is(err, device.ErrOutOfMemory) {
			r.devErr = err
			return false, nil
		}
		return false, err
	}
	a.commitMapped(b, pages*page)
	return true, nil
}

// commitMapped records that the first mapped bytes (whole pages) of unmapped block b
// are now mapped, by one map step: they become a free block, merged with free
// neighbours, in the free set.
func (a *Allocator) commitMapped(b *block, mapped int64) {
	seg, start := b.seg, b.addr
	a.bookMapped(b, mapped)
	a.stats.NumDeviceAlloc++
	if a.hist != nil {
		a.recordSegment(ActionSegmentMap, start, mapped, seg)
	}
}

// bookMapped is commitMapped without the map step: the accounting of the bytes.
func (a *Allocator) bookMapped(b *block, mapped int64) {
	seg := b.seg
	a.removeUnmapped(b)
	b.mapped, b.freedAt = true, 0
	if mapped < b.size {
		rest := a.newBlock()
		rest.addr, rest.size, rest.seg = b.addr+device.Ptr(mapped), b.size-mapped, seg
		spliceAfter(b, rest)
		a.insertUnmapped(rest)
		b.size = mapped
	}
	a.tryMerge(b, b.prev)
	a.tryMerge(b, b.next)
	a.insertFree(b)
	a.totalAllocated += mapped
	a.stats.ReservedBytes.increase(seg.kind, mapped)
}

// unmapBlock is PyTorch's unmap_block: give back the whole pages inside free block b,
// after the segment's stream has finished with them (under the planned policy, told by
// its fence where it can be: fence.go). The partial pages at either end stay mapped as
// free blocks. If an Unmap fails, the pages unmapped before it are accounted as
// unmapped and the rest of b stays a free block.
func (a *Allocator) unmapBlock(b *block) error {
	lo, hi := wholePages(b)
	if a.plan != nil && lo < hi {
		if err := a.plan.settleForUnmap(b); err != nil {
			return err
		}
		return a.unmapPages(b, lo, hi, false)
	}
	return a.unmapPages(b, lo, hi, true)
}

// wholePages returns the offsets in b's segment of the first and past the last page
// that can be unmapped inside b: the extents (Map calls' ranges) that lie wholly inside
// it, which are contiguous since extents tile the mapped space. Under PyTorch's policy
// every page is an extent.
func wholePages(b *block) (lo, hi device.Ptr) {
	seg := b.seg
	return seg.extentsWithin(b.addr-seg.base, b.addr+device.Ptr(b.size)-seg.base)
}

// unmapPages gives back the pages at offsets [lo, hi) of free block b's segment, whole
// extents inside b, as unmapBlock does. wait synchronizes the segment's stream first;
// false is for a caller that knows the work queued on it before b was freed is done.
func (a *Allocator) unmapPages(b *block, lo, hi device.Ptr, wait bool) error {
	seg := b.seg
	if lo, hi = seg.extentsWithin(lo, hi); lo >= hi {
		return nil
	}
	// Unmapping does not wait for the device, unlike a raw Free.
	if wait {
		if err := a.dev.SynchronizeStream(seg.stream); err != nil {
			return fmt.Errorf("synchronizing stream %d before unmapping: %w", seg.stream, err)
		}
	}
	var uerr error
	for p := lo; p < hi; {
		end := seg.extentEnd(p)
		if err := a.releaseExtent(seg, p, end); err != nil {
			uerr = fmt.Errorf("unmapping page %#x of an expandable segment: %w", uintptr(seg.base+p), err)
			hi = p
			break
		}
		seg.removeExtent(p)
		p = end
	}
	if lo == hi {
		return uerr
	}
	ulo, usize := seg.base+lo, int64(hi-lo)
	seg.ss.free[seg.kind].remove(b)
	if before := int64(ulo - b.addr); before > 0 {
		f := a.newBlock()
		f.addr, f.size, f.seg, f.mapped, f.freedAt = b.addr, before, seg, true, b.freedAt
		spliceBefore(b, f)
		a.insertFree(f)
	}
	if after := b.size - int64(ulo-b.addr) - usize; after > 0 {
		f := a.newBlock()
		f.addr, f.size, f.seg, f.mapped, f.freedAt = ulo+device.Ptr(usize), after, seg, true, b.freedAt
		spliceAfter(b, f)
		a.insertFree(f)
	}
	b.addr, b.size, b.mapped = ulo, usize, false
	a.tryMerge(b, b.prev)
	a.tryMerge(b, b.next)
	a.insertUnmapped(b)
	a.totalAllocated -= usize
	a.stats.ReservedBytes.decrease(seg.kind, usize)
	a.stats.NumDeviceFree++
	if a.hist != nil {
		a.recordSegment(ActionSegmentUnmap, ulo, usize, seg)
	}
	return uerr
}

// releaseExpandableSegment gives back the address range of a segment that is one
// unmapped block.
func (a *Allocator) releaseExpandableSegment(b *block) error {
	seg := b.seg
	if err := a.vm.Unreserve(seg.base, seg.size); err != nil {
		return fmt.Errorf("releasing the address range of an expandable segment: %w", err)
	}
	a.removeUnmapped(b)
	a.removeSegment(seg)
	a.dropBlock(b)
	return nil
}

// insertUnmapped adds unmapped block b to its stream's address-ordered list.
func (a *Allocator) insertUnmapped(b *block) {
	l := &b.seg.ss.unmapped[b.kind()]
	i := sort.Search(len(*l), func(i int) bool { return (*l)[i].addr >= b.addr })
	*l = append(*l, nil)
	copy((*l)[i+1:], (*l)[i:])
	(*l)[i] = b
}

// removeUnmapped removes unmapped block b from its list.
func (a *Allocator) removeUnmapped(b *block) {
	l := &b.seg.ss.unmapped[b.kind()]
	i := sort.Search(len(*l), func(i int) bool { return (*l)[i].addr >= b.addr })
	if i == len(*l) || (*l)[i] != b {
		panic("alloc: internal error: unmapped block missing from its list")
	}
	copy((*l)[i:], (*l)[i+1:])
	(*l)[len(*l)-1] = nil
	*l = (*l)[:len(*l)-1]
}
