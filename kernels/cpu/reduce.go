package cpu

import (
	"fmt"
	"slices"
	"sync"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
)

// Sum writes into dst the sum of src over every dimension that dst reduces: dst's shape
// broadcasts to src's (numpy rules), and src is summed over the dimensions where dst
// has size 1 or is missing. A sum over axes with keepdim is a dst with 1s there; the
// backward of a broadcast (reducing a gradient to an operand's shape) is a dst of the
// operand's shape. Sums accumulate in float64, in pieces added in order, their sizes
// set by the shapes alone. Where the outputs' elements are interleaved (the sum over a
// leading axis: a bias's gradient, the sum over the batch of [batch, width]) a piece is
// a band of rows (reduceBand elements in all, at least reduceRows rows and at most
// reducePiece; reducePiece rows for more than reduceBand/reduceRows outputs), in which
// each output's elements are added in row-major order into one running sum; where each
// output's elements come in contiguous runs (the sum of a whole tensor, or over its
// last axis), a piece is reducePiece elements, element i of a run goes into running sum
// i mod 16 and the sixteen are added up in a fixed order at the end of the piece
// (vec.go). The bits depend on the shapes only, not on GOMAXPROCS or the CPU. An empty
// reduction gives 0. dst must not overlap src. An I64 dst takes the exact sum of an
// integer or Bool src (PyTorch's sum of a Bool or integer tensor), wrapping as int64
// arithmetic does.
func Sum(dst, src Operand) {
	if dst.dt == dtype.I64 {
		sumInts(dst, src)
		return
	}
	reduce("sum", dst, nil, src, false)
}

// Mean is Sum divided by the number of elements reduced per output (NaN when that is 0).
func Mean(dst, src Operand) { reduce("mean", dst, nil, src, true) }

// SumSquares is Sum of the squares of src's elements, each rounded to the type the
// reduction reads in (float32, float64 when dst or src is F64) as Mul rounds it: the
// bits of Mul then Sum, in one pass over src (the 2-norm's sum).
func SumSquares(dst, src Operand) {
	dst.requireFloat("sum of squares")
	byType(reduceIn[float32], reduceIn[float64], dst.dt, src.dt)("sum of squares", dst, nil, src, false)
}

// reduce runs the reduction in float64 when dst or src is F64 (maxima compare in it,
// sums accumulate in float64 either way), in float32 otherwise.
func reduce(op string, dst Operand, idx []int64, src Operand, mean bool) {
	byType(reduceIn[float32], reduceIn[float64], dst.dt, src.dt)(op, dst, idx, src, mean)
}

// Max writes into dst the largest element of src over the dimensions dst reduces (as
// for Sum) and into idx (one int64 per element of dst, in dst's row-major order) the
// position of that element: its row-major index within the reduced dimensions, which
// for one reduced axis is the index along that axis. The first of equal maxima wins; a
// NaN is the maximum (the first NaN). The reduction must not be empty. Use MaxBackward
// for the gradient.
func Max(dst Operand, idx []int64, src Operand) {
	if len(idx) != dst.Size() {
		panic(fmt.Sprintf("kernels/cpu: max: %d indices for an output of %d elements", len(idx), dst.Size()))
	}
	reduce("max", dst, idx, src, false)
}

// reducePiece is how many reduced elements one task folds before its partial result is
// combined with the others of the same output, where each output's elements come in
// contiguous runs.
const reducePiece = 1 << 15

// Where the outputs sit closer together than their reduced elements (a sum over a
// leading axis: a bias's gradient) and are at most reduceBand/reduceRows of them, a
// piece is a band of rows, reduceBand elements in all: a task then folds whole rows,
// which it reads in order. Pieces of reducePiece rows, cut over the outputs, gave each
// of 16 tasks a 256-byte slice of every row of a [65536, 1024] float32 sum, a page
// apart, which the hardware prefetcher does not follow (79 % of Add's bandwidth on the
// 16-core host). Wider outputs already give each task a long run of every row, and
// their bands would be short: the partials, 8 bytes an output a piece, would cost more
// than they save (a [64, 256, 1024] sum over its middle axis, 65536 outputs, in bands
// of 64 rows ran 25 % slower).
const (
	reduceBand = 1 << 20
	reduceRows = 256
)

// reduction is the walk of a reduce kernel: kept enumerates the outputs (operand 0 is
// dst, 1 is src), red the reduced elements of one output (operand 0 is src, offsets
// relative to the output's first element).
type reduction struct {
	kept, red  iter
	nOut, nRed int
	piece      int // reduced elements of each output in a piece but the last
	pieces     int // pieces each output's reduced elements are cut into
}

func newReduction(op string, dst, src kernels.Layout) reduction {
	r := len(src.Shape)
	d := r - len(dst.Shape)
	if d < 0 {
		panic(fmt.Sprintf("kernels/cpu: %s: output shape %v has more dimensions than the input %v", op, dst.Shape, src.Shape))
	}
	var ks, rs [kernels.MaxRank]int
	var kst, rst [maxOperands][kernels.MaxRank]int
	nk, nr := 0, 0
	for i, n := range src.Shape {
		switch {
		case i >= d && dst.Shape[i-d] == n:
			ks[nk] = n
			kst[0][nk], kst[1][nk] = dst.Strides[i-d], src.Strides[i]
			nk++
		case i < d || dst.Shape[i-d] == 1:
			rs[nr] = n
			rst[0][nr] = src.Strides[i]
			nr++
		default:
			panic(fmt.Sprintf("kernels/cpu: %s: output shape %v does not broadcast to the input shape %v", op, dst.Shape, src.Shape))
		}
	}
	red := reduction{
		kept: mergedIter(2, nk, &ks, &kst, [maxOperands]int{dst.Offset, src.Offset}),
		red:  mergedIter(1, nr, &rs, &rst, [maxOperands]int{}),
	}
	red.nOut, red.nRed = red.kept.size, red.red.size
	red.piece = reducePiece
	if k, rr := &red.kept, &red.red; red.nOut > 1 && red.nOut <= reduceBand/reduceRows && k.st[1][k.rank-1] < rr.st[0][rr.rank-1] {
		red.piece = min(reducePiece, reduceBand/red.nOut)
	}
	red.pieces = max(1, (red.nRed+red.piece-1)/red.piece)
	return red
}

// foldOut is the most outputs one fold holds: the columns of a bias's gradient up to
// 1024 wide are summed in one pass down its rows.
const foldOut = 1024

// fold is the running state of one run of at most foldOut outputs, with the scratch
// its loads, stores and vector loops go through: large, so it comes from foldPools.
type fold[T float] struct {
	isMax bool
	sum   [foldOut]float64
	max   [foldOut]T
	arg   [foldOut]int64 // -1 until the first element
	// vm and vp are what a vector loop found: maxima and their positions from its
	// first row or element (exact in T; vi where the loop gives them as indices).
	vm, vp    [foldOut]T
	vi        [foldOut]int
	buf, obuf [chunk]T
	sq        [chunk]T // a sum of squares' squared elements
}

var foldPools = [2]sync.Pool{
	{New: func() any { return new(fold[float32]) }},
	{New: func() any { return new(fold[float64]) }},
}

func getFold[T float](isMax bool) *fold[T] {
	f := poolFor[T](&foldPools).Get().(*fold[T])
	f.isMax = isMax
	return f
}

func putFold[T float](f *fold[T]) { poolFor[T](&foldPools).Put(f) }

func (f *fold[T]) reset(n int) {
	if !f.isMax {
		clear(f.sum[:n])
		return
	}
	for j := range n {
		f.max[j], f.arg[j] = 0, -1
	}
}

// better reports whether x replaces m (the maximum so far at position a) as the
// maximum: it is larger, or the first element, or the first NaN.
func better[T float](x, m T, a int64) bool { return a < 0 || m == m && (x > m || x != x) }

// addMax folds v, the elements at reduced positions r, r+1, … of output j, into its
// maximum.
func (f *fold[T]) addMax(j int, v []T, r int) {
	m, a := f.max[j], f.arg[j]
	for i, x := range v {
		if better(x, m, a) {
			m, a = x, int64(r+i)
		}
	}
	f.max[j], f.arg[j] = m, a
}

// maxRuns is addMax for n contiguous runs of m elements, ld apart in x, one for each of
// the outputs j0, j0+1, … (native T), at reduced positions r, r+1, …: a vector loop
// finds the maximum of most of each run as addMax would (the first NaN, or else the
// first of the largest), which is folded in, then the elements it left.
func (f *fold[T]) maxRuns(j0, n int, x []T, ld, m, r int) {
	k := maxLanesVector(f.vm[:n], f.vi[:n], x, ld, m)
	for j := range n {
		if k > 0 && better(f.vm[j], f.max[j0+j], f.arg[j0+j]) {
			f.max[j0+j], f.arg[j0+j] = f.vm[j], int64(r+f.vi[j])
		}
		f.addMax(j0+j, x[j*ld+k:j*ld+m], r+k)
	}
}

// squared returns v's elements squared (squares) in f.sq; v may be the source's own.
func (f *fold[T]) squared(v []T) []T {
	d := f.sq[:len(v)]
	squares(d, v)
	return d
}

// addColumn folds v[j], the element at reduced position r of output j0+j, for every j.
func (f *fold[T]) addColumn(j0 int, v []T, r int) {
	if !f.isMax {
		s := f.sum[j0 : j0+len(v)]
		for j, x := range v {
			s[j] += float64(x)
		}
		return
	}
	for j, x := range v {
		if better(x, f.max[j0+j], f.arg[j0+j]) {
			f.max[j0+j], f.arg[j0+j] = x, int64(r)
		}
	}
}

// maxRows folds rows rows of the n = len(x)… outputs of a native, contiguous row, ld
// elements apart from x, at reduced positions r, r+1, …: a vector loop over whole
// vectors of columns, the others one by one.
func (f *fold[T]) maxRows(n int, x []T, ld, rows, r int) {
	k := maxColsVector(f.vm[:n], f.vp[:n], x, ld, rows)
	for j := range k {
		if better(f.vm[j], f.max[j], f.arg[j]) {
			f.max[j], f.arg[j] = f.vm[j], int64(r)+int64(f.vp[j])
		}
	}
	for j := k; j < n; j++ {
		m, a := f.max[j], f.arg[j]
		for e := range rows {
			if v := x[e*ld+j]; better(v, m, a) {
				m, a = v, int64(r+e)
			}
		}
		f.max[j], f.arg[j] = m, a
	}
}

// partials holds each output's result per piece when the reduced elements are cut
// into several pieces; output o's piece c is at c·nOut+o, so that the task that folds
// a piece writes its outputs' partials side by side, where tasks writing the pieces
// of one output next to each other shared cache lines (a [64, 256, 1024] sum over its
// middle axis in bands of 64 rows ran at a quarter of its speed).
type partials[T float] struct {
	sum []float64
	max []T
	arg []int64
}

// partPools keep the buffers of partials from one reduction to the next: a fresh one
// of megabytes (a sum over the leading axis of [16384, 1024] float32 in bands has 2 MiB
// of them) costs a page fault per page on its first writes, which made that sum as
// slow as its reads. Every partial is written before it is read.
var partPools = [2]sync.Pool{
	{New: func() any { return new(partials[float32]) }},
	{New: func() any { return new(partials[float64]) }},
}

// getPartials returns pooled partials of n outputs' pieces: sums, or maxima and their
// positions.
func getPartials[T float](n int, isMax bool) *partials[T] {
	p := poolFor[T](&partPools).Get().(*partials[T])
	if isMax {
		p.max, p.arg = slices.Grow(p.max[:0], n)[:n], slices.Grow(p.arg[:0], n)[:n]
	} else {
		p.sum = slices.Grow(p.sum[:0], n)[:n]
	}
	return p
}

func putPartials[T float](p *partials[T]) { poolFor[T](&partPools).Put(p) }

// reducing is what each piece of a reduction reads (forRange).
type reducing[T float] struct {
	rd       reduction
	dst, src Operand
	idx      []int64
	isMax    bool
	square   bool // a sum of squares (SumSquares)
	scale    float64
	part     partials[T]
}

func reduceIn[T float](op string, dst Operand, idx []int64, src Operand, mean bool) {
	dst.requireFloat(op)
	s := reducing[T]{rd: newReduction(op, dst.Layout, src.Layout), dst: dst, src: src, idx: idx, isMax: idx != nil,
		square: op == "sum of squares", scale: 1}
	rd := &s.rd
	if s.isMax && rd.nRed == 0 && rd.nOut > 0 {
		panic(fmt.Sprintf("kernels/cpu: max: reducing %v to %v reduces nothing", src.Shape, dst.Shape))
	}
	if mean {
		s.scale = 1 / float64(rd.nRed)
	}
	if rd.pieces > 1 {
		p := getPartials[T](rd.nOut*rd.pieces, s.isMax)
		defer putPartials(p)
		s.part = *p
	}
	// Segments are (piece, output) pairs, piece-major, so a range of segments is a few
	// ranges of consecutive outputs.
	segLen := max(1, min(rd.nRed, rd.piece))
	forRange(rd.nOut*rd.pieces, max(1, grain/segLen), s)
	if rd.pieces > 1 {
		forRange(rd.nOut, max(1, grain/rd.pieces), combining[T]{s})
	}
}

// combining is the second pass of a reduction cut into pieces: each output's partial
// results, in piece order.
type combining[T float] struct{ reducing[T] }

func (s combining[T]) run(lo, hi int) {
	rd := &s.rd
	f := getFold[T](s.isMax)
	defer putFold(f)
	o := lo
	rd.kept.walkRuns(lo, hi, foldOut, func(offs, inner [maxOperands]int, n int) {
		f.reset(n)
		for c := range rd.pieces {
			p := c*rd.nOut + o
			if !s.isMax {
				for j, v := range s.part.sum[p : p+n] {
					f.sum[j] += v
				}
				continue
			}
			for j := range n {
				if better(s.part.max[p+j], f.max[j], f.arg[j]) {
					f.max[j], f.arg[j] = s.part.max[p+j], s.part.arg[p+j]
				}
			}
		}
		s.finish(f, o, n, offs[0], inner[0])
		o += n
	})
}

// finish writes the results of a fold of n outputs from output o on into dst (from
// its element d, ds apart) and idx.
func (s *reducing[T]) finish(f *fold[T], o, n int, d, ds int) {
	for j0 := 0; j0 < n; j0 += chunk {
		res := out(&s.dst, d+j0*ds, ds, min(chunk, n-j0), &f.obuf)
		sum := f.sum[j0 : j0+len(res)]
		// One loop per case: a sum over a short axis (a broadcast gradient) writes
		// an output for every few rows it reads.
		switch {
		case s.isMax:
			copy(res, f.max[j0:])
			copy(s.idx[o+j0:o+j0+len(res)], f.arg[j0:])
		case s.scale == 1: // x·1 is x: a sum's bits either way
			narrow(res, sum)
		default:
			for j := range res {
				res[j] = T(sum[j] * s.scale)
			}
		}
		flush(&s.dst, d+j0*ds, ds, res)
	}
}

// run folds the segments [lo, hi): each output's reduced elements of one piece.
func (s reducing[T]) run(lo, hi int) {
	rd, src := &s.rd, &s.src
	f := getFold[T](s.isMax)
	defer putFold(f)
	ri := &rd.red
	redInner := ri.st[0][ri.rank-1]
	dense := src.dt == native[T]()
	if rd.nOut == 1 && rd.pieces > 1 && dense && redInner == 1 && ri.rank == 1 && !s.isMax {
		s.pairs(lo, hi)
		return
	}
	for c := lo / rd.nOut; c*rd.nOut < hi; c++ {
		r0 := c * rd.piece
		r1 := min(r0+rd.piece, rd.nRed)
		o := max(lo-c*rd.nOut, 0)
		rd.kept.walkRuns(o, min(hi-c*rd.nOut, rd.nOut), foldOut, func(offs, inner [maxOperands]int, n int) {
			base, sk := offs[1], inner[1]
			f.reset(n)
			switch {
			case n > 1 && sk < redInner:
				// The outputs sit closer together than the reduced elements: fold
				// rows of n outputs, each output's elements in order.
				r := r0
				ri.walk(r0, r1, func(ro, rs [maxOperands]int, m int) {
					switch {
					case dense && sk == 1 && s.isMax:
						f.maxRows(n, elems[T](src)[base+ro[0]:], rs[0], m, r)
					case dense && sk == 1 && !s.square:
						addRows(f.sum[:n], elems[T](src)[base+ro[0]:], rs[0], m)
					default:
						for e := range m {
							for j0 := 0; j0 < n; j0 += chunk {
								v := load(src, base+ro[0]+e*rs[0]+j0*sk, sk, min(chunk, n-j0), &f.buf)
								if s.square {
									v = f.squared(v)
								}
								f.addColumn(j0, v, r+e)
							}
						}
					}
					r += m
				})
			case dense && redInner == 1 && ri.rank == 1:
				// Each output's elements of the piece are one contiguous run: what
				// the default case does, in one vector loop over the runs of the n
				// outputs (sumRows, maxRuns).
				x := elems[T](src)[base+r0:]
				if s.isMax {
					f.maxRuns(0, n, x, sk, r1-r0, r0)
				} else {
					sumRowsPaired(f.sum[:n], x, sk, r1-r0, s.square)
				}
			default:
				// Each output's elements in runs, as long as the innermost reduced
				// dimension where they need no conversion (a multiple of 16 long
				// otherwise: the same sums): into sixteen running sums (sumLanes;
				// sumSquaresLanes for a sum of squares), or a vector loop's lanes for a
				// maximum (maxRuns).
				most := chunk
				if dense && redInner == 1 {
					most = reducePiece
				}
				for j := range n {
					var lanes [16]float64
					r := r0
					ri.walkRuns(r0, r1, most, func(ro, rs [maxOperands]int, m int) {
						v := load(src, base+j*sk+ro[0], rs[0], m, &f.buf)
						switch {
						case s.square:
							sumSquaresLanes(&lanes, v)
						case !s.isMax:
							sumLanes(&lanes, v)
						case dense && rs[0] == 1:
							f.maxRuns(j, 1, v, 0, len(v), r)
						default:
							f.addMax(j, v, r)
						}
						r += m
					})
					if !s.isMax {
						f.sum[j] = combineLanes(&lanes)
					}
				}
			}
			if rd.pieces == 1 {
				s.finish(f, o, n, offs[0], inner[0])
			} else {
				for j := range n {
					p := c*rd.nOut + o + j
					if s.isMax {
						s.part.max[p], s.part.arg[p] = f.max[j], f.arg[j]
					} else {
						s.part.sum[p] = f.sum[j]
					}
				}
			}
			o += n
		})
	}
}

// pairs is run for a sum (or sum of squares) of every element of a dense source, one
// output whose pieces are each one contiguous run: the whole pieces of [lo, hi) are
// summed as rows of sumRowsPaired, piece c beside piece c + half, each its own partial,
// so that a core reads two streams at once, and a short last piece alone. One stream a
// core stops short of the memory's bandwidth: on the 2-core development machine a sum
// over 64M float32 read 47 GB/s at 2 threads one piece at a time, 57 with two adjacent
// pieces as rows and 64 with two far apart (add reaches 70-73). Each piece's partial has
// the bits it has alone, so a sum does not depend on how the pieces fall to the
// workers.
func (s reducing[T]) pairs(lo, hi int) {
	rd := &s.rd
	var base int
	rd.kept.walkRuns(0, 1, 1, func(offs, _ [maxOperands]int, _ int) { base = offs[1] })
	x := elems[T](&s.src)[base:]
	whole := min(hi, rd.nRed/rd.piece) // pieces [lo, whole) are whole; at most one after
	if whole > lo {
		sumRowsPaired(s.part.sum[lo:whole], x[lo*rd.piece:], rd.piece, rd.piece, s.square)
	}
	if whole < hi {
		r0 := whole * rd.piece
		sumRows(s.part.sum[whole:hi], x[r0:], 0, rd.nRed-r0, s.square)
	}
}

// MaxBackward writes the gradient of Max's input into dx (the shape of Max's src): g
// (the shape of Max's dst) at the positions idx names, 0 everywhere else. dx must not
// overlap g.
func MaxBackward(dx, g Operand, idx []int64) {
	byType(maxBackward[float32], maxBackward[float64], dx.dt, g.dt)(dx, g, idx)
}

func maxBackward[T float](dx, g Operand, idx []int64) {
	const op = "max backward"
	dx.requireFloat(op)
	rd := newReduction(op, g.Layout, dx.Layout)
	if len(idx) != rd.nOut {
		panic(fmt.Sprintf("kernels/cpu: %s: %d indices for a gradient of %d elements", op, len(idx), rd.nOut))
	}
	if err := checkIndices(op, idx, rd.nRed, NoIgnore); err != nil {
		panic(err.Error())
	}
	Fill(dx, 0)
	ri := &rd.red
	parallelFor(rd.nOut, grain, func(lo, hi int) {
		var buf [chunk]T
		o := lo
		rd.kept.walk(lo, hi, func(offs, inner [maxOperands]int, n int) {
			gv := load(&g, offs[0], inner[0], n, &buf)
			for j, v := range gv {
				r := idx[o+j]
				p := offs[1] + j*inner[1]
				for d := ri.rank - 1; d >= 0; d-- {
					p += int(r%int64(ri.shape[d])) * ri.st[0][d]
					r /= int64(ri.shape[d])
				}
				storeFloats(dx, p, 1, []T{v})
			}
			o += n
		})
	})
}
