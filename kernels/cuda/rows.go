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

// rowStorage is the type the row operands of a softmax or layer norm call are stored
// in, from its first input x: F32, F64, F16 or BF16 (every other row operand must then
// be of it, which rowOperand checks; another type of x fails there as F32). They
// compute in rowType(x): F64 for F64 rows, F32 otherwise, the type of their statistics.
func rowStorage(x kernels.Operand) dtype.DType {
	switch x.DType {
	case dtype.F64, dtype.F16, dtype.BF16:
		return x.DType
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

// regsRow is the longest row the register-row kernels take in a block (a warp takes
// up to warpRow): each of its threads keeps hdrRowChunks chunks of 4 elements.
const regsRow = block * hdrRowChunks * 4

// regs4Row is the longest row the block4 forms of the 16-bit register-row kernels take:
// hdrRowChunksBlock4 chunk slots a thread instead of hdrRowChunks, the same chunks in
// the same slots, so the same bits as the block form, in fewer registers (more blocks
// an SM: the block form of 16-bit rows of 4096 ran at 56-63% of a copy on the H100).
const regs4Row = block * hdrRowChunksBlock4 * 4

// rowKernel picks the kernel for rows of n elements stored as st (rowStorage), and the
// threads a row gets: for float32 rows of up to regsRow, the register-row kernel of
// regsWarp's form, for F16 and BF16 ones regs16Warp's (formRegs16), else the one that
// reads its row from memory (memWarp's: formF64, its block form formStore); the warp
// form for rows of up to warpRow, the block form (the next base) beyond, for 16-bit
// rows of up to regs4Row the block4 form (the base after the block form). A
// register-row kernel moves 16 bytes a load when n is a multiple of a 16-byte word's
// elements (4 float32, 8 16-bit) and every row operand (0: absent) is on 16 bytes,
// with the same bits as its other variant.
func rowKernel(regsWarp, regs16Warp, memWarp kernel, st dtype.DType, n int, ptrs ...uint64) (kernel, int) {
	k, g, word := regsWarp, 32, 4
	switch st {
	case dtype.F16:
		k, word = regs16Warp, 8
	case dtype.BF16:
		k, word = regs16Warp+vRegsBF16, 8
	}
	regs := st != dtype.F64 && n <= regsRow
	if !regs {
		k = memWarp.stored(st)
	}
	if n > warpRow {
		k, g = k+variants, block
		if regs && word == 8 && n <= regs4Row {
			k += variants
		}
	}
	if !regs || n%word != 0 {
		return k, g
	}
	for _, p := range ptrs {
		if p%16 != 0 {
			return k, g
		}
	}
	return k + vV16, g
}
