package cpu

import (
	"fmt"
	"slices"
	"sync"

	"github.com/subletml/sublet/kernels"
)

// maxOperands is the most operands one elementwise kernel touches (output included).
const maxOperands = 4

// iter walks the elements of an output shape in row-major order together with the
// matching elements of up to three inputs broadcast to it. Dimensions of size 1 are
// dropped and neighbours that are dense for every operand are merged, so a contiguous
// walk is a single run.
type iter struct {
	ops   int                               // operands: 0 is the output
	rank  int                               // dimensions after merging, ≥ 1
	shape [kernels.MaxRank]int              // shape[rank-1] is the innermost
	st    [maxOperands][kernels.MaxRank]int // strides per operand and dimension
	off   [maxOperands]int                  // Offset per operand
	size  int                               // elements in the output
}

// newIter builds the walk over out.Shape; each input must broadcast to it (numpy rules:
// shapes align at the right, a missing or size-1 dimension repeats).
func newIter(op string, out kernels.Layout, ins ...kernels.Layout) iter {
	r := len(out.Shape)
	var off [maxOperands]int
	var shape [kernels.MaxRank]int
	var st [maxOperands][kernels.MaxRank]int
	copy(shape[:], out.Shape)
	copy(st[0][:], out.Strides)
	off[0] = out.Offset
	for k, in := range ins {
		d := r - len(in.Shape)
		if d < 0 {
			panic(fmt.Sprintf("kernels/cpu: %s: input %d (%v) has more dimensions than the output %v", op, k, in.Shape, out.Shape))
		}
		for i, n := range in.Shape {
			switch {
			case n == 1: // stride stays 0: repeat along this dimension
			case n == shape[d+i]:
				st[k+1][d+i] = in.Strides[i]
			default:
				panic(fmt.Sprintf("kernels/cpu: %s: input %d of shape %v does not broadcast to %v", op, k, in.Shape, out.Shape))
			}
		}
		off[k+1] = in.Offset
	}
	return mergedIter(1+len(ins), r, &shape, &st, off)
}

// mergedIter builds the walk over the r dimensions of shape, operand k having strides
// st[k] and offset off[k]: dimensions of size 1 are dropped and neighbours that are
// dense for every operand merged, keeping the row-major order of the elements.
func mergedIter(ops, r int, shape *[kernels.MaxRank]int, st *[maxOperands][kernels.MaxRank]int, off [maxOperands]int) iter {
	it := iter{ops: ops, off: off, size: 1}
	for i := range r {
		it.size *= shape[i]
	}
	// Merge from the innermost dimension outwards, skipping size-1 dimensions.
	for i := r - 1; i >= 0; i-- {
		if shape[i] == 1 {
			continue
		}
		if it.rank > 0 {
			j := it.rank - 1 // the dimension just inside i, already placed
			dense := true
			for k := range ops {
				if st[k][i] != it.st[k][j]*it.shape[j] {
					dense = false
					break
				}
			}
			if dense {
				it.shape[j] *= shape[i]
				continue
			}
		}
		it.shape[it.rank] = shape[i]
		for k := range ops {
			it.st[k][it.rank] = st[k][i]
		}
		it.rank++
	}
	// Built innermost first; reverse so index rank-1 is the innermost.
	if it.rank == 0 {
		it.shape[0], it.rank = 1, 1
	}
	for a, b := 0, it.rank-1; a < b; a, b = a+1, b-1 {
		it.shape[a], it.shape[b] = it.shape[b], it.shape[a]
		for k := range ops {
			it.st[k][a], it.st[k][b] = it.st[k][b], it.st[k][a]
		}
	}
	return it
}

// walk calls fn for the elements [lo, hi) of the row-major order in runs along the
// innermost dimension, each at most chunk long: offs holds each operand's element
// offset of the run's first element, inner each operand's stride along the run.
func (it *iter) walk(lo, hi int, fn func(offs, inner [maxOperands]int, n int)) {
	it.walkRuns(lo, hi, chunk, fn)
}

// walkRuns is walk with runs of at most most elements.
func (it *iter) walkRuns(lo, hi, most int, fn func(offs, inner [maxOperands]int, n int)) {
	if lo >= hi {
		return
	}
	r := it.rank
	last := r - 1
	var idx [kernels.MaxRank]int
	var offs, inner [maxOperands]int
	rem := lo
	for d := last; d >= 0; d-- {
		idx[d] = rem % it.shape[d]
		rem /= it.shape[d]
	}
	for k := range it.ops {
		o := it.off[k]
		for d := range r {
			o += idx[d] * it.st[k][d]
		}
		offs[k] = o
		inner[k] = it.st[k][last]
	}
	for pos := lo; pos < hi; {
		n := min(it.shape[last]-idx[last], hi-pos, most)
		fn(offs, inner, n)
		pos += n
		idx[last] += n
		for k := range it.ops {
			offs[k] += n * inner[k]
		}
		// Carry into outer dimensions when the innermost one wrapped.
		for d := last; d > 0 && idx[d] == it.shape[d]; d-- {
			idx[d] = 0
			idx[d-1]++
			for k := range it.ops {
				offs[k] += it.st[k][d-1] - it.shape[d]*it.st[k][d]
			}
		}
	}
}

// grain is the fewest elements an elementwise kernel hands to one goroutine, and the
// kernels over rows and the reductions scale it by their row lengths. On the 16-core
// host (BenchmarkWorkers at GOMAXPROCS 16) the tiny training case's 200K-element SGD
// step took 11 µs on 8 goroutines and 30 µs on the 3 a grain of 64K gave it, a 64K
// Add 4.4 µs on 4 and 7.7 on 1; 16K (with gemmGrain 512K) trained the tiny case
// 1.47× faster there than 64K (sublet-bench tiny-sgd, docs/benchmarks.md, branch
// cpu16b), and no slower at 2 threads on the development machine. A 16K Add stays on
// one goroutine (2.3 µs alone, 2.6 on 2). BenchmarkWorkers lowers it to run a kernel
// on a given number of goroutines.
var grain = 1 << 14

// scratch holds one chunk of T per operand of an elementwise kernel.
type scratch[T float] [maxOperands][chunk]T

var scratchPools = [2]sync.Pool{
	{New: func() any { return new(scratch[float32]) }},
	{New: func() any { return new(scratch[float64]) }},
}

// eltKernel computes one run of an elementwise kernel: out from in[k], the run of
// input k as T (converted if need be), of any length. Its value holds the kernel's constants; value
// receivers and no function values keep an op on the calling goroutine free of
// allocations (forRange).
type eltKernel[T float] interface {
	run(out []T, in eltIns[T])
}

// eltIns are the inputs' runs of one call of an eltKernel, each as long as out.
type eltIns[T float] [maxOperands - 1][]T

// eltState is what each piece of an elementwise kernel reads.
type eltState[T float, K eltKernel[T]] struct {
	dst Operand
	ins [maxOperands - 1]Operand
	nin int
	it  iter
	k   K
}

// eltDense is eltState where every operand holds T and is contiguous, the inputs of
// dst's shape: element i of each is element i of its slice.
type eltDense[T float, K eltKernel[T]] struct {
	dst []T
	ins eltIns[T]
	nin int
	k   K
}

// elementwise computes a float output from inputs that broadcast to it, a chunk at a
// time: k gets each input's chunk as T (converted if need be) and writes the chunk's
// results into out, which is then stored in dst's type. The kernels call it with T
// float64 when an operand is F64 (wide), float32 otherwise.
func elementwise[T float, K eltKernel[T]](name string, dst Operand, ins []Operand, k K) {
	dst.requireFloat(name)
	n := dst.Size()
	if d, ok := denseElementwise(dst, ins, k, n); ok {
		forRange(n, grain, d)
		return
	}
	s := eltState[T, K]{dst: dst, nin: len(ins), k: k}
	var ls [maxOperands - 1]kernels.Layout
	for i, in := range ins {
		s.ins[i], ls[i] = in, in.Layout
	}
	s.it = newIter(name, dst.Layout, ls[:len(ins)]...)
	forRange(n, grain, s)
}

// denseElementwise returns the dense form of an elementwise kernel over n elements,
// if its operands allow it.
func denseElementwise[T float, K eltKernel[T]](dst Operand, ins []Operand, k K, n int) (d eltDense[T, K], ok bool) {
	if dst.dt != native[T]() || !dst.IsContiguous() {
		return d, false
	}
	for i := range ins {
		in := &ins[i]
		if in.dt != dst.dt || !in.IsContiguous() || !slices.Equal(in.Shape, dst.Shape) {
			return d, false
		}
		d.ins[i] = elems[T](in)[in.Offset : in.Offset+n]
	}
	d.dst, d.nin, d.k = elems[T](&dst)[dst.Offset:dst.Offset+n], len(ins), k
	return d, true
}

// run computes the elements [lo, hi) in one run (a kernel that needs scratch cuts its
// runs itself: forChunks).
func (s eltDense[T, K]) run(lo, hi int) {
	var in eltIns[T]
	for i := range s.nin {
		in[i] = s.ins[i][lo:hi]
	}
	s.k.run(s.dst[lo:hi], in)
}

// run computes the elements [lo, hi).
func (s eltState[T, K]) run(lo, hi int) {
	var in eltIns[T]
	pool := poolFor[T](&scratchPools)
	buf := pool.Get().(*scratch[T])
	defer pool.Put(buf)
	s.it.walk(lo, hi, func(offs, inner [maxOperands]int, n int) {
		for i := range s.nin {
			in[i] = load(&s.ins[i], offs[i+1], inner[i+1], n, &buf[i+1])
		}
		o := out(&s.dst, offs[0], inner[0], n, &buf[0])
		s.k.run(o, in)
		flush(&s.dst, offs[0], inner[0], o)
	})
}
