package kernels

import (
	"fmt"
	"math"

	"github.com/subletml/sublet/dtype"
)

// CompareOp names an elementwise comparison, whose result is Bool.
type CompareOp uint8

const (
	Eq CompareOp = iota + 1 // a == b (NaN equals nothing)
	Ne                      // a != b (NaN differs from everything)
	Lt                      // a < b
	Le                      // a <= b
	Gt                      // a > b
	Ge                      // a >= b
)

func (op CompareOp) String() string {
	switch op {
	case Eq:
		return "eq"
	case Ne:
		return "ne"
	case Lt:
		return "lt"
	case Le:
		return "le"
	case Gt:
		return "gt"
	case Ge:
		return "ge"
	}
	return fmt.Sprintf("kernels.CompareOp(%d)", uint8(op))
}

// Valid reports whether op is one of the CompareOps above.
func (op CompareOp) Valid() bool { return op >= Eq && op <= Ge }

// CompareType is the type Compare compares a and b in, PyTorch's result type of the
// pair: I64 when both are integers or Bool (a Scalar holding an integer counts as
// one), every integer compared exactly; otherwise the floating type they promote to
// (dtype.Promote), a Scalar taking the other operand's floating type, or F32 beside
// an integer tensor (PyTorch's default type for a Python float). Each operand is
// rounded once to that type, then compared. At most one of a and b is a Scalar.
func CompareType(a, b Operand) dtype.DType {
	va, sa := a.ScalarValue()
	vb, sb := b.ScalarValue()
	switch {
	case sa && sb:
		panic("kernels: Compare of two Scalars")
	case sa:
		return scalarCompareType(va, b.DType)
	case sb:
		return scalarCompareType(vb, a.DType)
	}
	t := dtype.Promote(a.DType, b.DType)
	if !t.IsFloat() {
		return dtype.I64
	}
	return t
}

// scalarCompareType is CompareType of a tensor of dt and the Scalar v.
func scalarCompareType(v float64, dt dtype.DType) dtype.DType {
	switch {
	case dt.IsFloat():
		return dt
	case IsInteger(v):
		return dtype.I64
	}
	return dtype.F32
}

// IsInteger reports whether v is an integer an int64 holds: a Scalar that compares
// with integer tensors exactly.
func IsInteger(v float64) bool { return v == math.Trunc(v) && v >= -0x1p63 && v < 0x1p63 }
