package cpu

import "github.com/subletml/sublet/kernels"

// The loops under the elementwise arithmetic and the reductions. Where the CPU has
// vector forms of them (vec_amd64.s, written by vec_gen.go), the …Vector functions
// (binaryVector, sumLanesVector, sumRowsVector, addRowsVector, narrowVector, and the
// maxima's in reduce.go) run them over as much as they can and the Go loops do the
// rest: both give the same bits, one rounding per operation in the same order.

// sumLanes adds each x[i] into acc[i%16] as float64: sixteen running sums, which
// combineLanes adds up in a fixed order. A contiguous run of a reduction is folded so
// (the sums do not wait on each other, and vector registers hold them).
func sumLanes[T float](acc *[16]float64, x []T) {
	for i := sumLanesVector(acc, x); i < len(x); i++ {
		acc[i%16] += float64(x[i])
	}
}

// sumSquaresLanes is sumLanes of x[i]·x[i], each product rounded to T as Mul rounds
// it: a sum of squares in one pass.
func sumSquaresLanes[T float](acc *[16]float64, x []T) {
	for i := sumSquaresLanesVector(acc, x); i < len(x); i++ {
		acc[i%16] += float64(x[i] * x[i])
	}
}

// squares writes x[i]·x[i], rounded to T as Mul rounds it, into dst[i].
func squares[T float](dst, x []T) {
	for i := binaryVector(kernels.Mul, dst, x, x); i < len(x); i++ {
		dst[i] = x[i] * x[i]
	}
}

// combineLanes is the sum of sumLanes' sixteen sums, as a tree of pairs: the same
// order on every machine.
func combineLanes(acc *[16]float64) float64 {
	var s [8]float64
	for i := range s {
		s[i] = acc[i] + acc[i+8]
	}
	for i := range 4 {
		s[i] += s[i+4]
	}
	return (s[0] + s[2]) + (s[1] + s[3])
}

// sumRows writes into dst[r] the sum of row r of x (n elements, rows ld apart), or of
// their squares (square), as sumLanes (sumSquaresLanes) from zero then combineLanes
// give it. A reduction whose outputs' elements are each one contiguous run (the sum over
// the last axis, or a piece of the sum of all) is folded so: the vector loop sums two
// rows at a time, eight chains of additions in flight where one row has four.
func sumRows[T float](dst []float64, x []T, ld, n int, square bool) {
	for r := sumRowsVector(dst, x, ld, n, square); r < len(dst); r++ {
		var lanes [16]float64
		if square {
			sumSquaresLanes(&lanes, x[r*ld:r*ld+n])
		} else {
			sumLanes(&lanes, x[r*ld:r*ld+n])
		}
		dst[r] = combineLanes(&lanes)
	}
}

// sumRowsPaired is sumRows with row i read beside row i + h (h = len(dst)/2), the two
// far apart, where sumRows reads adjacent rows together: a core then reads two streams
// (reducing.pairs says what that gains). Each row's sum has the bits sumRows gives it.
func sumRowsPaired[T float](dst []float64, x []T, ld, n int, square bool) {
	r := sumRowPairsVector(dst, x, ld, n, square)
	if r < len(dst) {
		sumRows(dst[r:], x[r*ld:], ld, n, square)
	}
}

// narrow writes src[i] rounded to T into dst[i] (as long as dst).
func narrow[T float](dst []T, src []float64) {
	src = src[:len(dst)]
	for i := narrowVector(dst, src); i < len(dst); i++ {
		dst[i] = T(src[i])
	}
}

// addRows adds rows of x, ld elements apart, into acc, each column in row order:
// acc[j] += float64(x[r·ld+j]) for r = 0, 1, … rows-1. It is the sum over the leading
// axis of a row-major matrix, a bias's gradient.
func addRows[T float](acc []float64, x []T, ld, rows int) {
	// Eight rows at a time: the vector loop reads eight streams of x while the sums
	// stay in registers, and acc stays in the L1 cache.
	j := 0
	for r := 0; r < rows; r += 8 {
		j = addRowsVector(acc, x[r*ld:], ld, min(8, rows-r))
	}
	for ; j < len(acc); j++ {
		s := acc[j]
		for r := range rows {
			s += float64(x[r*ld+j])
		}
		acc[j] = s
	}
}
