package cpu

import (
	"fmt"
	"unsafe"

	"github.com/subletml/sublet/kernels"

	"github.com/subletml/sublet/dtype"
)

// Operand is a strided view of typed memory: what the elementwise, copy and reduction
// kernels read and write. Build one with F64, F32, F16, BF16, I32, I64, Bool or
// FromBytes; they check that the Layout stays inside the buffer.
type Operand struct {
	kernels.Layout
	dt   dtype.DType
	data unsafe.Pointer // element 0 of the buffer; nil when the buffer is empty
	n    int            // elements in the buffer
}

func newOperand[T any](dt dtype.DType, data []T, l kernels.Layout) Operand {
	checkLayout("operand", dt, l, len(data))
	return Operand{Layout: l, dt: dt, data: unsafe.Pointer(unsafe.SliceData(data)), n: len(data)}
}

// F32 views data as float32 elements placed by l.
func F32(data []float32, l kernels.Layout) Operand { return newOperand(dtype.F32, data, l) }

// F64 views data as float64 elements placed by l.
func F64(data []float64, l kernels.Layout) Operand { return newOperand(dtype.F64, data, l) }

// F16 views data as IEEE half elements (bits) placed by l.
func F16(data []uint16, l kernels.Layout) Operand { return newOperand(dtype.F16, data, l) }

// BF16 views data as bfloat16 elements (bits) placed by l.
func BF16(data []uint16, l kernels.Layout) Operand { return newOperand(dtype.BF16, data, l) }

// I32 views data as int32 elements placed by l.
func I32(data []int32, l kernels.Layout) Operand { return newOperand(dtype.I32, data, l) }

// I64 views data as int64 elements placed by l.
func I64(data []int64, l kernels.Layout) Operand { return newOperand(dtype.I64, data, l) }

// Bool views data as bool elements (one byte each, 0 or 1) placed by l.
func Bool(data []uint8, l kernels.Layout) Operand { return newOperand(dtype.Bool, data, l) }

// FromBytes views raw bytes as elements of dt placed by l (Offset and Strides count
// elements). b must be aligned to dt.Size(), as allocator blocks are.
func FromBytes(dt dtype.DType, b []byte, l kernels.Layout) Operand {
	size := dt.Size()
	if size == 0 {
		panic(fmt.Sprintf("kernels/cpu: FromBytes: invalid dtype %v", dt))
	}
	p := unsafe.Pointer(unsafe.SliceData(b))
	if uintptr(p)%uintptr(size) != 0 {
		panic(fmt.Sprintf("kernels/cpu: FromBytes: %v buffer at %p is not %d-byte aligned", dt, p, size))
	}
	checkLayout("FromBytes", dt, l, len(b)/size)
	return Operand{Layout: l, dt: dt, data: p, n: len(b) / size}
}

// checkLayout panics with a message naming op and dt when l is malformed or needs more
// than n elements.
func checkLayout(op string, dt dtype.DType, l kernels.Layout, n int) {
	if err := l.Check(n); err != nil {
		panic(fmt.Sprintf("kernels/cpu: %s %v: %v", op, dt, err))
	}
}

// DType is the element type of the operand.
func (o Operand) DType() dtype.DType { return o.dt }

// f32s and the others below return the whole buffer as a typed slice.
func (o Operand) f32s() []float32 { return unsafe.Slice((*float32)(o.data), o.n) }
func (o Operand) f64s() []float64 { return unsafe.Slice((*float64)(o.data), o.n) }
func (o Operand) u16s() []uint16  { return unsafe.Slice((*uint16)(o.data), o.n) }
func (o Operand) i32s() []int32   { return unsafe.Slice((*int32)(o.data), o.n) }
func (o Operand) i64s() []int64   { return unsafe.Slice((*int64)(o.data), o.n) }
func (o Operand) u8s() []uint8    { return unsafe.Slice((*uint8)(o.data), o.n) }

// elems returns the whole buffer as []T; the operand must hold T (native[T]).
func elems[T float](o *Operand) []T { return unsafe.Slice((*T)(o.data), o.n) }

// chunk is how many elements the kernels convert through stack scratch at a time.
const chunk = 256

// load returns the n ≤ chunk elements at off, off+s, … as T: a view of the buffer
// when it holds T with stride 1, else a conversion into buf (F64 to float32 rounds to
// nearest; every other conversion to float64, and F16, BF16 and I32 to float32 are
// exact).
func load[T float](o *Operand, off, s, n int, buf *[chunk]T) []T {
	if o.dt == native[T]() && s == 1 {
		return elems[T](o)[off : off+n : off+n]
	}
	dst := buf[:n]
	if d, ok := as32(dst); ok && o.dt == dtype.F16 && s == 1 {
		dtype.F16sToF32s(d, o.u16s()[off:off+n])
		return dst
	}
	switch o.dt {
	case dtype.F32:
		gather(dst, o.f32s(), off, s, func(v float32) T { return T(v) })
	case dtype.F64:
		gather(dst, o.f64s(), off, s, func(v float64) T { return T(v) })
	case dtype.F16:
		gather(dst, o.u16s(), off, s, func(h uint16) T { return T(dtype.F16ToF32(h)) })
	case dtype.BF16:
		gather(dst, o.u16s(), off, s, func(h uint16) T { return T(dtype.BF16ToF32(h)) })
	case dtype.I32:
		gather(dst, o.i32s(), off, s, func(v int32) T { return T(v) })
	case dtype.I64:
		gather(dst, o.i64s(), off, s, func(v int64) T { return T(v) })
	case dtype.Bool:
		gather(dst, o.u8s(), off, s, func(v uint8) T { return T(v) })
	}
	return dst
}

// gather writes f(src[off+i·s]) into dst[i] for every i; it inlines, and f with it.
func gather[S, D any](dst []D, src []S, off, s int, f func(S) D) {
	for i := range dst {
		dst[i] = f(src[off+i*s])
	}
}

// scatter writes f(src[i]) into dst[off+i·s] for every i; it inlines, and f with it.
func scatter[S, D any](dst []D, off, s int, src []S, f func(S) D) {
	for i, v := range src {
		dst[off+i*s] = f(v)
	}
}

// out returns where a float kernel should write n ≤ chunk results of type T for off,
// off+s, …: the buffer itself when it holds T with stride 1 (then flush is a no-op),
// else buf, which flush then stores.
func out[T float](o *Operand, off, s, n int, buf *[chunk]T) []T {
	if o.dt == native[T]() && s == 1 {
		return elems[T](o)[off : off+n : off+n]
	}
	return buf[:n]
}

// flush stores v (from out) at off, off+s, … converting to the operand's float type,
// rounding once.
func flush[T float](o *Operand, off, s int, v []T) {
	if o.dt == native[T]() && s == 1 {
		return // out handed out the buffer itself
	}
	switch o.dt {
	case dtype.F32:
		scatter(o.f32s(), off, s, v, func(x T) float32 { return float32(x) })
	case dtype.F64:
		scatter(o.f64s(), off, s, v, func(x T) float64 { return float64(x) })
	case dtype.F16:
		if v32, ok := as32(v); ok && s == 1 {
			dtype.F32sToF16s(o.u16s()[off:off+len(v)], v32)
			return
		}
		scatter(o.u16s(), off, s, v, toF16Of[T]())
	case dtype.BF16:
		scatter(o.u16s(), off, s, v, toBF16Of[T]())
	}
}

// requireWritable panics when o repeats an element along a dimension (stride 0, size
// above 1): several results would land on one element, in no defined order. An
// output with no elements writes nothing (Contiguous(3, 0) has strides [0 1]).
func (o *Operand) requireWritable(op string) {
	if o.Size() == 0 {
		return
	}
	for i, d := range o.Shape {
		if d > 1 && o.Strides[i] == 0 {
			panic(fmt.Sprintf("kernels/cpu: %s: output (%v) repeats elements along dimension %d; write to a tensor that owns its elements", op, o.Layout, i))
		}
	}
}

// requireFloat panics unless o is a float output a kernel may write.
func (o *Operand) requireFloat(op string) {
	o.requireWritable(op)
	if !o.dt.IsFloat() {
		panic(fmt.Sprintf("kernels/cpu: %s: output must be float64, float32, float16 or bfloat16, not %v", op, o.dt))
	}
}
