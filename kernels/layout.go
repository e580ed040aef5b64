package kernels

import (
	"fmt"
	"slices"
)

// MaxRank is the largest number of dimensions a Layout may have.
const MaxRank = 16

// Layout places an n-dimensional array in a flat slice: the element at index
// (i0, …, i(r-1)) sits at Offset + Σ ij·Strides[j]. Strides count elements, not bytes,
// and are ≥ 0; a stride of 0 repeats one element along that dimension (broadcasting).
// Rank 0 (empty Shape) is a scalar at Offset. len(Strides) == len(Shape) ≤ MaxRank.
type Layout struct {
	Shape   []int
	Strides []int
	Offset  int
}

// Contiguous returns the row-major layout of shape at offset 0.
func Contiguous(shape ...int) Layout {
	strides := make([]int, len(shape))
	s := 1
	for i := len(shape) - 1; i >= 0; i-- {
		strides[i] = s
		s *= shape[i]
	}
	return Layout{Shape: slices.Clone(shape), Strides: strides}
}

// Size is the number of elements: the product of Shape (1 for a scalar).
func (l Layout) Size() int {
	n := 1
	for _, d := range l.Shape {
		n *= d
	}
	return n
}

// IsContiguous reports whether the elements sit row-major and dense from Offset, so
// that element i (in row-major order) is at Offset+i. Dimensions of size 1 may have any
// stride.
func (l Layout) IsContiguous() bool {
	want := 1
	for i := len(l.Shape) - 1; i >= 0; i-- {
		if l.Shape[i] == 1 {
			continue
		}
		if l.Strides[i] != want {
			return false
		}
		want *= l.Shape[i]
	}
	return true
}

// Span is the length a slice needs to hold every element: one past the largest index
// the layout reaches (Offset when it has no elements).
func (l Layout) Span() int {
	end := l.Offset + 1
	for i, d := range l.Shape {
		if d == 0 {
			return l.Offset
		}
		end += (d - 1) * l.Strides[i]
	}
	return end
}

func (l Layout) String() string {
	return fmt.Sprintf("shape %v strides %v offset %d", l.Shape, l.Strides, l.Offset)
}

// Check reports, as an error saying what is wrong, whether l is malformed (ranks that
// differ or pass MaxRank, a negative size, stride or offset) or reaches past the n
// elements of its buffer.
func (l Layout) Check(n int) error {
	if len(l.Shape) != len(l.Strides) || len(l.Shape) > MaxRank {
		return fmt.Errorf("bad layout (%v): need len(Strides) == len(Shape) <= %d", l, MaxRank)
	}
	for i, d := range l.Shape {
		if d < 0 || l.Strides[i] < 0 {
			return fmt.Errorf("bad layout (%v): sizes and strides must be >= 0", l)
		}
	}
	if l.Offset < 0 || l.Span() > n {
		return fmt.Errorf("layout (%v) reaches element %d of a buffer of %d", l, l.Span()-1, n)
	}
	return nil
}
