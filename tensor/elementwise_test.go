package tensor_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
)

// TestElementwiseOperandLayouts runs Add and Neg on the operand layouts that decide
// between handing the cpu backend dense slices and handing it operands: fresh tensors,
// a view at an offset (rows 1-2 of a matrix: dense, not at the storage's start), a
// reshaped view, a transposed view (not dense), a broadcast row and an F16 operand;
// each result against the sums made here.
func TestElementwiseOperandLayouts(t *testing.T) {
	d := newCPU(t)
	s := tensor.NewScope(tensor.NoGrad())
	m := tensor.FromSlice(s, d, dtype.F32, []float32{1, 2, 3, 4, 5, 6, 7, 8, 9}, 3, 3)
	b := tensor.FromSlice(s, d, dtype.F32, []float32{10, 20, 30, 40, 50, 60}, 2, 3)
	row := tensor.FromSlice(s, d, dtype.F32, []float32{100, 200, 300}, 3)
	half := b.Cast(dtype.F16)
	for _, c := range []struct {
		name string
		got  *tensor.Tensor
		want []float32
	}{
		{"fresh", b.Add(b), []float32{20, 40, 60, 80, 100, 120}},
		{"offset view", m.Slice(0, 1, 3).Add(b), []float32{14, 25, 36, 47, 58, 69}},
		{"reshaped view", b.Reshape(3, 2).Add(b.Reshape(3, 2)), []float32{20, 40, 60, 80, 100, 120}},
		{"transposed view", m.T().Slice(0, 0, 2).Add(b), []float32{11, 24, 37, 42, 55, 68}},
		{"broadcast row", b.Add(row), []float32{110, 220, 330, 140, 250, 360}},
		{"F16 operand", b.Add(half), []float32{20, 40, 60, 80, 100, 120}},
		{"unary on an offset view", m.Slice(0, 1, 3).Neg(), []float32{-4, -5, -6, -7, -8, -9}},
		{"unary on a transposed view", m.T().Neg(), []float32{-1, -4, -7, -2, -5, -8, -3, -6, -9}},
	} {
		require.Equal(t, c.want, tensor.ToSlice[float32](c.got), c.name)
	}
	s.Close()
	requireEmpty(t, d)
}
