package tensor

import (
	"fmt"
	"math"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
	"github.com/subletml/sublet/kernels/cpu"
)

// Elem is a Go element type that host slices of tensor data can have.
type Elem interface {
	~float32 | ~float64 | ~int32 | ~int64 | ~int | ~uint8
}

// isFloat reports whether T is a floating-point type.
func isFloat[T Elem]() bool {
	half := 0.5
	return T(half) != 0
}

// FromSlice returns a tensor of dt and shape on dev owned by s holding a copy of data
// (len(data) must be the shape's element count; no shape means a 1-D tensor of
// len(data)). Data converts only exactly (the package doc's conversion rules): every
// value must be one dt holds, so FromSlice never rounds, truncates or saturates. A
// value dt cannot hold (a float64 0.1 for F32, 1.5 or 3e9 for I32, 2 for Bool) panics
// with ErrDType naming it; give data of a type dt holds (float64 data makes F64
// tensors), or round explicitly: Cast an F64 tensor, or convert the slice in Go.
func FromSlice[T Elem](s *Scope, dev device.Device, dt dtype.DType, data []T, shape ...int) *Tensor {
	const op = "FromSlice"
	if len(shape) == 0 {
		shape = []int{len(data)}
	}
	if numel(shape) != len(data) {
		fail(op, ErrShape, nil, "%d values for shape %v (%d elements)", len(data), shape, numel(shape))
	}
	if i := inexact(data, dt); i >= 0 {
		fail(op, ErrDType, nil, "value %v at %d has no exact %v; pass %s, or Cast a tensor that holds it",
			data[i], i, dt, holderOf(dt))
	}
	c, t := s.newFactory(op, dev, dt, shape, false)
	c.upload(t, func() cpu.Operand { return hostOperand(data, t.shape) })
	return c.done(t)
}

// holderOf says what data a tensor of dt can be made from, for the errors above.
func holderOf(dt dtype.DType) string {
	if dt.IsFloat() {
		return fmt.Sprintf("values %v holds (float64 data for a float64 tensor)", dt)
	}
	return fmt.Sprintf("integers in %v's range", dt)
}

// inexact returns the position of the first value of data that dt does not hold
// exactly, -1 when it holds them all. NaN and ±Inf are held by every floating type.
func inexact[T Elem](data []T, dt dtype.DType) int {
	if o, ok := viewOf(data, kernels.Layout{Shape: []int{len(data)}, Strides: []int{1}}); ok && holds(dt, o.DType()) {
		return -1 // dt holds every value of T (float32 data in F32, say): nothing to check
	}
	for i, v := range data {
		var ok bool
		if isFloat[T]() {
			ok = floatFits(float64(v), dt)
		} else {
			ok = intFits(int64(v), dt)
		}
		if !ok {
			return i
		}
	}
	return -1
}

// floatFits reports whether dt holds the float x exactly.
func floatFits(x float64, dt dtype.DType) bool {
	if dt.IsFloat() {
		return dt.Round(x) == x || x != x
	}
	// An integer type: x must be an integer in its range (2^63 itself is not).
	return x == math.Trunc(x) && x >= -(1<<63) && x < 1<<63 && intFits(int64(x), dt)
}

// checkConstant panics with ErrDType, naming op, unless v is a constant values of dt
// can take (the package doc's conversion rules, those of a Go constant): a floating
// dt rounds v to nearest but a finite v must not overflow to ±Inf; an integer or Bool
// dt must hold v exactly.
func checkConstant(op string, v float64, dt dtype.DType, in []*Tensor) {
	if why := badConstant(v, dt); why != "" {
		fail(op, ErrDType, in, "%s", why)
	}
}

// badConstant says why v is not a constant of dt (checkConstant), "" when it is.
func badConstant(v float64, dt dtype.DType) string {
	switch {
	case dt.IsFloat() && !math.IsInf(v, 0) && math.IsInf(dt.Round(v), 0):
		return fmt.Sprintf("the constant %v overflows %v", v, dt)
	case !dt.IsFloat() && !floatFits(v, dt):
		return fmt.Sprintf("the constant %v is not a value of %v (%s)", v, dt, holderOf(dt))
	}
	return ""
}

// opType is the type an elementwise op on a tensor of dt computes in, which its
// scalar is rounded to: F64 for F64, F32 for the other floats (the kernels compute
// F16 and BF16 in float32).
func opType(dt dtype.DType) dtype.DType {
	if dt == dtype.F64 {
		return dt
	}
	return dtype.F32
}

// intFits reports whether dt holds the integer n exactly.
func intFits(n int64, dt dtype.DType) bool {
	switch dt {
	case dtype.I64:
		return true
	case dtype.I32:
		return n >= math.MinInt32 && n <= math.MaxInt32
	case dtype.Bool:
		return n == 0 || n == 1
	}
	// A floating type: n must survive the round trip through float64 (beyond 2^53
	// only some integers do; 2^63, which MaxInt64 would round to, is out of range).
	f := float64(n)
	return f < 1<<63 && int64(f) == n && floatFits(f, dt)
}

// hostOperand views (or copies) a Go slice as a contiguous kernel operand: floats as
// F32 or F64, integers as I32 or I64, exactly.
func hostOperand[T Elem](data []T, shape []int) cpu.Operand {
	l := kernels.Contiguous(shape...)
	if o, ok := viewOf(data, l); ok {
		return o
	}
	if isFloat[T]() {
		f := make([]float64, len(data))
		for i, v := range data {
			f[i] = float64(v)
		}
		return cpu.F64(f, l)
	}
	f := make([]int64, len(data))
	for i, v := range data {
		f[i] = int64(v)
	}
	return cpu.I64(f, l)
}

// ToSlice copies t's elements, in row-major order, into a new Go slice. Data converts
// only exactly (the package doc's conversion rules): every element must be one T holds
// (ToSlice[float64] holds every floating tensor, ToSlice[float32] every F32, F16 and
// BF16 one, ToSlice[int64] every integer one); an element T cannot hold (an F64 0.1
// for float32, 2.5 for int64, an I64 beyond 2^53 for float64) panics with ErrDType
// naming it. Bool gives 0 and 1. On a GPU it copies the elements to the host, which
// waits for the work before. It panics with ErrNoData on a device that keeps no data.
func ToSlice[T Elem](t *Tensor) []T { return toSlice[T]("ToSlice", t) }

func toSlice[T Elem](op string, t *Tensor) []T {
	t.readable(op)
	n := t.Numel()
	out := make([]T, n)
	if n == 0 {
		return out
	}
	b, off := t.hostBytes(op)
	src := cpu.FromBytes(t.dt, b, kernels.Layout{Shape: t.shape, Strides: t.strides, Offset: off})
	l := kernels.Contiguous(t.shape...)
	// Where T's own type holds every value of t's, the kernel copies straight in.
	if o, ok := viewOf(out, l); ok && holds(o.DType(), t.dt) {
		cpu.Copy(o, src)
		return out
	}
	// Otherwise through the widest Go type of t's kind, which holds every element,
	// checking each.
	if t.dt.IsFloat() {
		wide := make([]float64, n)
		cpu.Copy(cpu.F64(wide, l), src)
		for i, v := range wide {
			if !holdsFloat[T](v) {
				fail(op, ErrDType, []*Tensor{t}, "element %d (%v) has no exact %T; read it as float64, or Cast first", i, v, out[0])
			}
			out[i] = T(v)
		}
		return out
	}
	wide := make([]int64, n)
	cpu.Copy(cpu.I64(wide, l), src)
	for i, v := range wide {
		if !holdsInt[T](v) {
			fail(op, ErrDType, []*Tensor{t}, "element %d (%d) has no exact %T; read it as int64, or Cast first", i, v, out[0])
		}
		out[i] = T(v)
	}
	return out
}

// viewOf views s as a kernel operand placed by l when T is float32, float64, int32 or
// int64 itself (not a type defined over one).
func viewOf[T Elem](s []T, l kernels.Layout) (cpu.Operand, bool) {
	switch d := any(s).(type) {
	case []float32:
		return cpu.F32(d, l), true
	case []float64:
		return cpu.F64(d, l), true
	case []int32:
		return cpu.I32(d, l), true
	case []int64:
		return cpu.I64(d, l), true
	}
	return cpu.Operand{}, false
}

// holdsFloat reports whether T holds the float x exactly (NaN and ±Inf: only floats).
func holdsFloat[T Elem](x float64) bool {
	if isFloat[T]() {
		return float64(T(x)) == x || x != x
	}
	return x == math.Trunc(x) && x >= -(1<<63) && x < 1<<63 && holdsInt[T](int64(x))
}

// holdsInt reports whether T holds the integer n exactly.
func holdsInt[T Elem](n int64) bool {
	if isFloat[T]() {
		f := float64(n)
		return f < 1<<63 && int64(f) == n && holdsFloat[T](f)
	}
	return int64(T(n)) == n // a conversion that wraps does not come back
}

// Item returns the value of a one-element tensor as float64. It panics with ErrDType
// when the value has none (an I64 beyond 2^53: read it with ToSlice[int64]).
func (t *Tensor) Item() float64 {
	t.readable("Item")
	if t.Numel() != 1 {
		fail("Item", ErrShape, []*Tensor{t}, "Item needs exactly one element, the tensor has %d", t.Numel())
	}
	return toSlice[float64]("Item", t)[0]
}

// readable panics unless op can read t's values on the host: t is live and its
// device keeps data (or t has no elements).
func (t *Tensor) readable(op string) {
	t.live(op)
	if t.st.res == device.Meta && t.Numel() > 0 {
		fail(op, ErrNoData, []*Tensor{t}, "")
	}
}
