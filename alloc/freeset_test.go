package alloc

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/subletml/sublet/device"
)

// freeSet against a sorted slice under random inserts, removals and searches, with
// enough blocks to split and drop many chunks.
func TestFreeSetMatchesSortedSlice(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var s freeSet
	var ref []*block
	cmp := func(x, y *block) int {
		if x.size != y.size {
			return int(x.size - y.size)
		}
		return int(x.addr) - int(y.addr)
	}
	for step := range 6000 {
		grow := step < 3000
		if len(ref) > 0 && (r.IntN(3) == 0 || !grow && r.IntN(2) == 0) {
			i := r.IntN(len(ref))
			s.remove(ref[i])
			ref = slices.Delete(ref, i, i+1)
		} else {
			b := &block{size: int64(1+r.IntN(50)) * 512, addr: device.Ptr(r.IntN(1<<20)) << 9}
			if _, found := slices.BinarySearchFunc(ref, b, cmp); found {
				continue
			}
			s.insert(b)
			i, _ := slices.BinarySearchFunc(ref, b, cmp)
			ref = slices.Insert(ref, i, b)
		}
		require.Equal(t, len(ref), s.n)
		// Walk forwards and backwards.
		if step%7 == 0 {
			got := s.appendAll(nil)
			require.Len(t, got, len(ref))
			for i := range ref {
				require.Same(t, ref[i], got[i], "step %d: position %d", step, i)
			}
			p, ok := s.prev(s.end())
			for i := len(ref) - 1; i >= 0; i-- {
				require.True(t, ok)
				require.Same(t, ref[i], s.at(p))
				p, ok = s.prev(p)
			}
			require.False(t, ok)
		}
		// Searches for random keys, present or not.
		for range 4 {
			key := &block{size: int64(r.IntN(52)) * 512, addr: device.Ptr(r.IntN(1<<20)) << 9}
			i, _ := slices.BinarySearchFunc(ref, key, cmp)
			p := s.lowerBound(key.size, key.addr)
			if i == len(ref) {
				require.True(t, s.isEnd(p))
				continue
			}
			require.Same(t, ref[i], s.at(p), "step %d: lowerBound(%d, %#x)", step, key.size, key.addr)
			if i+1 < len(ref) {
				require.Same(t, ref[i+1], s.at(s.next(p)))
			} else {
				require.True(t, s.isEnd(s.next(p)))
			}
		}
	}
	require.Greater(t, len(s.spare), 0, "emptied chunks were kept for reuse")
}

// A set that empties keeps its last chunk: searching it finds nothing, nothing
// precedes its end, and the next insert fills the same chunk, so that a segment's one
// free block going out at a split and back at a merge moves no chunk.
func TestFreeSetKeepsItsLastChunk(t *testing.T) {
	var s freeSet
	a, b := &block{size: 512, addr: 1 << 9}, &block{size: 1024, addr: 2 << 9}
	s.insert(a)
	ch := s.chunks[0]
	for range 3 {
		s.remove(a)
		require.Equal(t, 0, s.n)
		require.Equal(t, []*freeChunk{ch}, s.chunks, "the emptied chunk stays")
		require.Empty(t, s.spare)
		require.True(t, s.isEnd(s.lowerBound(0, 0)))
		_, ok := s.prev(s.end())
		require.False(t, ok, "nothing before the end of an empty set")
		require.Empty(t, s.appendAll(nil))
		s.insert(b)
		s.insert(a)
		require.Equal(t, []*freeChunk{ch}, s.chunks, "refilled in place")
		require.Equal(t, []*block{a, b}, s.appendAll(nil))
		require.Equal(t, a, s.at(s.lowerBound(0, 0)))
		s.remove(b)
	}
}

// replace puts a block where another was, in place when its key sorts there and by a
// removal and an insert when it does not; either way the set stays in order.
func TestFreeSetReplace(t *testing.T) {
	var s freeSet
	bs := make([]*block, 5)
	for i := range bs {
		bs[i] = &block{size: int64(i+1) * 1024, addr: device.Ptr(i+1) << 20}
		s.insert(bs[i])
	}
	ch := s.chunks[0]
	grown := &block{size: 3*1024 + 512, addr: 1 << 9} // between bs[2] and bs[3]
	s.replace(bs[2], bs[2].size, bs[2].addr, grown)
	require.Equal(t, []*block{bs[0], bs[1], grown, bs[3], bs[4]}, s.appendAll(nil))
	require.Same(t, grown, ch.e[2].b, "in place")

	moved := &block{size: 9 * 1024, addr: 1 << 9} // past bs[4]
	s.replace(bs[1], bs[1].size, bs[1].addr, moved)
	require.Equal(t, []*block{bs[0], grown, bs[3], bs[4], moved}, s.appendAll(nil))
	require.Equal(t, 5, s.n)

	first := &block{size: 512, addr: 7 << 20} // before bs[0], replacing bs[3]
	s.replace(bs[3], bs[3].size, bs[3].addr, first)
	require.Equal(t, []*block{first, bs[0], grown, bs[4], moved}, s.appendAll(nil))
	require.Panics(t, func() { s.replace(bs[3], bs[3].size, bs[3].addr, first) }, "bs[3] is gone")
}
