package cpu

import (
	"math"
	"sync"
	"unsafe"

	"github.com/chewxy/math32"

	"github.com/subletml/sublet/dtype"
)

// float is the type a float kernel computes in: float32 for F32, F16 and BF16
// operands, float64 when one of them is F64 (so no F64 value goes through float32).
// Kernels are written once over it; the float32 instantiation keeps the float32
// routines it always ran (math32, the vector exp), the float64 one runs package math.
type float interface{ float32 | float64 }

// is32 reports whether T is float32. The compiler folds it to a constant in each
// instantiation, so a branch on it costs nothing.
func is32[T float]() bool {
	var z T
	return unsafe.Sizeof(z) == 4
}

// poolFor is the pool of pools for T: pools[0] for float32, pools[1] for float64.
func poolFor[T float](pools *[2]sync.Pool) *sync.Pool {
	if is32[T]() {
		return &pools[0]
	}
	return &pools[1]
}

// native is the DType of T.
func native[T float]() dtype.DType {
	if is32[T]() {
		return dtype.F32
	}
	return dtype.F64
}

// wide reports whether a kernel over ops computes in float64: one of them is F64.
func wide(ops ...Operand) bool {
	for i := range ops {
		if ops[i].dt == dtype.F64 {
			return true
		}
	}
	return false
}

// byType returns f64 when one of dts is F64 and f32 otherwise: the two instantiations
// of a generic kernel, chosen once per call.
func byType[F any](f32, f64 F, dts ...dtype.DType) F {
	for _, d := range dts {
		if d == dtype.F64 {
			return f64
		}
	}
	return f32
}

// as32 views s as []float32 when T is float32 (ok false otherwise), for the float32
// routines that have no float64 form (the vector exp).
func as32[T float](s []T) (v []float32, ok bool) {
	if !is32[T]() {
		return nil, false
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(s))), len(s)), true
}

// The functions below are the math of one element in T: math32's for float32 (what
// the float32 kernels always computed), math's for float64.

func abs[T float](x T) T {
	if is32[T]() {
		return T(math32.Abs(float32(x)))
	}
	return T(math.Abs(float64(x)))
}

// logOf returns ln in T, as a closure for the reason powOf gives.
func logOf[T float]() func(T) T {
	return func(x T) T {
		if is32[T]() {
			return T(math32.Log(float32(x)))
		}
		return T(math.Log(float64(x)))
	}
}

// log1pOf returns ln(1+x) in T, as a closure for the reason powOf gives.
func log1pOf[T float]() func(T) T {
	return func(x T) T {
		if is32[T]() {
			return T(math32.Log1p(float32(x)))
		}
		return T(math.Log1p(float64(x)))
	}
}

// expOf returns e^x in T (one element; the vector exp is for whole chunks), as a
// closure for the reason powOf gives.
func expOf[T float]() func(T) T {
	return func(x T) T {
		if is32[T]() {
			return T(math32.Exp(float32(x)))
		}
		return T(math.Exp(float64(x)))
	}
}

// sqrtf is one expression the compiler turns into SQRTSS for float32 (the correctly
// rounded square root, as math32.Sqrt) and SQRTSD for float64.
func sqrtf[T float](x T) T { return T(math.Sqrt(float64(x))) }

// erfOf returns erf in T, as a closure for the reason powOf gives.
func erfOf[T float]() func(T) T {
	return func(x T) T {
		if is32[T]() {
			return T(math32.Erf(float32(x)))
		}
		return T(math.Erf(float64(x)))
	}
}

// powOf returns x^y in T. It returns a closure, not the function itself: a call of a
// generic function that calls one function per branch is too costly to inline, a
// closure literal is inlined with T's branch alone, so float32 loops call math32.Pow
// directly.
func powOf[T float]() func(x, y T) T {
	return func(x, y T) T {
		if is32[T]() {
			return T(math32.Pow(float32(x), float32(y)))
		}
		return T(math.Pow(float64(x), float64(y)))
	}
}

func isInf[T float](x T) bool { return x-x != 0 && x == x }

// toF16Of and toBF16Of return the rounding of a T to the 16-bit formats, once, as
// closures for the reason powOf gives.
func toF16Of[T float]() func(T) uint16 {
	return func(x T) uint16 {
		if is32[T]() {
			return dtype.F32ToF16(float32(x))
		}
		return dtype.F64ToF16(float64(x))
	}
}

func toBF16Of[T float]() func(T) uint16 {
	return func(x T) uint16 {
		if is32[T]() {
			return dtype.F32ToBF16(float32(x))
		}
		return dtype.F64ToBF16(float64(x))
	}
}
