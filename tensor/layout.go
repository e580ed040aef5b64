package tensor

import (
	"math"
	"slices"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
)

// numel is the number of elements of shape (1 for a scalar).
func numel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// bytesOf is the size of a dense tensor of dt and shape; ok is false past 2^63 bytes
// (the product would wrap, and a huge shape would get a small storage).
func bytesOf(dt dtype.DType, shape []int) (n int64, ok bool) {
	if slices.Contains(shape, 0) {
		return 0, true
	}
	n = int64(dt.Size())
	for _, d := range shape {
		if n > math.MaxInt64/int64(d) {
			return 0, false
		}
		n *= int64(d)
	}
	return n, true
}

// rowMajor returns the contiguous strides of shape.
func rowMajor(shape []int) []int {
	st := make([]int, len(shape))
	s := 1
	for i := len(shape) - 1; i >= 0; i-- {
		st[i] = s
		s *= shape[i]
	}
	return st
}

// isRowMajor reports whether a tensor of shape and strides has exactly the row-major
// strides of want (the shape want, not only the same elements dense).
func isRowMajor(want, shape, strides []int) bool {
	if !sameShape(want, shape) {
		return false
	}
	s := 1
	for i := len(shape) - 1; i >= 0; i-- {
		if strides[i] != s {
			return false
		}
		s *= shape[i]
	}
	return true
}

// contiguous reports whether shape and strides place the elements row-major and dense.
func contiguous(shape, strides []int) bool {
	want := 1
	for i := len(shape) - 1; i >= 0; i-- {
		if shape[i] == 1 {
			continue
		}
		if strides[i] != want {
			return false
		}
		want *= shape[i]
	}
	return true
}

// broadcastsTo reports whether shape from broadcasts to shape to without growing it.
func broadcastsTo(from, to []int) bool {
	if len(from) > len(to) {
		return false
	}
	lead := len(to) - len(from)
	for i, d := range from {
		if d != 1 && d != to[lead+i] {
			return false
		}
	}
	return true
}

// broadcast returns the numpy broadcast of shapes a and b: a or b itself when it is the
// result (shapes are never changed once made, so they are shared; clipped, so that an
// append copies).
func broadcast(a, b []int) ([]int, bool) {
	switch {
	case broadcastsTo(b, a):
		return slices.Clip(a), true
	case broadcastsTo(a, b):
		return slices.Clip(b), true
	}
	n := max(len(a), len(b))
	out := make([]int, n)
	for i := range n {
		da, db := 1, 1
		if j := i - (n - len(a)); j >= 0 {
			da = a[j]
		}
		if j := i - (n - len(b)); j >= 0 {
			db = b[j]
		}
		switch {
		case da == db, db == 1:
			out[i] = da
		case da == 1:
			out[i] = db
		default:
			return nil, false
		}
	}
	return out, true
}

// axis resolves a possibly negative axis against rank; ok is false when out of range.
func axis(a, rank int) (int, bool) {
	if a < 0 {
		a += rank
	}
	return a, a >= 0 && a < rank
}

func sameShape(a, b []int) bool { return slices.Equal(a, b) }

// layout is t's placement in its storage.
func (t *Tensor) layout() kernels.Layout {
	return kernels.Layout{Shape: t.shape, Strides: t.strides, Offset: t.offset}
}

// placedAs is the operand of the contiguous t seen with shape, the same elements in the
// same order (a reduction's result with its reduced axes kept as 1).
func (t *Tensor) placedAs(shape []int) kernels.Operand {
	o := t.operand()
	o.Layout = kernels.Layout{Shape: shape, Strides: rowMajor(shape), Offset: t.offset}
	return o
}

// operand is t as a kernel operand (nil: the absent operand).
func (t *Tensor) operand() kernels.Operand {
	if t == nil {
		return kernels.Operand{}
	}
	return kernels.Operand{Layout: t.layout(), DType: t.dt, Mem: t.st.mem()}
}
