package tensor

import (
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
// len(data)), converted as the Copy kernel converts (float64 through float32, integers
// through int64; to Bool, non-zero is true).
func FromSlice[T Elem](s *Scope, dev device.Device, dt dtype.DType, data []T, shape ...int) *Tensor {
	if len(shape) == 0 {
		shape = []int{len(data)}
	}
	if numel(shape) != len(data) {
		fail("FromSlice", ErrShape, nil, "%d values for shape %v (%d elements)", len(data), shape, numel(shape))
	}
	c, t := s.newFactory("FromSlice", dev, dt, shape, false)
	c.upload(t, func() cpu.Operand { return hostOperand(data, t.shape) })
	return c.done(t)
}

// hostOperand views (or converts) a Go slice as a contiguous kernel operand.
func hostOperand[T Elem](data []T, shape []int) cpu.Operand {
	l := kernels.Contiguous(shape...)
	switch d := any(data).(type) {
	case []float32:
		return cpu.F32(d, l)
	case []int32:
		return cpu.I32(d, l)
	case []int64:
		return cpu.I64(d, l)
	}
	if isFloat[T]() {
		f := make([]float32, len(data))
		for i, v := range data {
			f[i] = float32(v)
		}
		return cpu.F32(f, l)
	}
	f := make([]int64, len(data))
	for i, v := range data {
		f[i] = int64(v)
	}
	return cpu.I64(f, l)
}

// ToSlice copies t's elements, in row-major order, into a new Go slice, converted as
// the Copy kernel converts (floats to integers truncate; F16/BF16 widen exactly to
// float32 and float64; Bool gives 0 and 1). On a GPU it copies the elements to the
// host, which waits for the work before. It panics with ErrNoData on a device that
// keeps no data.
func ToSlice[T Elem](t *Tensor) []T {
	t.readable("ToSlice")
	n := t.Numel()
	l := kernels.Contiguous(t.shape...)
	out := make([]T, n)
	if n == 0 {
		return out
	}
	b, off := t.hostBytes("ToSlice")
	src := cpu.FromBytes(t.dt, b, kernels.Layout{Shape: t.shape, Strides: t.strides, Offset: off})
	switch d := any(out).(type) {
	case []float32:
		cpu.Copy(cpu.F32(d, l), src)
		return out
	case []int32:
		cpu.Copy(cpu.I32(d, l), src)
		return out
	case []int64:
		cpu.Copy(cpu.I64(d, l), src)
		return out
	}
	if isFloat[T]() {
		f := make([]float32, n)
		cpu.Copy(cpu.F32(f, l), src)
		for i, v := range f {
			out[i] = T(v)
		}
		return out
	}
	f := make([]int64, n)
	cpu.Copy(cpu.I64(f, l), src)
	for i, v := range f {
		out[i] = T(v)
	}
	return out
}

// Item returns the value of a one-element tensor (integers exactly up to 2^53).
func (t *Tensor) Item() float64 {
	t.readable("Item")
	if t.Numel() != 1 {
		fail("Item", ErrShape, []*Tensor{t}, "Item needs exactly one element, the tensor has %d", t.Numel())
	}
	if t.dt.IsFloat() {
		return ToSlice[float64](t)[0]
	}
	return float64(ToSlice[int64](t)[0])
}

// readable panics unless op can read t's values on the host: t is live and its
// device keeps data (or t has no elements).
func (t *Tensor) readable(op string) {
	t.live(op)
	if t.st.res == device.Meta && t.Numel() > 0 {
		fail(op, ErrNoData, []*Tensor{t}, "")
	}
}
