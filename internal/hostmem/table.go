package hostmem

import (
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/subletml/sublet/device"
)

// Table records a device's live address ranges (Malloc allocations and VirtualMemory
// reservations with their mapped pieces) and resolves a device range to the host bytes
// behind it. A range without host memory (mem == nil: the simulated device without a
// backing store) is still checked, and resolves to nil bytes.
//
// Lookups (Resolve, CheckMap) take no lock: they read the published list of regions,
// which is never changed once published (an atomic load and a binary search; every
// op's result asks, so the lookup costs no atomic read-modify-write). Mutations
// serialize on the table's lock and publish a new list, with a new region where a
// region's pieces change; a device keeps its own lock around the check-then-act
// sequences it needs (check a Map, charge it, then Map).
type Table struct {
	mu sync.Mutex // serializes mutations
	// regions is the published list, sorted by base, never overlapping; it and the
	// regions in it are never changed once published. nil: none.
	regions atomic.Pointer[[]*region]
}

// region is one Malloc allocation or one reservation, never changed once published
// (Map and Unmap publish a copy with the new pieces).
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

// list is the published list of regions.
func (t *Table) list() []*region {
	if p := t.regions.Load(); p != nil {
		return *p
	}
	return nil
}

// publish makes rs, a list no one else holds, the table's; t.mu is held.
func (t *Table) publish(rs []*region) { t.regions.Store(&rs) }

// find returns the index of the region of rs containing p, or -1.
func find(rs []*region, p device.Ptr) int {
	i := sort.Search(len(rs), func(i int) bool { return rs[i].end() > p })
	if i < len(rs) && rs[i].base <= p {
		return i
	}
	return -1
}

// insert adds r, refusing an overlap with a live region.
func (t *Table) insert(r *region) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	rs := t.list()
	i := sort.Search(len(rs), func(i int) bool { return rs[i].end() > r.base })
	if i < len(rs) && rs[i].base < r.end() {
		o := rs[i]
		return fmt.Errorf("range [%#x, +%d) overlaps the live range [%#x, +%d)", uintptr(r.base), r.size, uintptr(o.base), o.size)
	}
	t.publish(slices.Insert(slices.Clone(rs), i, r))
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
	rs := t.list()
	i := find(rs, base)
	if i < 0 || rs[i].base != base || rs[i].reserved {
		return 0, nil, fmt.Errorf("%#x is not the start of a live allocation (freed twice, or never allocated)", uintptr(base))
	}
	r := rs[i]
	t.publish(slices.Delete(slices.Clone(rs), i, i+1))
	return r.size, r.mem, nil
}

// RemoveReservation forgets the reservation [base, base+size), which must have nothing
// mapped, and returns its host memory for the caller to release.
func (t *Table) RemoveReservation(base device.Ptr, size int64) (mem []byte, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	rs := t.list()
	i := find(rs, base)
	if i < 0 || rs[i].base != base || !rs[i].reserved {
		return nil, fmt.Errorf("%#x is not the start of a live reservation (released twice, or never reserved)", uintptr(base))
	}
	r := rs[i]
	if r.size != size {
		return nil, fmt.Errorf("reservation at %#x has %d bytes, not %d: unreserve it with the size Reserve was given", uintptr(base), r.size, size)
	}
	if len(r.pieces) > 0 {
		p := r.pieces[0]
		return nil, fmt.Errorf("reservation at %#x still has %d mapped pieces (first [%#x, +%d)): unmap them first", uintptr(base), len(r.pieces), uintptr(base)+uintptr(p.off), p.size)
	}
	t.publish(slices.Delete(slices.Clone(rs), i, i+1))
	return r.mem, nil
}

// CheckMap reports why [addr, addr+size) cannot be mapped: it must lie inside one
// reservation, start and end on multiples of align, and overlap no mapped piece.
func (t *Table) CheckMap(addr device.Ptr, size, align int64) error {
	_, _, err := mappable(t.list(), addr, size, align)
	return err
}

// mappable returns the index in rs of the reservation and the insertion index of the
// new piece in its pieces.
func mappable(rs []*region, addr device.Ptr, size, align int64) (int, int, error) {
	if size <= 0 || size%align != 0 || int64(addr)%align != 0 {
		return 0, 0, fmt.Errorf("range [%#x, +%d) is not whole granules of %d bytes", uintptr(addr), size, align)
	}
	i := find(rs, addr)
	if i < 0 || !rs[i].reserved {
		return 0, 0, fmt.Errorf("%#x is not inside a reserved range: Reserve first", uintptr(addr))
	}
	r := rs[i]
	off := int64(addr - r.base)
	if size > r.size-off {
		return 0, 0, fmt.Errorf("range [%#x, +%d) runs past the end of the reservation [%#x, +%d)", uintptr(addr), size, uintptr(r.base), r.size)
	}
	j := sort.Search(len(r.pieces), func(j int) bool { return r.pieces[j].off+r.pieces[j].size > off })
	if j < len(r.pieces) && r.pieces[j].off < off+size {
		p := r.pieces[j]
		return 0, 0, fmt.Errorf("range [%#x, +%d) overlaps the mapped piece [%#x, +%d)", uintptr(addr), size, uintptr(r.base)+uintptr(p.off), p.size)
	}
	return i, j, nil
}

// Map records [addr, addr+size) as mapped (see CheckMap) and commits its host memory
// when the reservation has some. A failed commit wraps device.ErrOutOfMemory and leaves
// nothing mapped.
func (t *Table) Map(addr device.Ptr, size, align int64) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	rs := t.list()
	i, j, err := mappable(rs, addr, size, align)
	if err != nil {
		return err
	}
	r := rs[i]
	off := int64(addr - r.base)
	if r.mem != nil {
		if err := Commit(r.mem[off : off+size]); err != nil {
			return fmt.Errorf("%w: %w", device.ErrOutOfMemory, err)
		}
	}
	t.replace(rs, i, slices.Insert(slices.Clone(r.pieces), j, piece{off, size}))
	return nil
}

// replace publishes rs with its region i given pieces; t.mu is held.
func (t *Table) replace(rs []*region, i int, pieces []piece) {
	r := *rs[i]
	r.pieces = pieces
	rs = slices.Clone(rs)
	rs[i] = &r
	t.publish(rs)
}

// Unmap forgets the mapped piece [addr, addr+size), which must be exactly a range given
// to Map, and decommits its host memory.
func (t *Table) Unmap(addr device.Ptr, size int64) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	rs := t.list()
	i := find(rs, addr)
	if i < 0 || !rs[i].reserved {
		return fmt.Errorf("%#x is not inside a reserved range", uintptr(addr))
	}
	r := rs[i]
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
	t.replace(rs, i, slices.Delete(slices.Clone(r.pieces), j, j+1))
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
	rs := t.list()
	i := find(rs, p)
	if i < 0 {
		return nil, fmt.Errorf("%#x is not inside any live allocation", uintptr(p))
	}
	r := rs[i]
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
