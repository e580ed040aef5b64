package cuda

import (
	"math"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
)

// listChunk is src/common.cuh's list_chunk over a recorded table: chunk c's tensor and
// its elements [lo, hi).
func listChunk(chunk []int64, n []int64, count int32, c int64) (i int, lo, hi int64) {
	a, b := 0, int(count)-1
	for a < b {
		mid := (a + b + 1) >> 1
		if chunk[mid] <= c {
			a = mid
		} else {
			b = mid - 1
		}
	}
	lo = (c - chunk[a]) * hdrListChunk
	return a, lo, min(lo+hdrListChunk, n[a])
}

// covered runs a list kernel's blocks over a recorded table as the GPU would (every
// block of the grid, striding over the chunks) and returns how often each element of
// each tensor, known by its address, is visited.
func covered(t *testing.T, chunk, n []int64, count int32, ptrs []uint64, grid uint32) map[uint64][]int {
	t.Helper()
	seen := map[uint64][]int{}
	for i := range count {
		require.Positive(t, n[i], "entry %d: tensors without elements stay out of the table", i)
		require.Equal(t, (n[i]+hdrListChunk-1)/hdrListChunk, chunk[i+1]-chunk[i], "entry %d's chunks", i)
		seen[ptrs[i]] = make([]int, n[i])
	}
	require.Zero(t, chunk[0])
	for blk := int64(0); blk < int64(grid); blk++ {
		for c := blk; c < chunk[count]; c += int64(grid) {
			i, lo, hi := listChunk(chunk, n, count, c)
			require.Less(t, lo, hi, "chunk %d is not empty", c)
			for j := lo; j < hi; j++ {
				seen[ptrs[i]][j]++
			}
		}
	}
	return seen
}

func optimListOf(t *testing.T, a argRec) optimList {
	var l optimList
	require.Len(t, a.bytes, int(unsafe.Sizeof(l)))
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&l)), unsafe.Sizeof(l)), a.bytes)
	return l
}

func scaleListOf(t *testing.T, a argRec) scaleList {
	var l scaleList
	require.Len(t, a.bytes, int(unsafe.Sizeof(l)))
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&l)), unsafe.Sizeof(l)), a.bytes)
	return l
}

// multiParams are count parameters of mixed sizes (empty, odd, many chunks), every
// fourth F64, for a recorded multi-tensor step.
func multiParams(o *operands, count int) []kernels.Operand {
	ps := make([]kernels.Operand, count)
	for i := range ps {
		dt := dtype.F32
		if i%4 == 3 {
			dt = dtype.F64
		}
		ps[i] = o.dense(dt, []int{0, 1, 7, 2048, 2049, 5 * 2048, 300}[i%7])
	}
	return ps
}

// TestSGDMultiTables: a list of 130 parameters goes out as tables of at most
// hdrOptimList, one launch each, per compute type; the blocks of each launch visit
// every element of every parameter exactly once, with its gradient, buffer and first
// flag beside it; a parameter on another stream takes the single-tensor kernel.
func TestSGDMultiTables(t *testing.T) {
	b, rec := newRecording(t)
	var o operands
	const count = 130
	p, g, buf := multiParams(&o, count), multiParams(&o, count), multiParams(&o, count)
	first := make([]bool, count)
	for i := range first {
		first[i] = i%3 == 0
	}
	p[5].Mem.Stream, g[5].Mem.Stream, buf[5].Mem.Stream = 7, 7, 7
	b.SGDMulti(kernels.SGD{LR: 0.1, Momentum: 0.9}, p, g, buf, first)
	launches, _ := rec.take()
	byAddr := map[uint64]int{}
	for i, x := range p {
		byAddr[addr(x)] = i
	}
	visits := map[int]int{}
	var lists [2]int
	for _, l := range launches {
		if l.k == kSGD.in(p[5].DType == dtype.F64) {
			assert.Equal(t, addr(p[5]), l.args[0].bits, "the parameter on another stream, alone")
			visits[5]++
			continue
		}
		require.Contains(t, []kernel{kSGDMulti, kSGDMulti.in(true)}, l.k)
		f64 := l.k == kSGDMulti.in(true)
		lists[boolInt(f64)]++
		tbl := optimListOf(t, l.args[0])
		require.LessOrEqual(t, tbl.count, int32(hdrOptimList))
		assert.LessOrEqual(t, l.cfg.Grid.X, uint32(32*b.sms))
		assert.Equal(t, uint32(min(tbl.chunk[tbl.count], int64(32*b.sms))), l.cfg.Grid.X, "a block per chunk, up to 32 per SM")
		for i := range tbl.count {
			k := byAddr[tbl.p[i]]
			assert.Equal(t, f64, p[k].DType == dtype.F64, "parameter %d in its type's table", k)
			assert.Equal(t, [3]uint64{addr(p[k]), addr(g[k]), addr(buf[k])}, [3]uint64{tbl.p[i], tbl.g[i], tbl.s0[i]})
			assert.Equal(t, boolInt(first[k]), tbl.first[i])
			assert.NotEqual(t, 5, k)
		}
		for ptr, seen := range covered(t, tbl.chunk[:], tbl.n[:], tbl.count, tbl.p[:], l.cfg.Grid.X) {
			k := byAddr[ptr]
			visits[k]++
			for j, v := range seen {
				require.Equal(t, 1, v, "parameter %d element %d", k, j)
			}
			require.Len(t, seen, p[k].Size())
		}
	}
	for i, x := range p {
		want := 1
		if x.Size() == 0 {
			want = 0
		}
		assert.Equal(t, want, visits[i], "parameter %d (%d elements) updated once", i, x.Size())
	}
	// 129 parameters on the list's stream: 97 F32 (some empty), 32 F64.
	assert.Equal(t, [2]int{2, 1}, lists, "tables per type")
}

// TestAdamMultiConstants: each parameter's bias corrections in the table are the bits
// Adam passes for its step, and the shared hyper-parameters Adam's too.
func TestAdamMultiConstants(t *testing.T) {
	b, rec := newRecording(t)
	var o operands
	c := kernels.Adam{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, Decoupled: true}
	for _, dt := range []dtype.DType{dtype.F32, dtype.F64} {
		ps := []kernels.Operand{o.dense(dt, 10), o.dense(dt, 3000), o.dense(dt, 1)}
		steps := []int{1, 7, 1000}
		b.AdamMulti(c, steps, ps, ps, ps, ps)
		multi, _ := rec.take()
		require.Len(t, multi, 1)
		tbl := optimListOf(t, multi[0].args[0])
		require.Equal(t, int32(3), tbl.count)
		for i, p := range ps {
			b.Adam(c, steps[i], p, p, p, p)
			one, _ := rec.take()
			require.Len(t, one, 1)
			a := one[0].args
			// adam_T(p, g, m, v, n, b1, b2, omb1, omb2, eps, wd, stepSize, rbc2, decay, decoupled)
			bits := func(v float64) uint64 {
				if dt == dtype.F64 {
					return math.Float64bits(v)
				}
				return uint64(math.Float32bits(float32(v)))
			}
			assert.Equal(t, a[11].bits, bits(tbl.stepSize[i]), "%v step %d: step size", dt, steps[i])
			assert.Equal(t, a[12].bits, bits(tbl.rbc2[i]), "%v step %d: 1/√(1-β2^t)", dt, steps[i])
			m := multi[0].args
			// adam_multi_T(list, b1, b2, omb1, omb2, eps, wd, decay, decoupled)
			for j, k := range []int{5, 6, 7, 8, 9, 10, 13, 14} {
				assert.Equal(t, a[k].bits, m[1+j].bits, "%v: argument %d", dt, k)
			}
		}
	}
}

// TestUnscaleMultiTables: contiguous gradients of every float type share tables of up
// to hdrScaleList, each with its type; strided ones take the single-tensor kernel.
func TestUnscaleMultiTables(t *testing.T) {
	b, rec := newRecording(t)
	var o operands
	types := []dtype.DType{dtype.F32, dtype.F16, dtype.BF16, dtype.F64}
	var gs []kernels.Operand
	for i := range 300 {
		if i%50 == 9 {
			gs = append(gs, o.over(dtype.F32, kernels.Layout{Shape: []int{4, 5}, Strides: []int{1, 4}}, 20))
			continue
		}
		gs = append(gs, o.dense(types[i%4], []int{0, 3, 2047, 4097, 64}[i%5]))
	}
	found := o.dense(dtype.F32)
	b.UnscaleMulti(gs, 0.125, found)
	launches, _ := rec.take()
	byAddr := map[uint64]int{}
	for i, x := range gs {
		byAddr[addr(x)] = i
	}
	visits := map[int]int{}
	tables := 0
	for _, l := range launches {
		if l.k != kUnscaleMulti {
			w := walkOf(t, l.args[0])
			visits[byAddr[w.base[0]]]++
			continue
		}
		tables++
		tbl := scaleListOf(t, l.args[0])
		require.LessOrEqual(t, tbl.count, int32(hdrScaleList))
		assert.Equal(t, uint64(math.Float32bits(0.125)), l.args[1].bits)
		assert.Equal(t, math.Float64bits(0.125), l.args[2].bits)
		assert.Equal(t, addr(found), l.args[3].bits)
		for i := range tbl.count {
			assert.Equal(t, int32(gs[byAddr[tbl.g[i]]].DType), tbl.dtype[i])
		}
		for ptr, seen := range covered(t, tbl.chunk[:], tbl.n[:], tbl.count, tbl.g[:], l.cfg.Grid.X) {
			visits[byAddr[ptr]]++
			for j, v := range seen {
				require.Equal(t, 1, v, "gradient %d element %d", byAddr[ptr], j)
			}
		}
	}
	for i, x := range gs {
		want := 1
		if x.Size() == 0 {
			want = 0
		}
		assert.Equal(t, want, visits[i], "gradient %d", i)
	}
	assert.Equal(t, 2, tables, "%d contiguous gradients with elements in tables of %d", 300-6-60, hdrScaleList)
}
