package sim

import (
	"slices"
	"sort"
)

// spans is a set of free address intervals, sorted and coalesced: the free list of one
// region of the simulated address space. Guarded by the owning Device's mu.
type spans struct {
	free []span
}

// span is the free interval [lo, hi).
type span struct{ lo, hi uint64 }

func alignDown(x, a uint64) uint64 { return x &^ (a - 1) }
func alignUp(x, a uint64) uint64   { return (x + a - 1) &^ (a - 1) }

// takeHigh carves size bytes aligned to align out of the highest free interval of at
// least need bytes (need >= size), at that interval's top.
func (s *spans) takeHigh(size, need, align uint64) (uint64, bool) {
	for i := len(s.free) - 1; i >= 0; i-- {
		f := s.free[i]
		if f.hi-f.lo < need {
			continue
		}
		if a := alignDown(f.hi-size, align); a >= f.lo {
			s.carve(i, a, a+size)
			return a, true
		}
	}
	return 0, false
}

// takeLow carves size bytes aligned to align out of the lowest free interval that holds
// them, at that interval's bottom.
func (s *spans) takeLow(size, align uint64) (uint64, bool) {
	for i, f := range s.free {
		if a := alignUp(f.lo, align); a <= f.hi && f.hi-a >= size {
			s.carve(i, a, a+size)
			return a, true
		}
	}
	return 0, false
}

// carve removes [lo, hi) from free interval i, which contains it.
func (s *spans) carve(i int, lo, hi uint64) {
	f := s.free[i]
	switch {
	case f.lo == lo && f.hi == hi:
		s.free = slices.Delete(s.free, i, i+1)
	case f.lo == lo:
		s.free[i].lo = hi
	case f.hi == hi:
		s.free[i].hi = lo
	default:
		s.free[i].hi = lo
		s.free = slices.Insert(s.free, i+1, span{hi, f.hi})
	}
}

// give returns [lo, lo+size), which must not be free, merging it with its neighbours.
func (s *spans) give(lo, size uint64) {
	hi := lo + size
	i := sort.Search(len(s.free), func(i int) bool { return s.free[i].lo >= hi })
	mergeLeft := i > 0 && s.free[i-1].hi == lo
	mergeRight := i < len(s.free) && s.free[i].lo == hi
	switch {
	case mergeLeft && mergeRight:
		s.free[i-1].hi = s.free[i].hi
		s.free = slices.Delete(s.free, i, i+1)
	case mergeLeft:
		s.free[i-1].hi = hi
	case mergeRight:
		s.free[i].lo = lo
	default:
		s.free = slices.Insert(s.free, i, span{lo, hi})
	}
}

// bytes is the total free size.
func (s *spans) bytes() uint64 {
	var n uint64
	for _, f := range s.free {
		n += f.hi - f.lo
	}
	return n
}

// takeBest carves size bytes aligned to align out of the smallest free interval that
// holds them (the lowest of equal ones), at that interval's bottom.
func (s *spans) takeBest(size, align uint64) (uint64, bool) {
	best := -1
	for i, f := range s.free {
		if a := alignUp(f.lo, align); a <= f.hi && f.hi-a >= size {
			if best < 0 || f.hi-f.lo < s.free[best].hi-s.free[best].lo {
				best = i
			}
		}
	}
	if best < 0 {
		return 0, false
	}
	a := alignUp(s.free[best].lo, align)
	s.carve(best, a, a+size)
	return a, true
}
