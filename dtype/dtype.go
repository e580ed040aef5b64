// Package dtype names the element types a tensor can hold and converts between the
// 16-bit float formats and float32 and float64.
//
// Use: dtype.F32 and the others name a tensor's type (t.DType()); d.Size() is its
// element size and d.IsFloat() says whether it is floating; F32ToF16, F16ToF32,
// F32ToBF16 and BF16ToF32 (and their slice forms) convert one value at a time.
//
// Invariants:
//   - The zero DType is Invalid; every valid DType has a fixed Size in bytes and a
//     stable String name (the names PyTorch uses without the "torch." prefix).
//   - Conversions to F16 and BF16, from float32 or float64, round to nearest, ties to
//     even, once (a float64 is not rounded to float32 first); values beyond the
//     format's range become ±Inf, NaN stays NaN (quiet) and the sign of zero is kept.
//   - Conversions from F16 and BF16 to float32 (and so to float64) are exact.
//
// F16 and BF16 values travel as their bit patterns in uint16; they have no arithmetic of
// their own: compute in float32 and convert at the edges. F32 and F64 are Go's float32
// and float64.
package dtype

import "fmt"

// DType is the element type of a tensor.
type DType uint8

const (
	// Invalid is the zero DType; no tensor has it.
	Invalid DType = iota
	// F32 is IEEE 754 binary32 (float32).
	F32
	// F16 is IEEE 754 binary16 ("half"), stored as its bits in a uint16.
	F16
	// BF16 is bfloat16 (float32's upper 16 bits), stored as its bits in a uint16.
	BF16
	// I32 is int32.
	I32
	// I64 is int64; class labels and embedding indices are I64.
	I64
	// Bool is one byte per element, 0 or 1; masks (dropout) are Bool.
	Bool
	// F64 is IEEE 754 binary64 (float64), computed in float64 throughout. It comes last
	// so that the values of the types before it stay what they were.
	F64
)

// All lists every valid DType in declaration order.
func All() []DType { return []DType{F32, F16, BF16, I32, I64, Bool, F64} }

// Size is the number of bytes one element takes; 0 for Invalid or unknown values.
func (d DType) Size() int {
	switch d {
	case F32, I32:
		return 4
	case F16, BF16:
		return 2
	case I64, F64:
		return 8
	case Bool:
		return 1
	}
	return 0
}

// IsFloat reports whether d is a floating-point type (F64, F32, F16, BF16).
func (d DType) IsFloat() bool { return d == F32 || d == F16 || d == BF16 || d == F64 }

// Is16 reports whether d is a 16-bit floating-point type (F16, BF16): the storage
// types that kernels read into float32 and compute in it.
func (d DType) Is16() bool { return d == F16 || d == BF16 }

// IsValid reports whether d is one of the declared types other than Invalid.
func (d DType) IsValid() bool { return d >= F32 && d <= F64 }

func (d DType) String() string {
	switch d {
	case Invalid:
		return "invalid"
	case F32:
		return "float32"
	case F16:
		return "float16"
	case BF16:
		return "bfloat16"
	case I32:
		return "int32"
	case I64:
		return "int64"
	case Bool:
		return "bool"
	case F64:
		return "float64"
	}
	return fmt.Sprintf("dtype.DType(%d)", uint8(d))
}

// Round returns x rounded to the nearest value of the floating type d, ties to even,
// once (as the conversions of this package round): float32(x) for F32, the 16-bit
// formats from x itself, x for F64. For the other types it returns x.
func (d DType) Round(x float64) float64 {
	switch d {
	case F32:
		return float64(float32(x))
	case F16:
		return float64(F16ToF32(F64ToF16(x)))
	case BF16:
		return float64(BF16ToF32(F64ToBF16(x)))
	}
	return x
}

// Promote is the type two operands compute in, PyTorch's rule: floating beats
// integer, F64 beats every other type, F32 beats the 16-bit floats (and F16 with BF16
// gives F32), I64 beats I32 beats Bool.
func Promote(a, b DType) DType {
	if a == b {
		return a
	}
	ra, rb := promotionRank(a), promotionRank(b)
	switch {
	case ra == 3 && rb == 3:
		return F32
	case ra > rb:
		return a
	}
	return b
}

// promotionRank orders the types for Promote; F16 and BF16 share a rank.
func promotionRank(d DType) int {
	switch d {
	case Bool:
		return 0
	case I32:
		return 1
	case I64:
		return 2
	case F16, BF16:
		return 3
	case F32:
		return 4
	}
	return 5
}

// Parse returns the DType whose String is s; it also accepts the short names f64, f32,
// f16, bf16, i32, i64 and the aliases double, float and half (PyTorch's).
func Parse(s string) (DType, error) {
	switch s {
	case "float32", "f32", "float":
		return F32, nil
	case "float16", "f16", "half":
		return F16, nil
	case "bfloat16", "bf16":
		return BF16, nil
	case "int32", "i32":
		return I32, nil
	case "int64", "i64":
		return I64, nil
	case "bool":
		return Bool, nil
	case "float64", "f64", "double":
		return F64, nil
	}
	return Invalid, fmt.Errorf("dtype: unknown dtype %q; use one of float64, float32, float16, bfloat16, int32, int64, bool", s)
}
