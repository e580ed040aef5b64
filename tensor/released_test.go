package tensor_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
)

// Every op refuses a released handle with an *Error naming it and wrapping
// ErrReleased, and a nil handle with an *Error naming it: both are errors Try turns
// back into values, never a runtime panic.
func TestEveryOpRefusesAReleasedOrNilTensor(t *testing.T) {
	d := newCPU(t)
	s := tensor.NewScope(tensor.WithGenerator(tensor.NewGenerator(1)))
	ok := s.Ones(d, dtype.F32, 2, 2)
	idx := s.Zeros(d, dtype.I64, 2)
	leaf := s.Ones(d, dtype.F32, 2, 2).SetRequiresGrad(true)
	g := tensor.NewGenerator(1)
	ops := []struct {
		op string
		f  func(x *tensor.Tensor)
	}{
		{tensor.OpAdd, func(x *tensor.Tensor) { x.Add(ok) }},
		{tensor.OpMul, func(x *tensor.Tensor) { ok.Mul(x) }},
		{tensor.OpAddScalar, func(x *tensor.Tensor) { x.AddScalar(1) }},
		{tensor.OpExp, func(x *tensor.Tensor) { x.Exp() }},
		{tensor.OpSum, func(x *tensor.Tensor) { x.Sum() }},
		{tensor.OpSum, func(x *tensor.Tensor) { x.SumAs(dtype.F32) }},
		{tensor.OpMean, func(x *tensor.Tensor) { x.Mean() }},
		{tensor.OpSumTo, func(x *tensor.Tensor) { x.SumTo(2) }},
		{tensor.OpMax, func(x *tensor.Tensor) { x.Max(0) }},
		{"Argmax", func(x *tensor.Tensor) { x.Argmax(0) }},
		{tensor.OpMatMul, func(x *tensor.Tensor) { x.MatMul(ok) }},
		{tensor.OpLinear, func(x *tensor.Tensor) { tensor.Linear(ok, x, nil) }},
		{tensor.OpSoftmax, func(x *tensor.Tensor) { x.Softmax(0) }},
		{tensor.OpLogSoftmax, func(x *tensor.Tensor) { x.LogSoftmaxAs(dtype.F32, 0) }},
		{tensor.OpCrossEntropy, func(x *tensor.Tensor) { tensor.CrossEntropy(x, idx) }},
		{tensor.OpMSE, func(x *tensor.Tensor) { tensor.MSE(ok, x) }},
		{tensor.OpLayerNorm, func(x *tensor.Tensor) { tensor.LayerNorm(x, nil, nil, 1e-5) }},
		{tensor.OpEmbedding, func(x *tensor.Tensor) { tensor.Embedding(x, idx) }},
		{tensor.OpDropout, func(x *tensor.Tensor) { x.Dropout(0.5) }},
		{tensor.OpCast, func(x *tensor.Tensor) { x.Cast(dtype.F16) }},
		{tensor.OpTo, func(x *tensor.Tensor) { x.To(d) }},
		{"Clone", func(x *tensor.Tensor) { x.Clone() }},
		{tensor.OpContiguous, func(x *tensor.Tensor) { x.Contiguous() }},
		{tensor.OpDetach, func(x *tensor.Tensor) { x.Detach() }},
		{tensor.OpReshape, func(x *tensor.Tensor) { x.Reshape(4) }},
		{tensor.OpView, func(x *tensor.Tensor) { x.View(4) }},
		{tensor.OpTranspose, func(x *tensor.Tensor) { x.T() }},
		{tensor.OpPermute, func(x *tensor.Tensor) { x.Permute(1, 0) }},
		{tensor.OpSlice, func(x *tensor.Tensor) { x.Slice(0, 0, 1) }},
		{tensor.OpExpand, func(x *tensor.Tensor) { x.Expand(3, 2, 2) }},
		{tensor.OpSqueeze, func(x *tensor.Tensor) { x.Squeeze(0) }},
		{tensor.OpUnsqueeze, func(x *tensor.Tensor) { x.Unsqueeze(0) }},
		{tensor.OpConcat, func(x *tensor.Tensor) { tensor.Concat(0, ok, x) }},
		{tensor.OpStack, func(x *tensor.Tensor) { tensor.Stack(0, x, ok) }},
		{"Fill", func(x *tensor.Tensor) { x.Fill(1) }},
		{"CopyFrom", func(x *tensor.Tensor) { ok.CopyFrom(x) }},
		{"AddScaled", func(x *tensor.Tensor) { x.AddScaled(1, ok) }},
		{"Scale", func(x *tensor.Tensor) { x.Scale(2) }},
		{"FillUniform", func(x *tensor.Tensor) { x.FillUniform(g, 0, 1) }},
		{"FillNormal", func(x *tensor.Tensor) { x.FillNormal(g, 0, 1) }},
		{"Backward", func(x *tensor.Tensor) { x.Backward() }},
		{"Backward", func(x *tensor.Tensor) { leaf.BackwardWith(tensor.BackwardOptions{Grad: x}) }},
		{"SetRequiresGrad", func(x *tensor.Tensor) { x.SetRequiresGrad(true) }},
		{"AsParameter", func(x *tensor.Tensor) { x.AsParameter() }},
		{"Grad", func(x *tensor.Tensor) { x.Grad() }},
		{"ZeroGrad", func(x *tensor.Tensor) { x.ZeroGrad(true) }},
		{"RetainGrad", func(x *tensor.Tensor) { x.RetainGrad() }},
		{"RegisterHook", func(x *tensor.Tensor) { x.RegisterHook(nil) }},
		{"RegisterPostAccumulateHook", func(x *tensor.Tensor) { x.RegisterPostAccumulateHook(nil) }},
		{"Keep", func(x *tensor.Tensor) { s.Keep(x) }},
		{"Bind", func(x *tensor.Tensor) { s.Bind(x) }},
		{"Layer", func(x *tensor.Tensor) { tensor.Layer(x, nil) }},
		{"ToSlice", func(x *tensor.Tensor) { tensor.ToSlice[float32](x) }},
		{"Item", func(x *tensor.Tensor) { x.Item() }},
	}
	for _, o := range ops {
		x := s.Ones(d, dtype.F32, 2, 2)
		x.Release()
		before := requested(t, d)
		requireOpError(t, o.op, tensor.ErrReleased, func() { o.f(x) })
		requireOpError(t, o.op, nil, func() { o.f(nil) })
		require.Equal(t, before, requested(t, d), "%s: a refused op leaves nothing", o.op)
	}
	s.Close()
	requireEmpty(t, d)
}
