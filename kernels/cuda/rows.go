package cuda

import (
	"fmt"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
)

// Element types of row operands.
const (
	f32   = dtype.F32
	i64   = dtype.I64
	bool8 = dtype.Bool
)

// rowType is the type a row kernel computes in, from its first input x, as kernels/cpu
// chooses: F64 for F64 rows, F32 otherwise (every other float operand must then be of
// that type, which rowOperand checks).
func rowType(x kernels.Operand) dtype.DType {
	if x.DType == dtype.F64 {
		return dtype.F64
	}
	return f32
}

// rowOperand returns the device address of o's first element for a kernel that reads
// o as a contiguous array of dt (the row kernels: softmax, layer norm, losses,
// embedding, optimizer steps), or 0 for an absent operand. It panics, naming op, when
// o is of another type, strided, or reaches past its block.
func rowOperand(op string, o kernels.Operand, dt dtype.DType) uint64 {
	if o.Absent() {
		return 0
	}
	if o.DType != dt || !o.IsContiguous() {
		panic(fmt.Sprintf("kernels/cuda: %s: a row operand must be contiguous %v, not %v (%v)", op, dt, o.DType, o.Layout))
	}
	checkOperand(op, o)
	return addr(o)
}

// rowsOf is rowOperand for an operand that must hold exactly n elements.
func rowsOf(op, what string, o kernels.Operand, dt dtype.DType, n int) uint64 {
	p := rowOperand(op, o, dt)
	if !o.Absent() && o.Size() != n {
		panic(fmt.Sprintf("kernels/cuda: %s: %s has %d elements, want %d", op, what, o.Size(), n))
	}
	return p
}

// ptrOf is o's first element's address as a device pointer.
func (b *Backend) ptrOf(o kernels.Operand) device.Ptr { return device.Ptr(addr(o)) }

// floatScalar returns the address and type code of a one-element float operand (a
// loss, its gradient), which a kernel reads or writes with ld/st.
func floatScalar(op, what string, o kernels.Operand) (uint64, int32) {
	checkOperand(op, o)
	if !o.DType.IsFloat() || o.Size() != 1 {
		panic(fmt.Sprintf("kernels/cuda: %s: %s must be one floating element, not %v %v", op, what, o.DType, o.Shape))
	}
	return addr(o), int32(o.DType)
}
