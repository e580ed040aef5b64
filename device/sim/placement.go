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
	// freshTop is where fresh address space starts, going down.
	freshTop = mallocTop - 512<<20
)

// contextPieces are the free pieces the H200's driver has in address space it already
// holds when a process's first allocation comes, relative to freshTop: a 2 MiB piece
// 414 MiB above it and a 24 MiB piece 488 MiB above it (driver 580, CUDA 13, seen
// identically in all 49 torch_replay.py runs of 2026-11-30).
var contextPieces = [...]span{
	{freshTop + 414<<20, freshTop + 416<<20},
	{freshTop + 488<<20, freshTop + 512<<20},
}

// topDown is the default placement, calibrated on the segment addresses the H200's
// driver returned to PyTorch (testdata/oracle; TestTopDownMatchesTheH200 and
// TestTopDownMatchesTheH200AcrossFrees):
//
//   - Sizes round up to 2 MiB.
//   - The driver first looks for room in the address space it holds: the runs (below),
//     most recently taken first, then the context's run with its two free pieces
//     (contextPieces). Inside a run it takes the smallest free piece that fits (the
//     lowest of equal ones) and places the allocation at the piece's bottom.
//   - Otherwise it takes a fresh run of whole 32 MiB granules: from the highest free
//     range below freshTop that holds the run plus one more granule (the driver maps
//     with room to align), the top granules. The allocation sits at the run's bottom;
//     the rest of the run is a free piece for later allocations. So large allocations
//     lie at 32 MiB multiples, each new one below the previous, and small ones fill the
//     leftovers of recent runs.
//   - A run whose last allocation is freed goes back to the free address space. The
//     context's run is never given back.
type topDown struct {
	// va is the free address space below freshTop, in whole granules.
	va spans
	// runs are the held runs sorted by base (to find a freed address's run); recent are
	// the same runs in the order they were taken (the context's run first).
	runs, recent []*run
}

// run is a range of address space the driver holds: a block of whole granules taken from
// va, or the context's range.
type run struct {
	base, size uint64
	// used is the bytes of live allocations in the run (and, for the context's run, of
	// what the context keeps); free is the rest.
	used uint64
	free spans
	// context marks the context's run, which is never given back.
	context bool
}

func newTopDown(capacity int64) *topDown {
	// Up to 16 times the capacity: enough address space even if every allocation were
	// 2 MiB alone in a 32 MiB granule.
	va := alignUp(uint64(capacity)*16, granule)
	va = max(va, mallocMinVA)
	va = min(va, freshTop-mallocLowest)
	ctx := &run{base: contextPieces[0].lo, context: true}
	ctx.size = contextPieces[len(contextPieces)-1].hi - ctx.base
	ctx.used = ctx.size
	for _, p := range contextPieces {
		ctx.free.give(p.lo, p.hi-p.lo)
		ctx.used -= p.hi - p.lo
	}
	return &topDown{va: spans{free: []span{{freshTop - va, freshTop}}}, runs: []*run{ctx}, recent: []*run{ctx}}
}

func (t *topDown) place(size int64) (uint64, error) {
	s := alignUp(uint64(size), placeAlign)
	for i := len(t.recent) - 1; i >= 0; i-- {
		r := t.recent[i]
		if a, ok := r.free.takeBest(s, placeAlign); ok {
			r.used += s
			return a, nil
		}
	}
	n := alignUp(s, granule)
	base, ok := t.va.takeHigh(n, n+granule, granule)
	if !ok {
		return 0, fmt.Errorf("no free address range of %d bytes left (%d bytes free in pieces): %w", n+granule, t.va.bytes(), device.ErrOutOfMemory)
	}
	r := &run{base: base, size: n, used: s}
	if s < n {
		r.free.give(base+s, n-s)
	}
	i := sort.Search(len(t.runs), func(i int) bool { return t.runs[i].base > base })
	t.runs = slices.Insert(t.runs, i, r)
	t.recent = append(t.recent, r)
	return base, nil
}

func (t *topDown) unplace(addr uint64, size int64) { t.release(addr, size) }

func (t *topDown) release(addr uint64, size int64) {
	s := alignUp(uint64(size), placeAlign)
	i := sort.Search(len(t.runs), func(i int) bool { return t.runs[i].base > addr }) - 1
	r := t.runs[i]
	r.used -= s
	if r.used == 0 && !r.context {
		t.runs = slices.Delete(t.runs, i, i+1)
		t.recent = slices.DeleteFunc(t.recent, func(x *run) bool { return x == r })
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
