package tensor_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
)

// Tensors with no elements go through factories, elementwise ops, reductions, views,
// copies and in-place ops, also when a longer dimension precedes the empty one (its
// row-major stride is then 0).
func TestEmptyTensorsThroughOps(t *testing.T) {
	d := newCPU(t)
	s := tensor.NewScope(tensor.WithGenerator(tensor.NewGenerator(1)))
	for _, x := range []*tensor.Tensor{
		s.Zeros(d, dtype.F32, 3, 0), s.Ones(d, dtype.F16, 2, 3, 0), s.Rand(d, dtype.F32, 4, 0),
		s.Empty(d, dtype.I64, 2, 0), f32(s, d, nil, 5, 0), s.Ones(d, dtype.F32, 4, 3).Slice(1, 1, 1),
	} {
		require.Zero(t, x.Numel())
		x.Fill(2)
		if x.DType().IsFloat() {
			require.Empty(t, vals(x.Exp().Add(x).Softmax(-1)))
			require.Equal(t, x.Shape()[1:], x.Sum(0).Shape())
			require.Equal(t, x.Shape()[1:], x.Mean(0).Shape())
		}
		require.Equal(t, x.Shape(), x.Clone().Shape())
		require.Equal(t, x.Shape(), x.Cast(dtype.BF16).Shape())
		require.Equal(t, x.Shape(), x.Contiguous().Shape())
		require.Empty(t, tensor.ToSlice[int64](x.Reshape(0)))
		requireOpError(t, tensor.OpReshape, tensor.ErrShape, func() { x.Reshape(-1, 0) })
	}
	s.Close()
	requireEmpty(t, d)
}
