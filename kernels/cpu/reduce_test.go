package cpu

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/subletml/sublet/kernels"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/dtype"
)

// reducedShape returns a dst shape for src shape: some dimensions set to 1, maybe some
// leading ones dropped.
func reducedShape(r *rand.Rand, shape []int) []int {
	out := broadcastShape(r, shape)
	if len(out) == len(shape) && r.IntN(2) == 0 && len(out) > 0 {
		out[r.IntN(len(out))] = 1
	}
	return out
}

// refReduce folds, for every dst index, the src elements that map to it in row-major
// order of the reduced dimensions: it returns the float64 sum, count, and the first
// maximum (NaN first) with its position among the reduced elements.
func refReduce(src view, dstShape []int, dstIdx []int) (sum float64, count int, mx float64, arg int64) {
	shape := src.l.Shape
	d := len(shape) - len(dstShape)
	var redShape []int
	for i, n := range shape {
		if i < d || dstShape[i-d] == 1 {
			redShape = append(redShape, n)
		}
	}
	arg = -1
	forEachIndex(redShape, func(ridx []int) {
		full := make([]int, len(shape))
		k := 0
		for i := range shape {
			if i < d || dstShape[i-d] == 1 {
				full[i] = ridx[k]
				k++
			} else {
				full[i] = dstIdx[i-d]
			}
		}
		x := src.get(full)
		sum += x
		if arg < 0 || !math.IsNaN(mx) && (x > mx || math.IsNaN(x)) {
			mx, arg = x, int64(count)
		}
		count++
	})
	return sum, count, mx, arg
}

func checkReductions(t *testing.T, r *rand.Rand, src view, dstShape []int) {
	t.Helper()
	dt := pick(r, floatTypes)
	sum := randView(r, dt, dstShape, func() float64 { return 99 })
	mean := randView(r, dt, dstShape, func() float64 { return 99 })
	mx := randView(r, dt, dstShape, func() float64 { return 99 })
	n := kernels.Contiguous(dstShape...).Size()
	idx := make([]int64, n)
	Sum(sum.op(), src.op())
	Mean(mean.op(), src.op())
	Max(mx.op(), idx, src.op())
	o := 0
	forEachIndex(dstShape, func(di []int) {
		s, c, m, a := refReduce(src, dstShape, di)
		requireClose(t, dt, roundTo(dt, s), sum.get(di), "sum %v->%v at %v", src.l.Shape, dstShape, di)
		requireClose(t, dt, roundTo(dt, s/float64(c)), mean.get(di), "mean at %v", di)
		require.Equal(t, roundTo(dt, m), mx.get(di), "max at %v", di)
		require.Equal(t, a, idx[o], "argmax at %v", di)
		o++
	})
}

func TestReduceAgainstReference(t *testing.T) {
	r := rand.New(rand.NewPCG(30, 31))
	for trial := range 300 {
		shape := randShape(r, 1+r.IntN(4), 6)
		gen := func() float64 { return float64(r.IntN(7)) - 3 } // ties for max
		if trial%2 == 0 {
			gen = func() float64 { return r.NormFloat64() }
		}
		src := randView(r, pick(r, floatTypes), shape, gen)
		checkReductions(t, r, src, reducedShape(r, shape))
	}
}

func TestReduceLargePieces(t *testing.T) {
	// Shapes whose reductions are cut into several pieces, for both the per-output and
	// the per-row folds, and a full reduction to a scalar.
	r := rand.New(rand.NewPCG(32, 33))
	gen := func() float64 { return r.NormFloat64() }
	cases := []struct{ src, dst []int }{
		{[]int{3, reducePiece + 1001}, []int{3, 1}},
		{[]int{2*reducePiece + 7, 3}, []int{1, 3}},
		{[]int{reducePiece + 5}, nil},
		{[]int{3, 300, 130}, []int{300, 1}},
	}
	for _, c := range cases {
		src := contiguousView(dtype.F32, c.src, gen)
		checkReductions(t, r, src, c.dst)
	}
}

func TestReduceDeterministicAcrossGOMAXPROCS(t *testing.T) {
	r := rand.New(rand.NewPCG(34, 35))
	n := 3*reducePiece + 11
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64() * 1e3)
	}
	cols := make([]float32, 4*n)
	for i := range cols {
		cols[i] = float32(r.NormFloat64())
	}
	run := func() (float32, [4]float32) {
		var s [1]float32
		Sum(F32(s[:], kernels.Layout{}), F32(x, kernels.Contiguous(n)))
		var c [4]float32
		Sum(F32(c[:], kernels.Contiguous(4)), F32(cols, kernels.Contiguous(n, 4)))
		return s[0], c
	}
	old := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(old)
	s1, c1 := run()
	for _, p := range []int{2, 3, 8} {
		runtime.GOMAXPROCS(p)
		s, c := run()
		assert.Equal(t, math.Float32bits(s1), math.Float32bits(s), "GOMAXPROCS=%d", p)
		assert.Equal(t, c1, c, "GOMAXPROCS=%d", p)
	}
}

func TestReduceEdges(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	src := []float32{1, nan, 5, -inf, -inf, -inf, 2, 2, 1}
	var m [3]float32
	idx := make([]int64, 3)
	Max(F32(m[:], kernels.Contiguous(3, 1)), idx, F32(src, kernels.Contiguous(3, 3)))
	assert.True(t, math.IsNaN(float64(m[0])))
	assert.Equal(t, []int64{1, 0, 0}, idx, "first NaN, an all -Inf row, the first of equal maxima")
	assert.Equal(t, float32(math.Inf(-1)), m[1])

	var s [2]float32
	Sum(F32(s[:], kernels.Contiguous(2, 1)), F32(nil, kernels.Contiguous(2, 0)))
	assert.Equal(t, [2]float32{0, 0}, s, "empty sum is 0")
	Mean(F32(s[:], kernels.Contiguous(2, 1)), F32(nil, kernels.Contiguous(2, 0)))
	assert.True(t, math.IsNaN(float64(s[0])), "empty mean is NaN")
	assert.Panics(t, func() { Max(F32(s[:], kernels.Contiguous(2, 1)), idx[:2], F32(nil, kernels.Contiguous(2, 0))) })
	assert.Panics(t, func() { Sum(F32(s[:], kernels.Contiguous(2)), F32(src, kernels.Contiguous(3, 3))) }, "does not broadcast")
}

func TestMaxBackward(t *testing.T) {
	r := rand.New(rand.NewPCG(36, 37))
	for range 100 {
		shape := randShape(r, 1+r.IntN(4), 5)
		dstShape := reducedShape(r, shape)
		src := randView(r, dtype.F32, shape, func() float64 { return r.NormFloat64() })
		m := contiguousView(dtype.F32, dstShape, func() float64 { return 0 })
		idx := make([]int64, m.l.Size())
		Max(m.op(), idx, src.op())
		g := randView(r, pick(r, floatTypes), dstShape, func() float64 { return r.Float64() + 1 })
		dx := randView(r, pick(r, floatTypes), shape, func() float64 { return 99 })
		MaxBackward(dx.op(), g.op(), idx)
		// Every dx element is g where it was the max, else 0: summing dx back gives g
		// and exactly one element per output is non-zero.
		got := contiguousView(wider(dtype.F32, dx.dt), dstShape, func() float64 { return 0 })
		Sum(got.op(), dx.op())
		nonzero := 0
		forEachIndex(shape, func(i []int) {
			if dx.get(i) != 0 {
				nonzero++
			}
		})
		require.Equal(t, m.l.Size(), nonzero)
		forEachIndex(dstShape, func(i []int) {
			requireClose(t, dx.dt, roundTo(dx.dt, g.get(i)), got.get(i), "at %v", i)
		})
		// The non-zero element is where the source has its max.
		forEachIndex(shape, func(i []int) {
			if dx.get(i) != 0 {
				require.Equal(t, m.get(i), src.get(i))
			}
		})
	}
}

// floatOperand is x as an F32 or F64 operand of layout l.
func floatOperand[T float](x []T, l kernels.Layout) Operand {
	if v, ok := any(x).([]float32); ok {
		return F32(v, l)
	}
	return F64(any(x).([]float64), l)
}

// testSumOrder checks Sum and SumSquares over the last axis, bit for bit, against the
// order Sum's doc gives: pieces of reducePiece elements added in order, each piece's
// element i into running sum i mod 16, the sixteen added up as combineLanes does.
// The rows are of multiples of 16 (one vector loop over all the rows: sumRows) and not,
// in one piece and in several; a single row's pieces, which are folded two at a time
// (pairs), odd and even in number, with a short last piece, at 1 to 4 workers, so that
// the pairs fall differently.
func testSumOrder[T float](t *testing.T) {
	prev := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(prev)
	for _, procs := range []int{1, 2, 3, 4} {
		runtime.GOMAXPROCS(procs)
		sumOrder[T](t)
	}
}

func sumOrder[T float](t *testing.T) {
	r := rand.New(rand.NewPCG(36, 37))
	op := floatOperand[T]
	for _, shape := range [][2]int{{5, 1024}, {4, 48}, {3, 40}, {1, 2*reducePiece + 32}, {3, reducePiece + 1001},
		{1, 5*reducePiece + 48}, {1, 4 * reducePiece}, {1, 7*reducePiece + 5}} {
		rows, n := shape[0], shape[1]
		x := randFloats[T](r, rows*n, 1e3)
		for _, square := range []bool{false, true} {
			got := make([]T, rows)
			if square {
				SumSquares(op(got, kernels.Contiguous(rows, 1)), op(x, kernels.Contiguous(rows, n)))
			} else {
				Sum(op(got, kernels.Contiguous(rows, 1)), op(x, kernels.Contiguous(rows, n)))
			}
			for i := range rows {
				var total float64
				for p := 0; p < n; p += reducePiece {
					var lanes [16]float64
					for k, v := range x[i*n+p : i*n+min(p+reducePiece, n)] {
						if square {
							v *= v // rounded to T
						}
						lanes[k%16] += float64(v)
					}
					total += combineLanes(&lanes)
				}
				require.Equal(t, bitsOf(T(total)), bitsOf(got[i]), "%v square=%v row %d, GOMAXPROCS %d", shape, square, i, runtime.GOMAXPROCS(0))
			}
		}
	}
}

func TestSumOrder(t *testing.T) { bothTypes(t, testSumOrder[float32], testSumOrder[float64]) }

// testSumColumnsOrder checks Sum over the leading axis, bit for bit, against the order
// Sum's doc gives for outputs interleaved with their elements: bands of rows (about
// reduceBand elements, at least reduceRows rows, at most reducePiece; reducePiece rows
// past reduceBand/reduceRows outputs) added in order, each band's column in row order.
// The shapes cut the rows into one band, several, and several with a short last one,
// at widths a fold takes at once and wider.
func testSumColumnsOrder[T float](t *testing.T) {
	r := rand.New(rand.NewPCG(38, 39))
	for _, c := range []struct{ rows, cols, band int }{
		{1000, 1024, 1024}, {4*1024 + 8, 1024, 1024}, {3000, 3000, 349}, {700, 4096, reduceRows}, {300, 8192, reducePiece},
		{70000, 40, reduceBand / 40},
	} {
		x := randFloats[T](r, c.rows*c.cols, 1e3)
		got := make([]T, c.cols)
		Sum(floatOperand(got, kernels.Contiguous(c.cols)), floatOperand(x, kernels.Contiguous(c.rows, c.cols)))
		for j := range c.cols {
			var total float64
			for p := 0; p < c.rows; p += min(c.band, reducePiece) {
				var s float64
				for i := p; i < min(p+min(c.band, reducePiece), c.rows); i++ {
					s += float64(x[i*c.cols+j])
				}
				total += s
			}
			require.Equal(t, bitsOf(T(total)), bitsOf(got[j]), "[%d, %d] column %d", c.rows, c.cols, j)
		}
	}
}

func TestSumColumnsOrder(t *testing.T) {
	bothTypes(t, testSumColumnsOrder[float32], testSumColumnsOrder[float64])
}
