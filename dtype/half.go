package dtype

import (
	"fmt"
	"math"

	"github.com/x448/float16"
)

// F32ToF16 rounds f to the nearest F16 (ties to even) and returns its bits.
func F32ToF16(f float32) uint16 { return uint16(float16.Fromfloat32(f)) }

// F16ToF32 returns the float32 equal to the F16 with bits h.
func F16ToF32(h uint16) float32 { return float16.Frombits(h).Float32() }

// F32ToBF16 rounds f to the nearest BF16 (ties to even) and returns its bits. A NaN
// keeps its sign and upper payload and is made quiet, so it cannot turn into Inf.
func F32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x0040
	}
	// Adding 0x7fff plus the lowest kept bit rounds to nearest even; a carry out of the
	// exponent turns the largest values into Inf, as rounding should.
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}

// BF16ToF32 returns the float32 equal to the BF16 with bits h.
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F64ToF16 rounds f to the nearest F16 (ties to even) and returns its bits: one
// rounding, where float32(f) first could round twice (a value just above a tie would
// fall on the tie and go to even).
func F64ToF16(f float64) uint16 { return F32ToF16(toOdd32(f)) }

// F64ToBF16 rounds f to the nearest BF16 (ties to even) once, as F64ToF16 does.
func F64ToBF16(f float64) uint16 { return F32ToBF16(toOdd32(f)) }

// toOdd32 rounds f to float32 toward zero and, when that is inexact, sets the lowest
// bit ("round to odd"). Rounding that result to nearest in a format with at least two
// bits fewer (F16 keeps 11, BF16 8 of float32's 24) gives f correctly rounded: an
// inexact value never lands on a tie of the narrower format. Beyond float32's range
// it gives ±MaxFloat32, which both narrower formats round to ±Inf, as f should.
func toOdd32(f float64) float32 {
	r := float32(f)
	if float64(r) == f || f != f {
		return r
	}
	b := math.Float32bits(r)
	if math.Abs(float64(r)) > math.Abs(f) { // rounded away from zero: step back
		b--
	}
	return math.Float32frombits(b | 1)
}

// F32sToF16s converts src into dst element by element; len(dst) must be len(src).
func F32sToF16s(dst []uint16, src []float32) {
	checkLen(len(dst), len(src))
	done := f32sToF16sFast(dst, src)
	for i, v := range src[done:] {
		dst[done+i] = F32ToF16(v)
	}
}

// F16sToF32s converts src into dst element by element; len(dst) must be len(src).
func F16sToF32s(dst []float32, src []uint16) {
	checkLen(len(dst), len(src))
	done := f16sToF32sFast(dst, src)
	for i, h := range src[done:] {
		dst[done+i] = F16ToF32(h)
	}
}

// F32sToBF16s converts src into dst element by element; len(dst) must be len(src).
func F32sToBF16s(dst []uint16, src []float32) {
	checkLen(len(dst), len(src))
	for i, v := range src {
		dst[i] = F32ToBF16(v)
	}
}

// BF16sToF32s converts src into dst element by element; len(dst) must be len(src).
func BF16sToF32s(dst []float32, src []uint16) {
	checkLen(len(dst), len(src))
	for i, h := range src {
		dst[i] = BF16ToF32(h)
	}
}

// checkLen panics when a slice conversion is handed slices of different lengths: a
// caller bug, like an index out of range.
func checkLen(dst, src int) {
	if dst != src {
		panic(fmt.Sprintf("dtype: converting %d elements into a slice of %d", src, dst))
	}
}
