package tensor_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
)

// Inference mode records no graph (EnableGrad inside it changes nothing), saves
// nothing, and what it makes are inference tensors: no version counter, and neither a
// recorded op nor SetRequiresGrad takes them afterwards; both errors name the op and
// say to Clone. A Clone made outside inference mode is a normal tensor.
func TestInferenceMode(t *testing.T) {
	d := newCPU(t)
	s := tensor.NewScope()
	w := f32(s, d, []float32{1, 2, 3}, 3).SetRequiresGrad(true)
	x := f32(s, d, []float32{4, 5, 6}, 3)
	inf := s.With(tensor.InferenceMode(true))
	require.True(t, inf.InferenceMode())
	require.False(t, inf.GradEnabled())
	before := requested(t, d)
	y := x.Mul(w).Exp()
	require.False(t, y.RequiresGrad(), "no graph")
	require.True(t, y.IsLeaf())
	require.True(t, y.IsInference())
	require.Equal(t, before+2*y.Bytes(), requested(t, d), "the product and the result; nothing saved")
	again := inf.Child(tensor.EnableGrad())
	require.False(t, again.GradEnabled(), "EnableGrad does not leave inference mode")
	require.False(t, again.Bind(w).Mul(x).RequiresGrad())
	again.Close()
	out := inf.Child(tensor.InferenceMode(false))
	require.True(t, out.GradEnabled(), "InferenceMode(false) leaves it")
	require.True(t, out.Bind(w).Mul(x).RequiresGrad())
	out.Close()
	require.False(t, inf.Bind(x).IsInference(), "binding a normal tensor keeps it normal")
	v := y.Reshape(3, 1)
	require.True(t, v.IsInference(), "a view of an inference tensor is one")
	y.Fill(1)
	require.Zero(t, y.Version(), "in-place writes are not counted")
	x.Fill(4)
	require.Equal(t, uint64(1), x.Version(), "a normal tensor counts them, in inference mode too")
	inf.Close()

	made := requested(t, d)
	e := requireOpError(t, tensor.OpMul, tensor.ErrGrad, func() { w.Mul(y) })
	require.Contains(t, e.Error(), "Inference tensors cannot be saved for backward")
	require.Contains(t, e.Error(), "Clone")
	requireOpError(t, tensor.OpMatMul, tensor.ErrGrad, func() { w.Reshape(1, 3).MatMul(v) })
	require.Equal(t, made, requested(t, d), "a refused op keeps nothing")
	e = requireOpError(t, "SetRequiresGrad", tensor.ErrGrad, func() { y.SetRequiresGrad(true) })
	require.Contains(t, e.Error(), "inference tensor outside InferenceMode")

	sum := w.Add(y).Sum() // Add saves nothing: the inference tensor is only read
	sum.Backward()
	require.Equal(t, []float32{1, 1, 1}, vals(w.Grad()))
	c := y.Clone()
	require.False(t, c.IsInference())
	w.ZeroGrad(true)
	w.Mul(c).Sum().Backward()
	require.Equal(t, []float32{1, 1, 1}, vals(w.Grad()), "a clone is saved like any tensor")
	s.Close()
	requireEmpty(t, d)
}

// A scope made in inference mode at the root (an evaluation loop) frees everything
// with it, and its factories make inference tensors too.
func TestInferenceModeScopeFactories(t *testing.T) {
	d := newCPU(t)
	s := tensor.NewScope(tensor.InferenceMode(true))
	z := s.Zeros(d, dtype.F32, 2)
	require.True(t, z.IsInference())
	require.True(t, tensor.FromSlice(s, d, dtype.F32, []float32{1}).IsInference())
	s.Close()
	requireEmpty(t, d)
}
