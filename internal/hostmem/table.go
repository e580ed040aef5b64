package hostmem

import (
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/subletml/sublet/device"
)

// Table records a device's live address ranges (Malloc allocations and VirtualMemory
// reservations with their mapped pieces) and resolves a device range to the host bytes
// behind it. A range without host memory (mem == nil: the simulated device without a
// backing store) is still checked, and resolves to nil bytes.
//
// Lookups (Resolve) take a read lock and a binary search, so they scale with concurrent
// readers. Mutations serialize on the table's lock; a device keeps its own lock around
// the check-then-act sequences it needs (check a Map, charge it, then Map).
type Table struct {
	mu sync.RWMutex
	// regions is sorted by base and never overlaps. Guarded by mu.
	regions []*region
}

// region is one Malloc allocation or one reservation. Its fields never change after
// insertion except pieces, which is guarded by Table.mu.
type region struct {
	base     device.Ptr
	size     int64
	reserved bool
	// mem is the host memory behind [base, base+size) (at least size bytes), or nil.
	mem []byte
	// pieces are the mapped ranges of a reservation, sorted by offset, never overlapping.
	pieces []piece
}

// piece is a mapped range [off, off+size) inside a reservation.
type piece struct{ off, size int64 }

func (r *region) end() device.Ptr { return r.base + device.Ptr(r.size) }

// find returns the index of the region containing p, or -1.
func (t *Table) find(p device.Ptr) int {
	i := sort.Search(len(t.regions), func(i int) bool { return t.regions[i].end() > p })
	if i < len(t.regions) && t.regions[i].base <= p {
		return i
	}
	return -1
}

// insert adds r, refusing an overlap with a live region.
func (t *Table) insert(r *region) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	i := sort.Search(len(t.regions), func(i int) bool { return t.regions[i].end() > r.base })
	if i < len(t.regions) && t.regions[i].base < r.end() {
		o := t.regions[i]
		return fmt.Errorf("range [%#x, +%d) overlaps the live range [%#x, +%d)", uintptr(r.base), r.size, uintptr(o.base), o.size)
	}
	t.regions = slices.Insert(t.regions, i, r)
	return nil
}

// AddAllocation records a Malloc allocation [base, base+size) backed by mem (or nil).
func (t *Table) AddAllocation(base device.Ptr, size int64, mem []byte) error {
	return t.insert(&region{base: base, size: size, mem: mem})
}

// AddReservation records a reservation [base, base+size) backed by mem (a slice from
// Reserve, or nil). Nothing in it is mapped yet.
func (t *Table) AddReservation(base device.Ptr, size int64, mem []byte) error {
	return t.insert(&region{base: base, size: size, mem: mem, reserved: true})
}

// RemoveAllocation forgets the allocation starting at base and returns its size and host
// memory for the caller to free.
func (t *Table) RemoveAllocation(base device.Ptr) (size int64, mem []byte, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	i := t.find(base)
	if i < 0 || t.regions[i].base != base || t.regions[i].reserved {
		return 0, nil, fmt.Errorf("%#x is not the start of a live allocation (freed twice, or never allocated)", uintptr(base))
	}
	r := t.regions[i]
	t.regions = slices.Delete(t.regions, i, i+1)
	return r.size, r.mem, nil
}

// RemoveReservation forgets the reservation [base, base+size), which must have nothing
// mapped, and returns its host memory for the caller to release.
func (t *Table) RemoveReservation(base device.Ptr, size int64) (mem []byte, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	i := t.find(base)
	if i < 0 || t.regions[i].base != base || !t.regions[i].reserved {
		return nil, fmt.Errorf("%#x is not the start of a live reservation (released twice, or never reserved)", uintptr(base))
	}
	r := t.regions[i]
	if r.size != size {
		return nil, fmt.Errorf("reservation at %#x has %d bytes, not %d: unreserve it with the size Reserve was given", uintptr(base), r.size, size)
	}
	if len(r.pieces) > 0 {
		p := r.pieces[0]
		return nil, fmt.Errorf("reservation at %#x still has %d mapped pieces (first [%#x, +%d)): unmap them first", uintptr(base), len(r.pieces), uintptr(base)+uintptr(p.off), p.size)
	}
	t.regions = slices.Delete(t.regions, i, i+1)
	return r.mem, nil
}

// CheckMap reports why [addr, addr+size) cannot be mapped: it must lie inside one
// reservation, start and end on multiples of align, and overlap no mapped piece.
func (t *Table) CheckMap(addr device.Ptr, size, align int64) error {
	t.mu.RLock()
	defer t.mu.RUnlock()
	_, _, err := t.mappable(addr, size, align)
	return err
}

// mappable returns the reservation and the insertion index of the new piece. Caller
// holds mu.
func (t *Table) mappable(addr device.Ptr, size, align int64) (*region, int, error) {
	if size <= 0 || size%align != 0 || int64(addr)%align != 0 {
		return nil, 0, fmt.Errorf("range [%#x, +%d) is not whole granules of %d bytes", uintptr(addr), size, align)
	}
	i := t.find(addr)
	if i < 0 || !t.regions[i].reserved {
		return nil, 0, fmt.Errorf("%#x is not inside a reserved range: Reserve first", uintptr(addr))
	}
	r := t.regions[i]
	off := int64(addr - r.base)
	if size > r.size-off {
		return nil, 0, fmt.Errorf("range [%#x, +%d) runs past the end of the reservation [%#x, +%d)", uintptr(addr), size, uintptr(r.base), r.size)
	}
	j := sort.Search(len(r.pieces), func(j int) bool { return r.pieces[j].off+r.pieces[j].size > off })
	if j < len(r.pieces) && r.pieces[j].off < off+size {
		p := r.pieces[j]
		return nil, 0, fmt.Errorf("range [%#x, +%d) overlaps the mapped piece [%#x, +%d)", uintptr(addr), size, uintptr(r.base)+uintptr(p.off), p.size)
	}
	return r, j, nil
}

// Map records [addr, addr+size) as mapped (see CheckMap) and commits its host memory
// when the reservation has some. A failed commit wraps device.ErrOutOfMemory and leaves
// nothing mapped.
func (t *Table) Map(addr device.Ptr, size, align int64) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, j, err := t.mappable(addr, size, align)
	if err != nil {
		return err
	}
	off := int64(addr - r.base)
	if r.mem != nil {
		if err := Commit(r.mem[off : off+size]); err != nil {
			return fmt.Errorf("%w: %w", device.ErrOutOfMemory, err)
		}
	}
	r.pieces = slices.Insert(r.pieces, j, piece{off, size})
	return nil
}

// Unmap forgets the mapped piece [addr, addr+size), which must be exactly a range given
// to Map, and decommits its host memory.
func (t *Table) Unmap(addr device.Ptr, size int64) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	i := t.find(addr)
	if i < 0 || !t.regions[i].reserved {
		return fmt.Errorf("%#x is not inside a reserved range", uintptr(addr))
	}
	r := t.regions[i]
	off := int64(addr - r.base)
	j := sort.Search(len(r.pieces), func(j int) bool { return r.pieces[j].off >= off })
	if j == len(r.pieces) || r.pieces[j] != (piece{off, size}) {
		return fmt.Errorf("[%#x, +%d) is not a mapped piece: unmap exactly a range given to Map", uintptr(addr), size)
	}
	if r.mem != nil {
		if err := Decommit(r.mem[off : off+size]); err != nil {
			return err
		}
	}
	r.pieces = slices.Delete(r.pieces, j, j+1)
	return nil
}

// Resolve checks that [p, p+n) (n > 0) lies wholly inside one live allocation, or inside
// one reservation mapped throughout (adjacent pieces may share the range), and returns the
// host bytes behind it: a slice of exactly n bytes, or nil when the range has no host
// memory.
func (t *Table) Resolve(p device.Ptr, n int64) ([]byte, error) {
	if n <= 0 {
		return nil, fmt.Errorf("range [%#x, +%d) is empty", uintptr(p), n)
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	i := t.find(p)
	if i < 0 {
		return nil, fmt.Errorf("%#x is not inside any live allocation", uintptr(p))
	}
	r := t.regions[i]
	off := int64(p - r.base)
	if n > r.size-off {
		return nil, fmt.Errorf("range [%#x, +%d) runs past the end of the live range [%#x, +%d)", uintptr(p), n, uintptr(r.base), r.size)
	}
	if r.reserved {
		j := sort.Search(len(r.pieces), func(j int) bool { return r.pieces[j].off+r.pieces[j].size > off })
		for covered := off; covered < off+n; j++ {
			if j == len(r.pieces) || r.pieces[j].off > covered {
				return nil, fmt.Errorf("range [%#x, +%d) is not mapped throughout: %#x is unmapped", uintptr(p), n, uintptr(r.base)+uintptr(covered))
			}
			covered = r.pieces[j].off + r.pieces[j].size
		}
	}
	if r.mem == nil {
		return nil, nil
	}
	return r.mem[off : off+n : off+n], nil
}

// Bytes implements device.HostMemory over the table: the bytes at [p, p+n), or ok=false
// when the range is not live (see Resolve) or has no host memory.
func (t *Table) Bytes(p device.Ptr, n int64) ([]byte, bool) {
	b, err := t.Resolve(p, n)
	return b, err == nil && b != nil
}
