package alloc

import (
	"math/bits"

	"github.com/subletml/sublet/device"
)

// freeSet is the set of cached free blocks of one (pool, stream), ordered by
// (size, address): PyTorch's BlockComparatorSize restricted to one stream, so that
// lowerBound(s, 0) is best fit with ties going to the lowest address.
//
// It is a sorted sequence cut into chunks of at most chunkCap entries: searches are two
// binary searches over contiguous memory, and an insert or removal moves at most one
// chunk's entries. Entries copy their block's key so that searches touch no block.
// Every chunk holds an entry but when the set is empty: then it keeps its last chunk
// (a set that goes from one block to none and back, as a segment's one free block
// does at each split and merge, moves no chunk). Guarded by Allocator.mu.
type freeSet struct {
	chunks []*freeChunk
	// n is the number of blocks in the set.
	n int
	// spare holds emptied chunks for reuse, so that the set settles into making no
	// garbage.
	spare []*freeChunk
}

const chunkCap = 64

type freeChunk struct {
	n int
	e [chunkCap]freeEntry
}

type freeEntry struct {
	size int64
	addr device.Ptr
	b    *block
}

// pos is a position in a freeSet: chunk c, entry i. It stays valid until the set is
// modified.
type pos struct{ c, i int }

// lowerBound returns the position of the first block not ordered before (size, addr),
// or end() when there is none. Both searches are branch-free: the comparisons are
// random, so branches would mispredict half the time.
func (s *freeSet) lowerBound(size int64, addr device.Ptr) pos {
	chunks := s.chunks
	if s.n == 0 {
		return s.end()
	}
	// Find the first chunk whose last entry is not before the key.
	c, n := 0, len(chunks)
	for n > 1 {
		half := n >> 1
		ch := chunks[c+half-1]
		c += int(keyBefore(&ch.e[ch.n-1], size, addr)) * half
		n -= half
	}
	if last := chunks[c]; keyBefore(&last.e[last.n-1], size, addr) == 1 {
		return s.end()
	}
	ch := chunks[c]
	i, n := 0, ch.n
	for n > 1 {
		half := n >> 1
		i += int(keyBefore(&ch.e[i+half-1], size, addr)) * half
		n -= half
	}
	return pos{c, i}
}

// keyBefore is 1 when entry e orders before (size, addr), else 0: a 128-bit
// subtraction's borrow.
func keyBefore(e *freeEntry, size int64, addr device.Ptr) uint64 {
	_, borrow := bits.Sub64(uint64(e.addr), uint64(addr), 0)
	_, borrow = bits.Sub64(uint64(e.size), uint64(size), borrow)
	return borrow
}

func (s *freeSet) end() pos { return pos{len(s.chunks), 0} }

func (s *freeSet) isEnd(p pos) bool { return p.c == len(s.chunks) }

func (s *freeSet) at(p pos) *block { return s.chunks[p.c].e[p.i].b }

func (s *freeSet) next(p pos) pos {
	if p.i+1 < s.chunks[p.c].n {
		return pos{p.c, p.i + 1}
	}
	return pos{p.c + 1, 0}
}

// prev returns the position before p; ok is false at the first block (and at the
// end of an empty set).
func (s *freeSet) prev(p pos) (q pos, ok bool) {
	if p.i > 0 {
		return pos{p.c, p.i - 1}, true
	}
	if p.c == 0 || s.n == 0 {
		return p, false
	}
	return pos{p.c - 1, s.chunks[p.c-1].n - 1}, true
}

// insert adds b, which must not be in the set.
func (s *freeSet) insert(b *block) {
	s.n++
	if s.n == 1 {
		if len(s.chunks) == 0 {
			s.chunks = append(s.chunks, s.newChunk())
		}
		ch := s.chunks[0]
		ch.e[0] = freeEntry{b.size, b.addr, b}
		ch.n = 1
		return
	}
	p := s.lowerBound(b.size, b.addr)
	if s.isEnd(p) {
		p = pos{len(s.chunks) - 1, s.chunks[len(s.chunks)-1].n}
	}
	ch := s.chunks[p.c]
	if ch.n == chunkCap {
		// Split the full chunk in two halves and insert into the half that holds p.
		half := s.newChunk()
		half.n = copy(half.e[:], ch.e[chunkCap/2:])
		ch.n = chunkCap / 2
		s.chunks = append(s.chunks, nil)
		copy(s.chunks[p.c+2:], s.chunks[p.c+1:])
		s.chunks[p.c+1] = half
		if p.i > chunkCap/2 {
			ch = half
			p.i -= chunkCap / 2
		}
	}
	copy(ch.e[p.i+1:ch.n+1], ch.e[p.i:ch.n])
	ch.e[p.i] = freeEntry{b.size, b.addr, b}
	ch.n++
}

// removeAt removes the block at p.
func (s *freeSet) removeAt(p pos) {
	s.n--
	ch := s.chunks[p.c]
	if p.i+1 < ch.n {
		copy(ch.e[p.i:], ch.e[p.i+1:ch.n])
	}
	ch.n--
	ch.e[ch.n] = freeEntry{}
	if ch.n == 0 && s.n > 0 {
		copy(s.chunks[p.c:], s.chunks[p.c+1:])
		s.chunks[len(s.chunks)-1] = nil
		s.chunks = s.chunks[:len(s.chunks)-1]
		s.spare = append(s.spare, ch)
	}
}

// remove removes b, which must be in the set with its current size and address.
func (s *freeSet) remove(b *block) {
	p := s.lowerBound(b.size, b.addr)
	if s.isEnd(p) || s.at(p) != b {
		panic("alloc: internal error: free block missing from its free set")
	}
	s.removeAt(p)
}

// replace puts b, at its current key, where old is, which the set holds at key
// (size, addr) (a block b just absorbed, whose key b's no longer matches): in place
// where b's key sorts between old's neighbours, else by a removal and an insert.
func (s *freeSet) replace(old *block, size int64, addr device.Ptr, b *block) {
	p := s.lowerBound(size, addr)
	if s.isEnd(p) || s.at(p) != old {
		panic("alloc: internal error: free block missing from its free set")
	}
	q, hasPrev := s.prev(p)
	n := s.next(p)
	if (!hasPrev || keyBefore(s.entry(q), b.size, b.addr) == 1) && (s.isEnd(n) || keyBefore(s.entry(n), b.size, b.addr) == 0) {
		*s.entry(p) = freeEntry{b.size, b.addr, b}
		return
	}
	s.removeAt(p)
	s.insert(b)
}

// entry is the entry at p.
func (s *freeSet) entry(p pos) *freeEntry { return &s.chunks[p.c].e[p.i] }

func (s *freeSet) newChunk() *freeChunk {
	if n := len(s.spare); n > 0 {
		ch := s.spare[n-1]
		s.spare = s.spare[:n-1]
		return ch
	}
	return new(freeChunk)
}

// appendAll appends the blocks of the set in order to dst.
func (s *freeSet) appendAll(dst []*block) []*block {
	for _, ch := range s.chunks {
		for i := 0; i < ch.n; i++ {
			dst = append(dst, ch.e[i].b)
		}
	}
	return dst
}
