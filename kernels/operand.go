package kernels

import (
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
)

// Mem is the memory block an Operand's layout indexes, from the block's first byte:
// an allocator block as the tensor package holds it. Which fields a backend reads
// depends on where the device keeps its data (device.Residency): the CPU backend reads
// Host, a GPU backend Ptr; the meta backend reads neither.
type Mem struct {
	// Host is the block's bytes where the CPU addresses them (device.Host), else nil.
	Host []byte
	// Ptr is the block's address on its device.
	Ptr device.Ptr
	// Size is the block's size in bytes; a layout must stay inside it.
	Size int64
	// Stream is the stream the block's work is ordered on (its allocation stream); a
	// backend runs a kernel on its first output's stream.
	Stream device.Stream
}

// Operand is one tensor argument of a kernel: elements of DType placed in Mem by the
// embedded Layout (counted in elements, not bytes). The zero Operand stands for an
// argument that is absent (a layer norm without weight, a gradient nobody wants).
type Operand struct {
	Layout
	DType dtype.DType
	Mem   Mem
	// scalar marks an immediate (Scalar): value stands in for Mem.
	scalar bool
	value  float64
}

// Scalar returns v as a rank-0 operand that carries its value instead of memory: the
// constant of a binary op with a number (AddScalar, MulScalar, PowScalar), which a GPU
// backend passes by value. Its DType is F64, the type of the value it carries, but
// like PyTorch's wrapped numbers it takes no part in choosing the type an op computes
// in: a backend reads it in that type (float32 for an F32 op, float64 for an F64 one).
func Scalar(v float64) Operand { return Operand{DType: dtype.F64, scalar: true, value: v} }

// ScalarValue returns the value of an operand made by Scalar; ok is false for any other.
func (o Operand) ScalarValue() (v float64, ok bool) { return o.value, o.scalar }

// Absent reports whether o is the zero Operand, an argument left out.
func (o Operand) Absent() bool { return o.DType == dtype.Invalid }
