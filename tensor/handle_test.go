package tensor_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
)

// A handle describes its placement (shape, strides, offset), its storage (shared by
// views, counting their references and in-place writes) and its place in the graph.
func TestHandleAndStorageAccessors(t *testing.T) {
	d := newCPU(t)
	s := tensor.NewScope()
	x := s.Zeros(d, dtype.F32, 2, 3, 4)
	require.Equal(t, 3, x.Dim(1))
	require.Equal(t, 4, x.Dim(-1))
	require.Equal(t, 2, x.Dim(-3))
	e := requireOpError(t, "Dim", tensor.ErrShape, func() { x.Dim(3) })
	require.Contains(t, e.Error(), "dimension 3 of a rank-3 tensor")
	requireOpError(t, "Dim", tensor.ErrShape, func() { x.Dim(-4) })
	require.Equal(t, []int{12, 4, 1}, x.Strides())
	require.Zero(t, x.Offset())

	st := x.Storage()
	require.Same(t, d, st.Device())
	require.Equal(t, int64(96), st.Size())
	require.NotZero(t, st.Ptr())
	require.Len(t, st.Host(), 96)
	require.Equal(t, 1, st.Refs())

	v := x.Slice(1, 1, 3).Transpose(0, 2)
	require.Equal(t, []int{4, 2, 2}, v.Shape())
	require.Equal(t, []int{1, 4, 12}, v.Strides())
	require.Equal(t, 4, v.Offset(), "one row of 4 elements in")
	require.False(t, v.IsContiguous())
	require.Equal(t, 3, st.Refs(), "x, the slice and its transpose")
	strides := v.Strides()
	strides[0] = 99
	require.Equal(t, []int{1, 4, 12}, v.Strides(), "Strides returns a copy")
	shape := v.Shape()
	shape[0] = 99
	require.Equal(t, []int{4, 2, 2}, v.Shape(), "Shape returns a copy")

	require.Zero(t, st.Version())
	v.Fill(1)
	require.Equal(t, uint64(1), x.Version(), "the version is the storage's, shared by views")
	st.BumpVersion()
	require.Equal(t, uint64(2), v.Version())

	require.Equal(t, "Tensor([[[0., 0., 0., 0.],\n"+
		"         [1., 1., 1., 1.],\n"+
		"         [1., 1., 1., 1.]],\n\n"+
		"        [[0., 0., 0., 0.],\n"+
		"         [1., 1., 1., 1.],\n"+
		"         [1., 1., 1., 1.]]], shape=[2 3 4], dtype=float32, device=cpu)", x.String())
	l := f32(s, d, []float32{1, 2}).SetRequiresGrad(true)
	require.Equal(t, "Tensor([1., 2.], shape=[2], dtype=float32, device=cpu, requires_grad)", l.String())
	y := l.Exp()
	require.Equal(t, "Tensor([2.7183, 7.3891], shape=[2], dtype=float32, device=cpu, requires_grad, grad_fn=Exp)", y.String())
	y.Release()
	require.Equal(t, "Tensor(shape=[2], dtype=float32, device=cpu, requires_grad, released)", y.String(), "a released handle let go of its node")
	v.Release()
	require.Equal(t, 2, st.Refs())
	s.Close()
	require.Zero(t, st.Refs())
	require.Nil(t, st.Host(), "a freed storage's bytes are gone")
	requireEmpty(t, d)
}
