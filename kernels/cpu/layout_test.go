package cpu

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"

	"github.com/subletml/sublet/dtype"
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

	buf := make([]float32, 6)
	assert.Panics(t, func() { F32(buf, Layout{Shape: []int{2}, Strides: []int{1, 1}}) }, "ranks differ")
	assert.Panics(t, func() { F32(buf, Layout{Shape: []int{2}, Strides: []int{-1}, Offset: 3}) }, "negative stride")
	assert.Panics(t, func() { F32(buf, Layout{Shape: []int{2}, Strides: []int{1}, Offset: -1}) }, "negative offset")
	assert.Panics(t, func() { F32(buf, Contiguous(make([]int, MaxRank+1)...)) }, "rank above MaxRank")
}

func TestFromBytes(t *testing.T) {
	raw := make([]float32, 8) // float32 storage is aligned for every dtype up to 4 bytes
	b := unsafe.Slice((*byte)(unsafe.Pointer(&raw[0])), 32)
	o := FromBytes(dtype.F32, b, Contiguous(2, 4))
	assert.Equal(t, dtype.F32, o.DType())
	Fill(o, 1.5)
	assert.Equal(t, []float32{1.5, 1.5, 1.5, 1.5, 1.5, 1.5, 1.5, 1.5}, raw)

	h := FromBytes(dtype.F16, b, Layout{Shape: []int{3}, Strides: []int{5}, Offset: 1})
	Fill(h, 2)
	u := unsafe.Slice((*uint16)(unsafe.Pointer(&raw[0])), 16)
	assert.Equal(t, dtype.F32ToF16(2), u[1])
	assert.Equal(t, dtype.F32ToF16(2), u[11])

	assert.PanicsWithValue(t, "kernels/cpu: FromBytes: invalid dtype invalid", func() { FromBytes(dtype.Invalid, b, Contiguous(1)) })
	assert.Panics(t, func() { FromBytes(dtype.F32, b[1:], Contiguous(1)) }, "misaligned")
	assert.Panics(t, func() { FromBytes(dtype.I64, b, Contiguous(5)) }, "past the end")
}
