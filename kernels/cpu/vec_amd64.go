package cpu

import (
	"unsafe"

	"golang.org/x/sys/cpu"

	"github.com/subletml/sublet/kernels"
)

// The AVX2 loops of vec.go (vec_gen.go writes them).

//go:noescape
func binaryAddF32AVX2(dst, a, b unsafe.Pointer, n int)

//go:noescape
func binarySubF32AVX2(dst, a, b unsafe.Pointer, n int)

//go:noescape
func binaryMulF32AVX2(dst, a, b unsafe.Pointer, n int)

//go:noescape
func binaryDivF32AVX2(dst, a, b unsafe.Pointer, n int)

//go:noescape
func binaryAddF64AVX2(dst, a, b unsafe.Pointer, n int)

//go:noescape
func binarySubF64AVX2(dst, a, b unsafe.Pointer, n int)

//go:noescape
func binaryMulF64AVX2(dst, a, b unsafe.Pointer, n int)

//go:noescape
func binaryDivF64AVX2(dst, a, b unsafe.Pointer, n int)

//go:noescape
func reluF32AVX2(dst, x unsafe.Pointer, n int)

//go:noescape
func reluF64AVX2(dst, x unsafe.Pointer, n int)

//go:noescape
func reluGradF32AVX2(dst, grad, y unsafe.Pointer, n int)

//go:noescape
func reluGradF64AVX2(dst, grad, y unsafe.Pointer, n int)

//go:noescape
func sumLanesF32AVX2(acc *[16]float64, x unsafe.Pointer, n int)

//go:noescape
func sumLanesF64AVX2(acc *[16]float64, x unsafe.Pointer, n int)

//go:noescape
func sumSquaresLanesF32AVX2(acc *[16]float64, x unsafe.Pointer, n int)

//go:noescape
func sumSquaresLanesF64AVX2(acc *[16]float64, x unsafe.Pointer, n int)

//go:noescape
func sumRowsF32AVX2(dst *float64, x unsafe.Pointer, ld, rows, n int)

//go:noescape
func sumRowsF64AVX2(dst *float64, x unsafe.Pointer, ld, rows, n int)

//go:noescape
func sumSquaresRowsF32AVX2(dst *float64, x unsafe.Pointer, ld, rows, n int)

//go:noescape
func sumSquaresRowsF64AVX2(dst *float64, x unsafe.Pointer, ld, rows, n int)

//go:noescape
func sumRowPairsF32AVX2(dst *float64, x unsafe.Pointer, ld, pairs, n, far int)

//go:noescape
func sumRowPairsF64AVX2(dst *float64, x unsafe.Pointer, ld, pairs, n, far int)

//go:noescape
func sumSquaresRowPairsF32AVX2(dst *float64, x unsafe.Pointer, ld, pairs, n, far int)

//go:noescape
func sumSquaresRowPairsF64AVX2(dst *float64, x unsafe.Pointer, ld, pairs, n, far int)

//go:noescape
func narrowF32AVX2(dst *float32, src *float64, n int)

//go:noescape
func addRowsF32AVX2(acc *float64, x unsafe.Pointer, ld, rows, n int)

//go:noescape
func addRowsF64AVX2(acc *float64, x unsafe.Pointer, ld, rows, n int)

//go:noescape
func maxLanesF32AVX2(m unsafe.Pointer, pos *int, x unsafe.Pointer, ld, rows, n int)

//go:noescape
func maxLanesF64AVX2(m unsafe.Pointer, pos *int, x unsafe.Pointer, ld, rows, n int)

//go:noescape
func maxLanePairsF32AVX2(m unsafe.Pointer, pos *int, x unsafe.Pointer, ld, pairs, n, far int)

//go:noescape
func maxLanePairsF64AVX2(m unsafe.Pointer, pos *int, x unsafe.Pointer, ld, pairs, n, far int)

//go:noescape
func maxColsF32AVX2(m, pos unsafe.Pointer, x unsafe.Pointer, ld, rows, n, first int)

//go:noescape
func maxColsF64AVX2(m, pos unsafe.Pointer, x unsafe.Pointer, ld, rows, n, first int)

var hasAVX2 = cpu.X86.HasAVX2

// binaryVector computes dst = a op b (slices of one length) over a multiple of the
// vector's lanes from the start, where there is a vector loop for op, and returns how
// many elements it did.
func binaryVector[T float](op kernels.BinaryOp, dst, a, b []T) int {
	lanes := lanesOf[T]()
	n := len(dst) &^ (lanes - 1)
	if !hasAVX2 || n == 0 {
		return 0
	}
	d, x, y := unsafe.Pointer(&dst[0]), unsafe.Pointer(&a[0]), unsafe.Pointer(&b[0])
	switch {
	case op == kernels.Add && lanes == 8:
		binaryAddF32AVX2(d, x, y, n)
	case op == kernels.Sub && lanes == 8:
		binarySubF32AVX2(d, x, y, n)
	case op == kernels.Mul && lanes == 8:
		binaryMulF32AVX2(d, x, y, n)
	case op == kernels.Div && lanes == 8:
		binaryDivF32AVX2(d, x, y, n)
	case op == kernels.Add:
		binaryAddF64AVX2(d, x, y, n)
	case op == kernels.Sub:
		binarySubF64AVX2(d, x, y, n)
	case op == kernels.Mul:
		binaryMulF64AVX2(d, x, y, n)
	case op == kernels.Div:
		binaryDivF64AVX2(d, x, y, n)
	default:
		return 0
	}
	return n
}

// sumLanesVector is sumLanes over the first multiple of 16 elements of x; it returns
// how many it added.
func sumLanesVector[T float](acc *[16]float64, x []T) int {
	return lanesVector(acc, x, sumLanesF32AVX2, sumLanesF64AVX2)
}

// sumSquaresLanesVector is sumSquaresLanes over the first multiple of 16 elements of x;
// it returns how many it added.
func sumSquaresLanesVector[T float](acc *[16]float64, x []T) int {
	return lanesVector(acc, x, sumSquaresLanesF32AVX2, sumSquaresLanesF64AVX2)
}

// lanesVector runs a sixteen-lane loop of vec_amd64.s, f32's or f64's for T, over the
// first multiple of 16 elements of x and returns how many it folded.
func lanesVector[T float](acc *[16]float64, x []T, f32, f64 func(*[16]float64, unsafe.Pointer, int)) int {
	n := len(x) &^ 15
	if !hasAVX2 || n == 0 {
		return 0
	}
	if is32[T]() {
		f32(acc, unsafe.Pointer(&x[0]), n)
	} else {
		f64(acc, unsafe.Pointer(&x[0]), n)
	}
	return n
}

// sumRowPairsVector is sumRowsPaired's rows [0, 2h) (h = len(dst)/2) read in pairs h
// rows apart (row i beside row i + h) when n is a multiple of 16; it returns how many
// rows it did (2h or none).
func sumRowPairsVector[T float](dst []float64, x []T, ld, n int, square bool) int {
	h := len(dst) / 2
	if !hasAVX2 || h == 0 || n == 0 || n%16 != 0 {
		return 0
	}
	_ = x[(2*h-1)*ld+n-1] // inside x
	f := sumRowPairsF32AVX2
	switch {
	case is32[T]() && square:
		f = sumSquaresRowPairsF32AVX2
	case !is32[T]() && square:
		f = sumSquaresRowPairsF64AVX2
	case !is32[T]():
		f = sumRowPairsF64AVX2
	}
	f(&dst[0], unsafe.Pointer(&x[0]), ld, h, n, h)
	return 2 * h
}

// sumRowsVector is sumRows over every row when n is a multiple of 16; it returns how
// many rows it did (all or none).
func sumRowsVector[T float](dst []float64, x []T, ld, n int, square bool) int {
	rows := len(dst)
	if !hasAVX2 || n == 0 || n%16 != 0 || rows == 0 {
		return 0
	}
	_ = x[(rows-1)*ld+n-1] // inside x
	f := sumRowsF32AVX2
	switch {
	case is32[T]() && square:
		f = sumSquaresRowsF32AVX2
	case !is32[T]() && square:
		f = sumSquaresRowsF64AVX2
	case !is32[T]():
		f = sumRowsF64AVX2
	}
	f(&dst[0], unsafe.Pointer(&x[0]), ld, rows, n)
	return rows
}

// narrowVector is narrow over the first multiple of 16 elements for float32; it
// returns how many it did.
func narrowVector[T float](dst []T, src []float64) int {
	n := len(dst) &^ 15
	if !hasAVX2 || n == 0 || !is32[T]() {
		return 0
	}
	_ = src[n-1]
	narrowF32AVX2((*float32)(unsafe.Pointer(&dst[0])), &src[0], n)
	return n
}

// addRowsVector is addRows over the first multiple of 16 columns; it returns how many
// it did.
func addRowsVector[T float](acc []float64, x []T, ld, rows int) int {
	n := len(acc) &^ 15
	if !hasAVX2 || n == 0 || rows == 0 {
		return 0
	}
	_ = x[(rows-1)*ld+n-1] // inside x
	if is32[T]() {
		addRowsF32AVX2(&acc[0], unsafe.Pointer(&x[0]), ld, rows, n)
	} else {
		addRowsF64AVX2(&acc[0], unsafe.Pointer(&x[0]), ld, rows, n)
	}
	return n
}

// maxLanesVector finds, for each row of x (len(m) rows of n elements, ld apart), the
// maximum of its first multiple of four vectors (if it has four) and its index, as
// fold.addMax would, into m and pos; it returns how many elements of each row it
// scanned.
//
// Rows i and i + h (h = rows/2) are read together, two streams far apart where rows
// one after the other are one (maxLanePairs; reducing.pairs says what that gains);
// an odd last row alone.
func maxLanesVector[T float](m []T, pos []int, x []T, ld, n int) int {
	k, rows := n&^(4*lanesOf[T]()-1), len(m)
	if !hasAVX2 || k == 0 || rows == 0 {
		return 0
	}
	_, _ = pos[rows-1], x[(rows-1)*ld+k-1] // inside pos and x
	h, r := rows/2, rows&^1
	if h > 0 {
		if is32[T]() {
			maxLanePairsF32AVX2(unsafe.Pointer(&m[0]), &pos[0], unsafe.Pointer(&x[0]), ld, h, k, h)
		} else {
			maxLanePairsF64AVX2(unsafe.Pointer(&m[0]), &pos[0], unsafe.Pointer(&x[0]), ld, h, k, h)
		}
	}
	if r < rows {
		if is32[T]() {
			maxLanesF32AVX2(unsafe.Pointer(&m[r]), &pos[r], unsafe.Pointer(&x[r*ld]), ld, 1, k)
		} else {
			maxLanesF64AVX2(unsafe.Pointer(&m[r]), &pos[r], unsafe.Pointer(&x[r*ld]), ld, 1, k)
		}
	}
	return k
}

// maxColsVector finds, for the first whole vectors of the len(m) columns, the maximum
// of rows rows of x, ld apart, and its first row (fold.maxRows), into m and pos; it
// returns how many columns it did.
func maxColsVector[T float](m, pos, x []T, ld, rows int) int {
	n := len(m) &^ (lanesOf[T]() - 1)
	if !hasAVX2 || n == 0 || rows == 0 {
		return 0
	}
	_ = x[(rows-1)*ld+n-1] // inside x
	copy(m[:n], x)         // the first row
	clear(pos[:n])
	// Eight rows at a time, as addRows.
	for r := 1; r < rows; r += 8 {
		if is32[T]() {
			maxColsF32AVX2(unsafe.Pointer(&m[0]), unsafe.Pointer(&pos[0]), unsafe.Pointer(&x[r*ld]), ld, min(8, rows-r), n, r)
		} else {
			maxColsF64AVX2(unsafe.Pointer(&m[0]), unsafe.Pointer(&pos[0]), unsafe.Pointer(&x[r*ld]), ld, min(8, rows-r), n, r)
		}
	}
	return n
}

// reluVector is unaryRun's Relu over the first multiple of a vector's lanes of x
// (dst as long); it returns how many elements it did.
func reluVector[T float](dst, x []T) int {
	n := len(x) &^ (lanesOf[T]() - 1)
	if !hasAVX2 || n == 0 {
		return 0
	}
	d, s := unsafe.Pointer(&dst[0]), unsafe.Pointer(&x[0])
	if is32[T]() {
		reluF32AVX2(d, s, n)
	} else {
		reluF64AVX2(d, s, n)
	}
	return n
}

// reluGradVector is reluGradRun over the first multiple of a vector's lanes of g (dst
// and y as long); it returns how many elements it did.
func reluGradVector[T float](dst, g, y []T) int {
	n := len(g) &^ (lanesOf[T]() - 1)
	if !hasAVX2 || n == 0 {
		return 0
	}
	d, gp, yp := unsafe.Pointer(&dst[0]), unsafe.Pointer(&g[0]), unsafe.Pointer(&y[0])
	if is32[T]() {
		reluGradF32AVX2(d, gp, yp, n)
	} else {
		reluGradF64AVX2(d, gp, yp, n)
	}
	return n
}

// lanesOf is how many elements of T an AVX2 vector holds.
func lanesOf[T float]() int {
	if is32[T]() {
		return 8
	}
	return 4
}
