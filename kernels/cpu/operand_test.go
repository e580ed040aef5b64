package cpu

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
)

func TestOperandChecksItsLayout(t *testing.T) {
	buf := make([]float32, 6)
	assert.Panics(t, func() { F32(buf, kernels.Layout{Shape: []int{2}, Strides: []int{1, 1}}) }, "ranks differ")
	assert.Panics(t, func() { F32(buf, kernels.Layout{Shape: []int{2}, Strides: []int{-1}, Offset: 3}) }, "negative stride")
	assert.Panics(t, func() { F32(buf, kernels.Layout{Shape: []int{2}, Strides: []int{1}, Offset: -1}) }, "negative offset")
	assert.Panics(t, func() { F32(buf, kernels.Contiguous(make([]int, kernels.MaxRank+1)...)) }, "rank above kernels.MaxRank")
	assert.Panics(t, func() { F32(buf, kernels.Contiguous(7)) }, "past the end")
}

func TestFromBytes(t *testing.T) {
	raw := make([]float32, 8) // float32 storage is aligned for every dtype up to 4 bytes
	b := unsafe.Slice((*byte)(unsafe.Pointer(&raw[0])), 32)
	o := FromBytes(dtype.F32, b, kernels.Contiguous(2, 4))
	assert.Equal(t, dtype.F32, o.DType())
	Fill(o, 1.5)
	assert.Equal(t, []float32{1.5, 1.5, 1.5, 1.5, 1.5, 1.5, 1.5, 1.5}, raw)

	h := FromBytes(dtype.F16, b, kernels.Layout{Shape: []int{3}, Strides: []int{5}, Offset: 1})
	Fill(h, 2)
	u := unsafe.Slice((*uint16)(unsafe.Pointer(&raw[0])), 16)
	assert.Equal(t, dtype.F32ToF16(2), u[1])
	assert.Equal(t, dtype.F32ToF16(2), u[11])

	assert.PanicsWithValue(t, "kernels/cpu: FromBytes: invalid dtype invalid", func() { FromBytes(dtype.Invalid, b, kernels.Contiguous(1)) })
	assert.Panics(t, func() { FromBytes(dtype.F32, b[1:], kernels.Contiguous(1)) }, "misaligned")
	assert.Panics(t, func() { FromBytes(dtype.I64, b, kernels.Contiguous(5)) }, "past the end")
}
