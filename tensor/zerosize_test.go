package tensor_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
)

// Products over an empty inner dimension are zeros (plus the bias), whatever the
// memory the result reuses held, and their gradients are zeros of the inputs' shapes.
func TestProductsOverAnEmptyInnerDimension(t *testing.T) {
	d := newCPU(t)
	s := tensor.NewScope()
	x := s.Zeros(d, dtype.F32, 3, 0).SetRequiresGrad(true)
	w := s.Zeros(d, dtype.F32, 2, 0).SetRequiresGrad(true)
	b := f32(s, d, []float32{1, -1}).SetRequiresGrad(true)
	// Leave a cached block full of 7s for the result to reuse.
	s.Full(d, dtype.F32, 7, 3, 2).Release()
	y := tensor.Linear(x, w, b)
	require.Equal(t, []int{3, 2}, y.Shape())
	require.Equal(t, []float32{1, -1, 1, -1, 1, -1}, vals(y))
	y.Sum().Backward()
	require.Equal(t, []int{3, 0}, x.Grad().Shape())
	require.Equal(t, []int{2, 0}, w.Grad().Shape())
	require.Equal(t, []float32{3, 3}, vals(b.Grad()))

	a := s.Zeros(d, dtype.F32, 2, 3, 0).SetRequiresGrad(true)
	m := s.Zeros(d, dtype.F32, 0, 4).SetRequiresGrad(true)
	p := a.MatMul(m)
	require.Equal(t, make([]float32, 24), vals(p))
	p.Sum().Backward()
	require.Equal(t, []int{2, 3, 0}, a.Grad().Shape())
	require.Equal(t, []int{0, 4}, m.Grad().Shape())

	// An empty output dimension: the gradients of the inputs are zeros.
	w0 := s.Ones(d, dtype.F32, 0, 3).SetRequiresGrad(true)
	x0 := s.Ones(d, dtype.F32, 2, 3).SetRequiresGrad(true)
	z := tensor.Linear(x0, w0, nil)
	require.Equal(t, []int{2, 0}, z.Shape())
	z.Sum().Backward()
	require.Equal(t, make([]float32, 6), vals(x0.Grad()))
	s.Close()
	requireEmpty(t, d)
}

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
