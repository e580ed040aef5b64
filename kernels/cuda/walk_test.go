package cuda

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
)

// offsetsOf is src/common.cuh's offsets in Go: each operand's element offset of the
// output's element i.
func offsetsOf(w *walk, i int64) [hdrMaxOps]int64 {
	var off [hdrMaxOps]int64
	for d := w.rank - 1; d >= 0; d-- {
		x := i % w.shape[d]
		i /= w.shape[d]
		for k := range w.ops {
			off[k] += x * w.stride[k][d]
		}
	}
	return off
}

// direct is the offset of output element i (row-major over shape) in l broadcast to
// shape: what the kernel must read.
func direct(shape []int, l kernels.Layout, i int) int {
	off := 0
	d := len(shape) - len(l.Shape)
	for j := len(shape) - 1; j >= 0; j-- {
		x := i % shape[j]
		i /= shape[j]
		if j >= d && l.Shape[j-d] != 1 {
			off += x * l.Strides[j-d]
		}
	}
	return off
}

// randomLayout is a layout of shape with random strides (some dense runs, some gaps,
// a permutation), and a random offset.
func randomLayout(r *rand.Rand, shape []int) kernels.Layout {
	n := len(shape)
	perm := r.Perm(n)
	st := make([]int, n)
	s := 1 + r.IntN(2)
	for _, p := range perm {
		st[p] = s
		s *= shape[p] + r.IntN(2)
	}
	return kernels.Layout{Shape: shape, Strides: st, Offset: r.IntN(5)}
}

// TestWalkMatchesLayouts: for random shapes, strides and broadcasts, the merged walk
// of MAX_OPS operands reaches exactly the elements the layouts name, in the output's
// row-major order, for the output and each of three inputs; an immediate has no stride.
func TestWalkMatchesLayouts(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var o operands
	for trial := range 500 {
		rank := 1 + r.IntN(5)
		shape := make([]int, rank)
		for i := range shape {
			shape[i] = 1 + r.IntN(4)
		}
		out := randomLayout(r, shape)
		ins := make([]kernels.Layout, 3)
		for k := range ins {
			// Broadcast: drop leading dimensions, set others to 1.
			in := shape[r.IntN(rank):]
			bs := make([]int, len(in))
			for i, n := range in {
				bs[i] = n
				if r.IntN(3) == 0 {
					bs[i] = 1
				}
			}
			ins[k] = randomLayout(r, bs)
		}
		dst := o.over(dtype.F32, out, int64(out.Span()))
		a := o.over(dtype.F16, ins[0], int64(ins[0].Span()))
		b := o.over(dtype.I64, ins[1], int64(ins[1].Span()))
		c := o.over(dtype.BF16, ins[2], int64(ins[2].Span()))
		var w walk
		require.True(t, newWalk("test", &w, dst, a, b, c, kernels.Scalar(2.5)))
		require.Equal(t, int32(hdrMaxOps), w.ops)
		require.Equal(t, int64(out.Size()), w.size)
		assert.Equal(t, []uint64{addr(dst), addr(a), addr(b), addr(c)}, w.base[:4])
		assert.Equal(t, []int32{int32(dtype.F32), int32(dtype.F16), int32(dtype.I64), int32(dtype.BF16), hdrImm}, w.dtype[:])
		assert.Equal(t, 2.5, w.imm[4])
		for i := range out.Size() {
			off := offsetsOf(&w, int64(i))
			require.Equal(t, int64(direct(shape, kernels.Layout{Shape: shape, Strides: out.Strides}, i)), off[0], "trial %d: output element %d", trial, i)
			require.Equal(t, int64(direct(shape, ins[0], i)), off[1], "trial %d: input 0 element %d", trial, i)
			require.Equal(t, int64(direct(shape, ins[1], i)), off[2], "trial %d: input 1 element %d", trial, i)
			require.Equal(t, int64(direct(shape, ins[2], i)), off[3], "trial %d: input 2 element %d", trial, i)
			require.Zero(t, off[4], "an immediate has no stride")
		}
	}
}

// TestWalkMerges: a contiguous walk is one dimension; a transposed operand keeps two.
func TestWalkMerges(t *testing.T) {
	var o operands
	var w walk
	x := o.dense(dtype.F32, 2, 3, 4)
	newWalk("test", &w, x, x)
	assert.Equal(t, int32(1), w.rank)
	assert.Equal(t, int64(24), w.shape[0])
	tr := o.over(dtype.F32, kernels.Layout{Shape: []int{2, 3, 4}, Strides: []int{12, 1, 3}}, 24)
	newWalk("test", &w, x, tr)
	assert.Equal(t, int32(3), w.rank)
	assert.False(t, w.wide(1<<20))
	assert.True(t, w.wide(1<<31))
	empty := o.dense(dtype.F32, 3, 0)
	assert.False(t, newWalk("test", &w, empty, empty), "no elements: nothing to launch")
}

// TestReductionMatchesCPU: the kept and reduced dimensions split as kernels/cpu splits
// them, each reaching the input elements the layouts name.
func TestReductionMatchesCPU(t *testing.T) {
	var o operands
	src := o.over(dtype.F32, kernels.Layout{Shape: []int{2, 3, 4}, Strides: []int{1, 2, 6}, Offset: 1}, 25)
	for _, c := range []struct {
		dst        []int
		nOut, nRed int64
	}{
		{[]int{1, 3, 1}, 3, 8},
		{[]int{4}, 4, 6},
		{nil, 1, 24},
		{[]int{2, 3, 4}, 24, 1},
	} {
		dst := o.dense(dtype.F32, c.dst...)
		var r reduction
		newReduction("test", &r, dst, src)
		require.Equal(t, c.nOut, r.nOut, "%v", c.dst)
		require.Equal(t, c.nRed, r.nRed, "%v", c.dst)
		// Every (output, reduced) pair reaches a distinct input element, all of them.
		seen := map[int64]bool{}
		for out := range r.nOut {
			base := unravelGo(out, r.krank, r.kshape[:], r.kstride[1][:])
			for e := range r.nRed {
				seen[base+unravelGo(e, r.rrank, r.rshape[:], r.rstride[:])] = true
			}
		}
		assert.Len(t, seen, 24, "%v", c.dst)
	}
	assert.Panics(t, func() {
		var r reduction
		newReduction("test", &r, o.dense(dtype.F32, 3), src)
	})
}

func unravelGo(i int64, rank int32, shape, stride []int64) int64 {
	var off int64
	for d := rank - 1; d >= 0; d-- {
		off += (i % shape[d]) * stride[d]
		i /= shape[d]
	}
	return off
}

// TestPiecesDependOnShapesOnly: the pieces of a reduction depend on its sizes, never
// on the GPU, and their partials fit the scratch.
func TestPiecesDependOnShapesOnly(t *testing.T) {
	for _, c := range []struct{ n, nOut, per, piece, pieces int64 }{
		{10, 5, blockPiece, 10, 1},
		{3 << 16, 1, blockPiece, blockPiece, 6},
		{1 << 30, 1, blockPiece, 1 << 15, 1 << 15},
		{1 << 30, 1 << 20, blockPiece, 1 << 30, 1},
		{0, 4, threadPiece, 1, 1},
	} {
		piece, pieces := pieceCount(c.n, c.nOut, c.per)
		assert.Equal(t, c.piece, piece, "%+v", c)
		assert.Equal(t, c.pieces, pieces, "%+v", c)
		assert.LessOrEqual(t, pieces*c.nOut, max(maxPartials, c.nOut))
		assert.GreaterOrEqual(t, piece*pieces, c.n)
	}
}

// TestThreadPiecesFillTheGPU: a reduction with a thread per piece is cut into
// threadsWanted threads where its elements and the scratch allow (a bias gradient of a
// [1024, 1024] or [4096, 4096] matrix, once 1024 or 4096 threads), each with minPiece
// elements or more, its partials within the scratch.
func TestThreadPiecesFillTheGPU(t *testing.T) {
	for _, c := range []struct{ n, nOut, piece, pieces int64 }{
		{1024, 1024, 16, 64},     // minPiece elements a thread
		{4096, 4096, 98, 42},     // as many pieces as the scratch holds partials
		{64, 256, 16, 4},         // few elements: pieces of minPiece
		{10, 3, 10, 1},           // fewer than minPiece: one piece
		{1 << 20, 4, 1024, 1024}, // long: pieces of threadPiece at most
		{1 << 20, 1 << 17, 1 << 20, 1},
	} {
		piece, pieces := threadPieces(c.n, c.nOut)
		assert.Equal(t, [2]int64{c.piece, c.pieces}, [2]int64{piece, pieces}, "%+v", c)
		assert.GreaterOrEqual(t, piece*pieces, c.n)
		assert.LessOrEqual(t, pieces*c.nOut, max(maxPartials, c.nOut))
	}
}

// BenchmarkNewWalk is the host's work before an elementwise launch, without the GPU:
// broadcasting, merging and the index-width choice for a binary op on a [64, 64]
// tensor and a broadcast row.
func BenchmarkNewWalk(b *testing.B) {
	var o operands
	x, row, out := o.dense(dtype.F32, 64, 64), o.dense(dtype.F32, 64), o.dense(dtype.F32, 64, 64)
	b.ReportAllocs()
	for b.Loop() {
		var w walk
		requireFloat("add", out)
		newWalk("add", &w, out, x, row)
		if w.wide(1 << 20) {
			b.Fatal("narrow")
		}
	}
}
