package alloc

import (
	"cmp"
	"slices"

	"github.com/subletml/sublet/device"
)

// Page stitching (the planned policy, on devices with virtual memory management): when
// no cached block holds a request, the pages it needs are mapped into the stream's
// address range where free and unmapped space together hold it, as expandable segments
// do; but first, whole free pages elsewhere (in holes between live blocks, of any pool
// and stream) are unmapped, as many as keep reserved memory at its high-water mark. So
// reserved memory grows only when the live blocks' pages fill it, whatever the order
// of sizes. The device's Map and Unmap create and release physical memory, so a page
// "moves" by an unmap and a map (both counted in num_device_free and num_device_alloc);
// on a device.Remapper the device moves the memory instead, in one call (move.go), and
// a hole's pages are unmapped without waiting for their stream where its fence says
// the device is done with them (fence.go).

// runEnd returns the end of the run of blocks from c that r's rounded size covers: the
// blocks mapRun maps or takes.
func runEnd(c *block, rounded int64) device.Ptr {
	end, covered := c.addr, int64(0)
	for b := c; b != nil && covered < rounded; b = b.next {
		covered += b.size
		end = b.addr + device.Ptr(b.size)
	}
	return end
}

// pagesToMap returns the bytes of pages mapRun would map for rounded bytes from c.
func pagesToMap(c *block, rounded int64) int64 {
	var need, covered int64
	for b := c; b != nil && covered < rounded; b = b.next {
		take := min(b.size, rounded-covered)
		if !b.mapped {
			page := b.seg.page
			take = (take + page - 1) / page * page
			need += take
		}
		covered += take
	}
	return need
}

// leastMappingRun is findExpandableBlock choosing, among the runs of free and unmapped
// blocks that hold r, the one that needs the fewest new pages (the lowest of those),
// rather than the lowest.
func (a *Allocator) leastMappingRun(r *request) (*block, error) {
	var best *block
	var bestNeed int64
	for _, c := range r.ss.unmapped[r.kind] {
		c, ok := expandableRun(c, r.rounded)
		if !ok {
			continue
		}
		if need := pagesToMap(c, r.rounded); best == nil || need < bestNeed {
			best, bestNeed = c, need
		}
	}
	if best != nil {
		return best, nil
	}
	return a.findExpandableBlock(r)
}

// pageVictims returns the free blocks of the default pools' expandable segments that
// hold whole pages, none inside [lo, hi), highest address first, and the bytes of those
// pages.
func (a *Allocator) pageVictims(lo, hi device.Ptr) ([]*block, int64) {
	var out []*block
	var bytes int64
	for _, b := range a.freeExpandable() {
		if b.addr < hi && b.addr+device.Ptr(b.size) > lo {
			continue
		}
		if pl, ph := wholePages(b); pl < ph {
			out = append(out, b)
			bytes += int64(ph - pl)
		}
	}
	slices.SortFunc(out, func(x, y *block) int { return cmp.Compare(y.addr, x.addr) })
	return out, bytes
}

// reclaimPages unmaps whole pages of victims, the top pages of each first, until at
// least bytes are unmapped or none is left. It returns the bytes unmapped.
func (a *Allocator) reclaimPages(victims []*block, bytes int64) (int64, error) {
	var done int64
	for _, b := range victims {
		if done >= bytes {
			break
		}
		lo, hi := wholePages(b)
		// The top extents that hold the pages still wanted.
		if want := bytes - done; int64(hi-lo) > want {
			lo = max(lo, b.seg.extentStart(hi-device.Ptr(want)))
		}
		if err := a.plan.settleForUnmap(b); err != nil {
			return done, err
		}
		before := a.totalAllocated
		err := a.unmapPages(b, lo, hi, false)
		done += before - a.totalAllocated
		if err != nil {
			return done, err
		}
	}
	return done, nil
}

// stitch makes room for r by mapping pages into the unmapped space of its stream's
// expandable segments of its pool, after unmapping whole free pages elsewhere so that
// reserved memory stays within limit. Where the free pages cannot make up for the new
// ones, strict refuses (nil, nil) before changing anything; otherwise reserved memory
// grows by the rest. The block returned is free, mapped and out of its free set; nil,
// nil also when the memory fraction or the device refuses the pages.
func (a *Allocator) stitch(r *request, limit int64, strict bool) (b *block, err error) {
	a.holdExtents()
	defer func() {
		if rerr := a.releaseHeld(); rerr != nil && err == nil {
			// The block, mapped, stays free.
			if b != nil {
				a.insertFree(b)
			}
			b, err = nil, rerr
		}
	}()
	c, err := a.leastMappingRun(r)
	if err != nil {
		return nil, err
	}
	need := pagesToMap(c, r.rounded)
	if over := a.totalAllocated + need - limit; over > 0 && len(a.captures) == 0 {
		victims, avail := a.pageVictims(c.addr, runEnd(c, r.rounded))
		if strict && avail < over {
			return nil, nil
		}
		if _, err := a.reclaimPages(victims, over); err != nil {
			return nil, err
		}
		// Unmapping a neighbour of the run merges address space into it, and unmapping
		// a hole between live blocks makes it a run of its own: find it again (it needs
		// no more pages than before).
		if c, err = a.leastMappingRun(r); err != nil {
			return nil, err
		}
		need = pagesToMap(c, r.rounded)
	} else if over > 0 && strict {
		return nil, nil
	}
	if a.fractionSet && a.totalAllocated+need > a.allowed {
		return nil, nil
	}
	return a.mapRun(r, c)
}
