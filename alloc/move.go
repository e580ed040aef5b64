package alloc

import (
	"errors"
	"fmt"
	"slices"

	"github.com/subletml/sublet/device"
)

// Moving pages (the planned policy, on a device.Remapper): stitching unmaps whole free
// pages in holes and maps as many where the request goes. On a device that can move
// physical memory, the extents it unmaps are held instead of released, and each page or
// extent it then maps takes a held extent of its size (one Remap instead of an Unmap
// and a Map: on cuda no cuMemRelease and cuMemCreate), or no call at all where the run
// lies where the held extent was. The allocator's books, and so
// every decision and statistic, are those of the unmap and the map; only the device
// calls differ. What the stitch does not use (extents of other sizes) is unmapped when
// it ends. All fields are guarded by Allocator.mu.

// heldExtent is an extent of seg at [lo, hi) that the books count unmapped while the
// device still maps it.
type heldExtent struct {
	seg    *segment
	lo, hi device.Ptr
}

func (h heldExtent) addr() device.Ptr { return h.seg.base + h.lo }
func (h heldExtent) size() int64      { return int64(h.hi - h.lo) }

// holdExtents starts holding the extents unmapped from now on, when the device can
// move them.
func (a *Allocator) holdExtents() {
	_, a.holding = a.vm.(device.Remapper)
}

// releaseExtent unmaps the extent [lo, hi) of seg, or holds it.
func (a *Allocator) releaseExtent(seg *segment, lo, hi device.Ptr) error {
	if a.holding {
		a.held = append(a.held, heldExtent{seg, lo, hi})
		return nil
	}
	return a.vm.Unmap(seg.base+lo, int64(hi-lo))
}

// heldBytes returns the bytes of the held extents.
func (a *Allocator) heldBytes() int64 {
	var n int64
	for _, h := range a.held {
		n += h.size()
	}
	return n
}

// mapExtent maps [addr, addr+size) with one call for mapBlock: a held extent that is
// that range stays where it is, else one of that size moves there, else new memory is
// mapped. Held extents that overlap the range are unmapped first. (Unmapping a hole's
// pages can put them in the run the stitch then maps, whole or in part:
// TestStitchUnmapsHeldExtentUnderNewPages shows the second.)
func (a *Allocator) mapExtent(addr device.Ptr, size int64) error {
	move := -1
	for i := 0; i < len(a.held); {
		h := a.held[i]
		switch {
		case h.addr() == addr && h.size() == size:
			a.held = slices.Delete(a.held, i, i+1)
			return nil
		case h.addr() < addr+device.Ptr(size) && addr < h.addr()+device.Ptr(h.size()):
			if err := a.unhold(i); err != nil {
				return err
			}
			continue
		case h.size() == size && move < 0:
			move = i
		}
		i++
	}
	if move < 0 {
		return a.vm.Map(addr, size)
	}
	h := a.held[move]
	if err := a.vm.(device.Remapper).Remap(h.addr(), addr, size); err != nil {
		return fmt.Errorf("moving the pages at %#x to %#x: %w", uintptr(h.addr()), uintptr(addr), err)
	}
	a.held = slices.Delete(a.held, move, move+1)
	return nil
}

// unhold unmaps held extent i. If the device refuses, the books take the extent back as
// mapped free memory, so that they stay the device's.
func (a *Allocator) unhold(i int) error {
	h := a.held[i]
	a.held = slices.Delete(a.held, i, i+1)
	err := a.vm.Unmap(h.addr(), h.size())
	if err != nil {
		a.rebook(h)
		return fmt.Errorf("unmapping page %#x of an expandable segment: %w", uintptr(h.addr()), err)
	}
	return nil
}

// releaseHeld stops holding and unmaps the extents still held.
func (a *Allocator) releaseHeld() error {
	a.holding = false
	var errs []error
	for len(a.held) > 0 {
		errs = append(errs, a.unhold(len(a.held)-1))
	}
	return errors.Join(errs...)
}

// rebook counts held extent h mapped again: a free block, split from the unmapped block
// that holds it.
func (a *Allocator) rebook(h heldExtent) {
	seg := h.seg
	u := seg.head
	for u.addr+device.Ptr(u.size) <= h.addr() {
		u = u.next
	}
	if u.addr < h.addr() {
		v := a.newBlock()
		v.addr, v.size, v.seg = h.addr(), u.size-int64(h.addr()-u.addr), seg
		u.size -= v.size
		spliceAfter(u, v)
		a.insertUnmapped(v)
		u = v
	}
	seg.addExtent(h.lo, h.hi)
	a.bookMapped(u, h.size())
}
