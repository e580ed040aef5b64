package kernels

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestLayout(t *testing.T) {
	l := Contiguous(2, 3, 4)
	assert.Equal(t, []int{12, 4, 1}, l.Strides)
	assert.Equal(t, 24, l.Size())
	assert.Equal(t, 24, l.Span())
	assert.True(t, l.IsContiguous())
	assert.Equal(t, "shape [2 3 4] strides [12 4 1] offset 0", l.String())

	tr := Layout{Shape: []int{4, 3}, Strides: []int{1, 4}, Offset: 2}
	assert.False(t, tr.IsContiguous())
	assert.Equal(t, 2+3*1+2*4+1, tr.Span())
	ones := Layout{Shape: []int{1, 5, 1}, Strides: []int{99, 1, 7}}
	assert.True(t, ones.IsContiguous(), "size-1 dimensions may have any stride")
	assert.Equal(t, 1, Layout{}.Size(), "a scalar")
	assert.Equal(t, 1, Layout{}.Span())
	empty := Layout{Shape: []int{3, 0}, Strides: []int{0, 1}, Offset: 5}
	assert.Equal(t, 0, empty.Size())
	assert.Equal(t, 5, empty.Span())

	shape := []int{2, 2}
	c := Contiguous(shape...)
	shape[0] = 9
	assert.Equal(t, []int{2, 2}, c.Shape, "Contiguous keeps its own copy of the shape")
}

func TestLayoutCheck(t *testing.T) {
	assert.NoError(t, Contiguous(2, 3).Check(6))
	assert.NoError(t, Layout{Shape: []int{3, 0}, Strides: []int{0, 1}, Offset: 5}.Check(5), "an empty layout needs no element")
	for _, c := range []struct {
		l    Layout
		n    int
		want string
	}{
		{Layout{Shape: []int{2}, Strides: []int{1, 1}}, 6, "need len(Strides) == len(Shape) <= 16"},
		{Layout{Shape: []int{2}, Strides: []int{-1}, Offset: 3}, 6, "sizes and strides must be >= 0"},
		{Layout{Shape: []int{2}, Strides: []int{1}, Offset: -1}, 6, "reaches element"},
		{Contiguous(make([]int, MaxRank+1)...), 6, "need len(Strides) == len(Shape) <= 16"},
		{Contiguous(2, 4), 7, "layout (shape [2 4] strides [4 1] offset 0) reaches element 7 of a buffer of 7"},
	} {
		err := c.l.Check(c.n)
		if assert.Error(t, err, "%v over %d", c.l, c.n) {
			assert.Contains(t, err.Error(), c.want)
		}
	}
}
