package cuda

import (
	"fmt"
	"math"
	"unsafe"

	cudadev "github.com/subletml/sublet/device/cuda"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
)

// walk mirrors src/common.cuh's Walk field for field (TestStructLayouts checks it
// against zconst.go): an elementwise kernel's output shape after merging, each
// operand's strides, first element's address, type and immediate value.
type walk struct {
	size   int64
	rank   int32
	ops    int32
	shape  [hdrMaxRank]int64
	stride [hdrMaxOps][hdrMaxRank]int64
	base   [hdrMaxOps]uint64
	dtype  [hdrMaxOps]int32
	imm    [hdrMaxOps]float64
}

// bytes views w as the kernel's by-value argument.
func (w *walk) bytes() []byte { return unsafe.Slice((*byte)(unsafe.Pointer(w)), unsafe.Sizeof(*w)) }

// wide reports whether the walk needs 64-bit indices: an offset or the grid's last
// index passes 2³¹-1 (a 32-bit index is cheaper on the GPU).
func (w *walk) wide(gridThreads int64) bool {
	if w.size+gridThreads > math.MaxInt32 {
		return true
	}
	for k := range w.ops {
		var span int64
		for d := range w.rank {
			span += (w.shape[d] - 1) * w.stride[k][d]
		}
		if span > math.MaxInt32 {
			return true
		}
	}
	return false
}

// denseWords reports whether w is one dimension of a multiple of per elements along
// which the first len(align) operands are dense, operand k starting at an address that
// is a multiple of align[k] bytes: what a map_words kernel (src/common.cuh) reads and
// writes.
func (w *walk) denseWords(per int64, align ...uint64) bool {
	if w.rank != 1 || w.size%per != 0 {
		return false
	}
	for k, a := range align {
		if w.stride[k][0] != 1 || w.base[k]%a != 0 {
			return false
		}
	}
	return true
}

// elemSize is dt's size in bytes; it panics on an invalid type, naming op.
func elemSize(op string, dt dtype.DType) int64 {
	n := int64(dt.Size())
	if n == 0 {
		panic(fmt.Sprintf("kernels/cuda: %s: operand of invalid type %v", op, dt))
	}
	return n
}

// checkOperand panics, naming op, unless o's layout is well-formed and inside its
// memory block.
func checkOperand(op string, o kernels.Operand) {
	size := elemSize(op, o.DType)
	if err := o.Check(int(o.Mem.Size / size)); err != nil {
		panic(fmt.Sprintf("kernels/cuda: %s: %v (a block of %d bytes of %v)", op, err, o.Mem.Size, o.DType))
	}
}

// addr is the device address of o's first element (its Offset applied).
func addr(o kernels.Operand) uint64 {
	return uint64(o.Mem.Ptr) + uint64(o.Offset)*uint64(o.DType.Size())
}

// requireWritable panics unless o is an output a kernel may write: inside its block,
// no element repeated along a dimension (stride 0, size above 1). An output with no
// elements writes nothing, whatever its strides.
func requireWritable(op string, o kernels.Operand) {
	checkOperand(op, o)
	if o.Size() == 0 {
		return
	}
	for i, d := range o.Shape {
		if d > 1 && o.Strides[i] == 0 {
			panic(fmt.Sprintf("kernels/cuda: %s: output (%v) repeats elements along dimension %d; write to a tensor that owns its elements", op, o.Layout, i))
		}
	}
}

// requireFloat panics unless o is a writable float output.
func requireFloat(op string, o kernels.Operand) {
	requireWritable(op, o)
	if !o.DType.IsFloat() {
		panic(fmt.Sprintf("kernels/cuda: %s: output must be float64, float32, float16 or bfloat16, not %v", op, o.DType))
	}
}

// in64 reports whether a kernel over ops computes in float64: one of them is F64 (a
// Scalar, whose DType is F64, and an absent operand do not count), kernels/cpu's
// choice between its float32 and float64 kernels.
func in64(ops ...kernels.Operand) bool {
	for _, o := range ops {
		if _, imm := o.ScalarValue(); !imm && o.DType == dtype.F64 {
			return true
		}
	}
	return false
}

// number is v as a kernel's argument of its compute type: a double for an _f64
// kernel, else v rounded to float32 once, as kernels/cpu rounds a number argument for
// its float32 kernels.
func number(f64 bool, v float64) cudadev.Arg {
	if f64 {
		return cudadev.ArgFloat64(v)
	}
	return cudadev.ArgFloat32(float32(v))
}

// newWalk fills w with the walk of out's shape and the inputs broadcast to it (numpy
// rules), dimensions of size 1 dropped and neighbours dense for every operand merged,
// as kernels/cpu's iterator does. A Scalar input is an immediate, read as kernels/cpu
// reads it: its value itself when out is F64, else rounded to float32; an absent one
// the immediate 0. It reports whether the output has any element (false: nothing to
// launch). The output was checked.
func newWalk(op string, w *walk, out kernels.Operand, ins ...kernels.Operand) bool {
	r := len(out.Shape)
	var shape [hdrMaxRank]int64
	var st [hdrMaxOps][hdrMaxRank]int64
	size := int64(1)
	for i, n := range out.Shape {
		shape[i] = int64(n)
		st[0][i] = int64(out.Strides[i])
		size *= int64(n)
	}
	ops := 1 + len(ins)
	w.ops = int32(ops)
	w.base[0], w.dtype[0] = addr(out), int32(out.DType)
	for k, in := range ins {
		if v, ok := in.ScalarValue(); ok || in.Absent() {
			if out.DType != dtype.F64 {
				v = float64(float32(v))
			}
			w.dtype[k+1], w.imm[k+1] = hdrImm, v
			continue
		}
		checkOperand(op, in)
		d := r - len(in.Shape)
		if d < 0 {
			panic(fmt.Sprintf("kernels/cuda: %s: input %d (%v) has more dimensions than the output %v", op, k, in.Shape, out.Shape))
		}
		for i, n := range in.Shape {
			switch {
			case n == 1: // stride stays 0: repeat along this dimension
			case int64(n) == shape[d+i]:
				st[k+1][d+i] = int64(in.Strides[i])
			default:
				panic(fmt.Sprintf("kernels/cuda: %s: input %d of shape %v does not broadcast to %v", op, k, in.Shape, out.Shape))
			}
		}
		w.base[k+1], w.dtype[k+1] = addr(in), int32(in.DType)
	}
	w.size = size
	w.rank = int32(merge(ops, r, &shape, &st, &w.shape, &w.stride))
	return size > 0
}

// merge writes into ms and mst the r dimensions of shape with each of ops operands'
// strides st, dimensions of size 1 dropped and neighbours that are dense for every
// operand merged, innermost last, and returns the number of dimensions (at least 1).
func merge(ops, r int, shape *[hdrMaxRank]int64, st *[hdrMaxOps][hdrMaxRank]int64, ms *[hdrMaxRank]int64, mst *[hdrMaxOps][hdrMaxRank]int64) int {
	var rs [hdrMaxRank]int64
	var rst [hdrMaxOps][hdrMaxRank]int64
	n := 0 // built innermost first
	for i := r - 1; i >= 0; i-- {
		if shape[i] == 1 {
			continue
		}
		if n > 0 {
			dense := true
			for k := range ops {
				if st[k][i] != rst[k][n-1]*rs[n-1] {
					dense = false
					break
				}
			}
			if dense {
				rs[n-1] *= shape[i]
				continue
			}
		}
		rs[n] = shape[i]
		for k := range ops {
			rst[k][n] = st[k][i]
		}
		n++
	}
	if n == 0 {
		rs[0], n = 1, 1
	}
	for i := range n {
		ms[i] = rs[n-1-i]
		for k := range ops {
			mst[k][i] = rst[k][n-1-i]
		}
	}
	return n
}
