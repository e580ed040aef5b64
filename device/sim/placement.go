package sim

import (
	"fmt"
	"slices"
	"sort"

	"github.com/subletml/sublet/device"
)

// placer chooses the address of each raw allocation (Malloc). Where segments land
// matters: the caching allocator's best fit breaks ties between equal free blocks by
// address, so replay parity with a real GPU needs the driver's placement. Guarded by
// Device.mu.
type placer interface {
	// place returns the address for a new allocation of size bytes.
	place(size int64) (uint64, error)
	// release gives back the range of an allocation place returned.
	release(addr uint64, size int64)
	// unplace takes back the last place, whose allocation failed after all.
	unplace(addr uint64, size int64)
}

// Address layout of the simulated device: Malloc addresses come from the region below
// mallocTop (16 times the capacity, at least mallocMinVA, never below mallocLowest);
// reservations from [reserveBase, reserveTop), below it, so the two never meet.
const (
	mallocTop    = 0x7f00_0000_0000
	mallocMinVA  = 1 << 40
	mallocLowest = 0x4000_0000_0000
	reserveBase  = 0x1000_0000_0000
	reserveTop   = mallocLowest
)

// Placement policy constants, after the H200 driver (see topDown).
const (
	// placeAlign is the alignment and size unit of every placed allocation.
	placeAlign = 2 << 20
	// granule is the unit in which fresh address space is taken for a new allocation.
	granule = 32 << 20
)

// topDown is the default placement, modelled on what the H200's driver was seen to do
// (bench/README.md): allocations are placed top-down, each new one below the previous;
// sizes are rounded up to 2 MiB; a fresh allocation takes a run of whole 32 MiB granules
// (the highest free run that fits, its top granules) and sits at the bottom of the run,
// so large allocations lie at 32 MiB multiples; the leftover of a run above its
// allocation is filled by later allocations that fit (lowest address first), which is how
// a 2 MiB segment lands in an earlier granule. A run goes back to the free address space
// when its last allocation is freed; freed ranges inside a live run are reused the same
// way as leftovers.
//
// Search order for a new allocation: runs from the highest address down, first fit in
// their free ranges; then a fresh run.
type topDown struct {
	// va is the free address space in whole granules.
	va spans
	// runs are the live granule runs, sorted by base.
	runs []*run
}

// run is a block of whole granules taken from va for one or more allocations.
type run struct {
	base, size uint64
	// used is the bytes of live allocations in the run; free is the rest.
	used uint64
	free spans
}

func newTopDown(capacity int64) *topDown {
	// Up to 16 times the capacity: enough address space even if every allocation were
	// 2 MiB alone in a 32 MiB granule.
	va := alignUp(uint64(capacity)*16, granule)
	va = max(va, mallocMinVA)
	va = min(va, mallocTop-mallocLowest)
	return &topDown{va: spans{free: []span{{mallocTop - va, mallocTop}}}}
}

func (t *topDown) place(size int64) (uint64, error) {
	s := alignUp(uint64(size), placeAlign)
	for i := len(t.runs) - 1; i >= 0; i-- {
		r := t.runs[i]
		if a, ok := r.free.takeLow(s, placeAlign); ok {
			r.used += s
			return a, nil
		}
	}
	n := alignUp(s, granule)
	base, ok := t.va.takeHigh(n, granule)
	if !ok {
		return 0, fmt.Errorf("no free address range of %d bytes left (%d bytes free in pieces): %w", n, t.va.bytes(), device.ErrOutOfMemory)
	}
	r := &run{base: base, size: n, used: s}
	if s < n {
		r.free.give(base+s, n-s)
	}
	i := sort.Search(len(t.runs), func(i int) bool { return t.runs[i].base > base })
	t.runs = slices.Insert(t.runs, i, r)
	return base, nil
}

func (t *topDown) unplace(addr uint64, size int64) { t.release(addr, size) }

func (t *topDown) release(addr uint64, size int64) {
	s := alignUp(uint64(size), placeAlign)
	i := sort.Search(len(t.runs), func(i int) bool { return t.runs[i].base > addr }) - 1
	r := t.runs[i]
	r.used -= s
	if r.used == 0 {
		t.runs = slices.Delete(t.runs, i, i+1)
		t.va.give(r.base, r.size)
		return
	}
	r.free.give(addr, s)
}

// recorded hands out the addresses a real driver returned, in the order it returned them
// (Options.Segments), and refuses a replay that diverges from the recording.
type recorded struct {
	segs []Segment
	// next is the index of the next segment to hand out.
	next int
}

func (r *recorded) place(size int64) (uint64, error) {
	if r.next >= len(r.segs) {
		return 0, fmt.Errorf("Malloc of %d bytes asks for segment index %d, but only %d segments were recorded: the replay diverged from the recording", size, r.next, len(r.segs))
	}
	s := r.segs[r.next]
	if s.Size != size {
		return 0, fmt.Errorf("Malloc of %d bytes asks for segment index %d, which was recorded with %d bytes: the replay diverged from the recording", size, r.next, s.Size)
	}
	r.next++
	return uint64(s.Addr), nil
}

func (r *recorded) release(uint64, int64) {}

func (r *recorded) unplace(uint64, int64) { r.next-- }
