// Package dense converts between sublet tensors and gorgonia.org/tensor's *Dense, the
// host-side array type of the Go ecosystem. Both directions copy.
//
//	t := dense.From(s, dev, d) // a *tensor.Tensor owned by scope s, on dev
//	d2 := dense.To(t)          // a new *tensor.Dense
//
// Every conversion is exact. Float64 and F64 map to each other, Float32 and F32; a
// Dense has no 16-bit floats, so F16 and BF16 tensors become Float32 Dense values
// (exactly). Views (sliced or transposed Dense values) are read in their logical order.
//
//doccheck:context var s *tensor.Scope
//doccheck:context var d *gorgonia.Dense
package dense

import (
	"fmt"

	gt "gorgonia.org/tensor"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
)

// From copies d into a new tensor on dev owned by s: Float64 becomes F64, Float32 F32,
// Int32 I32, Int64 and Int I64, Bool Bool. Other element types panic with a
// *tensor.Error wrapping tensor.ErrDType.
func From(s *tensor.Scope, dev device.Device, d *gt.Dense) *tensor.Tensor {
	dt, ok := dtypeOf(d.Dtype())
	if !ok {
		panic(&tensor.Error{Op: "dense.From", Msg: fmt.Sprintf("a Dense of %v has no tensor dtype", d.Dtype()), Err: tensor.ErrDType})
	}
	shape := []int(d.Shape().Clone())
	if d.IsScalar() {
		shape = nil
	} else if d.Shape().TotalSize() == 0 {
		return s.Empty(dev, dt, shape...) // nothing to copy (and gorgonia's Data panics)
	}
	d = logical(d)
	var t *tensor.Tensor
	switch v := values(d).(type) {
	case []float32:
		t = tensor.FromSlice(s, dev, dt, v)
	case []float64:
		t = tensor.FromSlice(s, dev, dt, v)
	case []int32:
		t = tensor.FromSlice(s, dev, dt, v)
	case []int64:
		t = tensor.FromSlice(s, dev, dt, v)
	case []int:
		t = tensor.FromSlice(s, dev, dt, v)
	case []bool:
		b := make([]uint8, len(v))
		for i, x := range v {
			if x {
				b[i] = 1
			}
		}
		t = tensor.FromSlice(s, dev, dt, b)
	}
	if len(shape) == 1 {
		return t
	}
	defer t.Release()
	return t.Reshape(shape...)
}

// dtypeOf is the tensor dtype of a Dense element type From takes.
func dtypeOf(t gt.Dtype) (dtype.DType, bool) {
	switch t {
	case gt.Float64:
		return dtype.F64, true
	case gt.Float32:
		return dtype.F32, true
	case gt.Int32:
		return dtype.I32, true
	case gt.Int64, gt.Int:
		return dtype.I64, true
	case gt.Bool:
		return dtype.Bool, true
	}
	return dtype.Invalid, false
}

// logical returns d with its elements stored in row-major logical order: a view
// (slice) materialized, a lazy transpose carried out on a copy.
func logical(d *gt.Dense) *gt.Dense {
	if d.IsMaterializable() {
		d = d.Materialize().(*gt.Dense)
	}
	if d.RequiresIterator() {
		c := d.Clone().(*gt.Dense)
		if err := c.Transpose(); err != nil {
			panic(&tensor.Error{Op: "dense.From", Msg: "carrying out a transpose", Err: err})
		}
		d = c
	}
	return d
}

// values returns d's elements as a slice of its Go element type.
func values(d *gt.Dense) any {
	if !d.IsScalar() {
		return d.Data()
	}
	switch v := d.Data().(type) {
	case float32:
		return []float32{v}
	case float64:
		return []float64{v}
	case int32:
		return []int32{v}
	case int64:
		return []int64{v}
	case int:
		return []int{v}
	case bool:
		return []bool{v}
	}
	return d.Data()
}

// To copies t into a new Dense of t's shape: F64 becomes Float64, F32, F16 and BF16
// Float32, I32 Int32, I64 Int64, Bool Bool. t must have data on the host (not the meta
// device).
func To(t *tensor.Tensor) *gt.Dense {
	shape := t.Shape()
	var backing any
	switch t.DType() {
	case dtype.F64:
		backing = tensor.ToSlice[float64](t)
	case dtype.F32, dtype.F16, dtype.BF16:
		backing = tensor.ToSlice[float32](t)
	case dtype.I32:
		backing = tensor.ToSlice[int32](t)
	case dtype.I64:
		backing = tensor.ToSlice[int64](t)
	case dtype.Bool:
		u := tensor.ToSlice[uint8](t)
		b := make([]bool, len(u))
		for i, x := range u {
			b[i] = x != 0
		}
		backing = b
	}
	if len(shape) == 0 {
		return gt.New(gt.FromScalar(first(backing)))
	}
	return gt.New(gt.WithShape(shape...), gt.WithBacking(backing))
}

func first(s any) any {
	switch v := s.(type) {
	case []float64:
		return v[0]
	case []float32:
		return v[0]
	case []int32:
		return v[0]
	case []int64:
		return v[0]
	case []bool:
		return v[0]
	}
	panic(fmt.Sprintf("tensor/dense: internal error: backing %T", s))
}
