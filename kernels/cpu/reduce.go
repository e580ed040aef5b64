package cpu

import (
	"fmt"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
)

// Sum writes into dst the sum of src over every dimension that dst reduces: dst's
// shape broadcasts to src's (numpy rules), and src is summed over the dimensions where
// dst has size 1 or is missing. A sum over axes with keepdim is a dst with 1s there;
// the backward of a broadcast (reducing a gradient to an operand's shape) is a dst of
// the operand's shape. Sums accumulate in float64 in the reduced elements' row-major
// order, in pieces of a fixed size added in order, so the bits do not depend on
// GOMAXPROCS. An empty reduction gives 0. dst must not overlap src. An I64 dst takes
// the exact sum of an integer or Bool src (PyTorch's sum of a Bool or integer tensor),
// wrapping as int64 arithmetic does.
func Sum(dst, src Operand) {
	if dst.dt == dtype.I64 {
		sumInts(dst, src)
		return
	}
	reduce("sum", dst, nil, src, false)
}

// Mean is Sum divided by the number of elements reduced per output (NaN when that is 0).
func Mean(dst, src Operand) { reduce("mean", dst, nil, src, true) }

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
// combined with the others of the same output.
const reducePiece = 1 << 15

// reduction is the walk of a reduce kernel: kept enumerates the outputs (operand 0 is
// dst, 1 is src), red the reduced elements of one output (operand 0 is src, offsets
// relative to the output's first element).
type reduction struct {
	kept, red  iter
	nOut, nRed int
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
	red.pieces = max(1, (red.nRed+reducePiece-1)/reducePiece)
	return red
}

// fold is the running state of one run of at most chunk outputs.
type fold[T float] struct {
	isMax bool
	sum   [chunk]float64
	max   [chunk]T
	arg   [chunk]int64 // -1 until the first element
}

func (f *fold[T]) reset(n int) {
	for j := range n {
		f.sum[j], f.max[j], f.arg[j] = 0, 0, -1
	}
}

// better reports whether x replaces m (the maximum so far at position a) as the
// maximum: it is larger, or the first element, or the first NaN.
func better[T float](x, m T, a int64) bool { return a < 0 || m == m && (x > m || x != x) }

// add folds v, the elements at reduced positions r, r+1, … of output j.
func (f *fold[T]) add(j int, v []T, r int) {
	if !f.isMax {
		s := f.sum[j]
		for _, x := range v {
			s += float64(x)
		}
		f.sum[j] = s
		return
	}
	m, a := f.max[j], f.arg[j]
	for i, x := range v {
		if better(x, m, a) {
			m, a = x, int64(r+i)
		}
	}
	f.max[j], f.arg[j] = m, a
}

// addColumn folds v[j], the element at reduced position r of output j, for every j.
func (f *fold[T]) addColumn(v []T, r int) {
	if !f.isMax {
		for j, x := range v {
			f.sum[j] += float64(x)
		}
		return
	}
	for j, x := range v {
		if better(x, f.max[j], f.arg[j]) {
			f.max[j], f.arg[j] = x, int64(r)
		}
	}
}

// partials holds each output's result per piece when the reduced elements are cut
// into several pieces; output o's piece c is at o·pieces+c.
type partials[T float] struct {
	sum []float64
	max []T
	arg []int64
}

func reduceIn[T float](op string, dst Operand, idx []int64, src Operand, mean bool) {
	dst.requireFloat(op)
	isMax := idx != nil
	rd := newReduction(op, dst.Layout, src.Layout)
	if isMax && rd.nRed == 0 && rd.nOut > 0 {
		panic(fmt.Sprintf("kernels/cpu: max: reducing %v to %v reduces nothing", src.Shape, dst.Shape))
	}
	scale := 1.0
	if mean {
		scale = 1 / float64(rd.nRed)
	}
	var part partials[T]
	if rd.pieces > 1 {
		if isMax {
			part.max = make([]T, rd.nOut*rd.pieces)
			part.arg = make([]int64, rd.nOut*rd.pieces)
		} else {
			part.sum = make([]float64, rd.nOut*rd.pieces)
		}
	}
	// finish writes the results of a fold of n outputs from output o on into dst and idx.
	finish := func(f *fold[T], o, n int, d, ds int, obuf *[chunk]T) {
		res := out(&dst, d, ds, n, obuf)
		for j := range res {
			if isMax {
				res[j], idx[o+j] = f.max[j], f.arg[j]
			} else {
				res[j] = T(f.sum[j] * scale)
			}
		}
		flush(&dst, d, ds, res)
	}
	ri := &rd.red
	redInner := ri.st[0][ri.rank-1]
	segLen := max(1, min(rd.nRed, reducePiece))
	// Segments are (piece, output) pairs, piece-major, so a range of segments is a few
	// ranges of consecutive outputs.
	parallelFor(rd.nOut*rd.pieces, max(1, grain/segLen), func(lo, hi int) {
		f := fold[T]{isMax: isMax}
		var buf, obuf [chunk]T
		for c := lo / rd.nOut; c*rd.nOut < hi; c++ {
			r0 := c * reducePiece
			r1 := min(r0+reducePiece, rd.nRed)
			o := max(lo-c*rd.nOut, 0)
			rd.kept.walk(o, min(hi-c*rd.nOut, rd.nOut), func(offs, inner [maxOperands]int, n int) {
				base, sk := offs[1], inner[1]
				f.reset(n)
				if n > 1 && sk < redInner {
					// The outputs sit closer together than the reduced elements: fold
					// a row of n outputs per reduced element. The order per output
					// is the same as below, so the bits are too.
					r := r0
					ri.walk(r0, r1, func(ro, rs [maxOperands]int, m int) {
						for e := range m {
							f.addColumn(load(&src, base+ro[0]+e*rs[0], sk, n, &buf), r)
							r++
						}
					})
				} else {
					for j := range n {
						r := r0
						ri.walk(r0, r1, func(ro, rs [maxOperands]int, m int) {
							f.add(j, load(&src, base+j*sk+ro[0], rs[0], m, &buf), r)
							r += m
						})
					}
				}
				if rd.pieces == 1 {
					finish(&f, o, n, offs[0], inner[0], &obuf)
				} else {
					for j := range n {
						p := (o+j)*rd.pieces + c
						if isMax {
							part.max[p], part.arg[p] = f.max[j], f.arg[j]
						} else {
							part.sum[p] = f.sum[j]
						}
					}
				}
				o += n
			})
		}
	})
	if rd.pieces == 1 {
		return
	}
	parallelFor(rd.nOut, max(1, grain/rd.pieces), func(lo, hi int) {
		f := fold[T]{isMax: isMax}
		var obuf [chunk]T
		o := lo
		rd.kept.walk(lo, hi, func(offs, inner [maxOperands]int, n int) {
			f.reset(n)
			for j := range n {
				for c := range rd.pieces {
					p := (o+j)*rd.pieces + c
					switch {
					case !isMax:
						f.sum[j] += part.sum[p]
					case better(part.max[p], f.max[j], f.arg[j]):
						f.max[j], f.arg[j] = part.max[p], part.arg[p]
					}
				}
			}
			finish(&f, o, n, offs[0], inner[0], &obuf)
			o += n
		})
	})
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
