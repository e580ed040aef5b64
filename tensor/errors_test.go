package tensor_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
)

// Every op's refusal names the op, the cause, the inputs' shapes and dtypes and what
// was wrong, and leaves no allocation behind.
func TestOpErrorsNameWhatWasWrong(t *testing.T) {
	d := newCPU(t)
	s := tensor.NewScope(tensor.WithGenerator(tensor.NewGenerator(1)))
	x := s.Ones(d, dtype.F32, 2, 3)
	v := s.Ones(d, dtype.F32, 3)
	i64 := s.Zeros(d, dtype.I64, 2)
	scalar := s.Ones(d, dtype.F32)
	made := s.Ones(d, dtype.F32, 2).SetRequiresGrad(true).Exp()
	elsewhere := s.Ones(newCPU(t), dtype.F32, 3)
	for _, c := range []struct {
		ins   int // the inputs the error describes
		op    string
		cause error
		msg   string
		f     func()
	}{
		{1, tensor.OpView, tensor.ErrShape, "cannot hold 6 elements", func() { x.View(4, -1) }},
		{1, tensor.OpReshape, tensor.ErrShape, "holds 8 elements", func() { x.Reshape(2, 4) }},
		{1, tensor.OpReshape, tensor.ErrShape, "one -1 at most", func() { x.Reshape(-2, 3) }},
		{1, tensor.OpTranspose, tensor.ErrShape, "dimensions 0 and -3 of a rank-2 tensor", func() { x.Transpose(0, -3) }},
		{1, tensor.OpPermute, tensor.ErrShape, "permutation [0] of a rank-2 tensor", func() { x.Permute(0) }},
		{1, tensor.OpSlice, tensor.ErrShape, "axis 2 of a rank-2 tensor", func() { x.Slice(2, 0, 1) }},
		{1, tensor.OpSlice, tensor.ErrShape, "slice [0:4] of an axis of 3", func() { x.Slice(1, 0, 4) }},
		{1, tensor.OpExpand, tensor.ErrShape, "fewer dimensions", func() { x.Expand(6) }},
		{1, tensor.OpExpand, tensor.ErrShape, "-1 in a new leading dimension", func() { x.Expand(-1, 2, 3) }},
		{1, tensor.OpSqueeze, tensor.ErrShape, "dimension 5 is not of size 1", func() { x.Squeeze(5) }},
		{1, tensor.OpUnsqueeze, tensor.ErrShape, "position 3 in a rank-2 tensor", func() { x.Unsqueeze(3) }},
		{1, tensor.OpSumTo, tensor.ErrShape, "[4] does not broadcast", func() { x.SumTo(4) }},
		{1, tensor.OpMean, tensor.ErrShape, "axes [2]", func() { x.Mean(2) }},
		{1, tensor.OpMax, tensor.ErrShape, "axis -3 of a rank-2 tensor", func() { x.Max(-3) }},
		{1, tensor.OpMax, tensor.ErrShape, "empty axis", func() { s.Ones(d, dtype.F32, 2, 0).Max(1) }},
		{1, tensor.OpMax, tensor.ErrDType, "Cast the int64 input", func() { i64.Max(0) }},
		{1, "Argmax", tensor.ErrShape, "axis 1 of a rank-1 tensor", func() { i64.Argmax(1) }},
		{1, tensor.OpSoftmax, tensor.ErrShape, "axis 2 of a rank-2 tensor", func() { x.Softmax(2) }},
		{1, tensor.OpSoftmax, tensor.ErrDType, "result type int64", func() { x.SoftmaxAs(dtype.I64, 0) }},
		{2, tensor.OpMatMul, tensor.ErrShape, "rank 2 or more", func() { v.MatMul(x) }},
		{2, tensor.OpMatMul, tensor.ErrShape, "[..., 2, 3] @ [..., 2, 3]", func() { x.MatMul(x) }},
		{3, tensor.OpLinear, tensor.ErrShape, "the bias must be [2]", func() { tensor.Linear(v, x, v) }},
		{2, tensor.OpLinear, tensor.ErrShape, "a weight [out, in]", func() { tensor.Linear(x, v, nil) }},
		{1, tensor.OpLayerNorm, tensor.ErrShape, "rank of 1 or more", func() { tensor.LayerNorm(scalar, nil, nil, 1e-5) }},
		{2, tensor.OpCrossEntropy, tensor.ErrShape, "logits [n, c] and labels [n]", func() { tensor.CrossEntropy(v, i64) }},
		{2, tensor.OpEmbedding, tensor.ErrDType, "I64 indices", func() { tensor.Embedding(x, v) }},
		{2, tensor.OpEmbedding, tensor.ErrShape, "[vocab, dim]", func() { tensor.Embedding(v, i64) }},
		{0, tensor.OpConcat, tensor.ErrShape, "nothing to concatenate", func() { tensor.Concat(0) }},
		{2, tensor.OpConcat, tensor.ErrShape, "axis 2 of rank-2 tensors", func() { tensor.Concat(2, x, x) }},
		{2, tensor.OpConcat, tensor.ErrShape, "input 1 has rank 1, not 2", func() { tensor.Concat(0, x, v) }},
		{0, tensor.OpStack, tensor.ErrShape, "nothing to stack", func() { tensor.Stack(0) }},
		{2, tensor.OpStack, tensor.ErrShape, "position 3 for rank-1 tensors", func() { tensor.Stack(3, v, v) }},
		{1, tensor.OpDropout, tensor.ErrShape, "probability -0.1", func() { x.Dropout(-0.1) }},
		{1, tensor.OpPowScalar, tensor.ErrDType, "floating tensors", func() { i64.PowScalar(2) }},
		{0, "Empty", tensor.ErrDType, "invalid dtype", func() { s.Empty(d, dtype.Invalid, 2) }},
		{0, "Full", tensor.ErrShape, "negative dimension in shape [2 -1]", func() { s.Zeros(d, dtype.F32, 2, -1) }},
		{1, "Fill", tensor.ErrGrad, "the output of Exp", func() { made.Fill(0) }},
		{2, "CopyFrom", tensor.ErrShape, "[2 3] does not broadcast to [3]", func() { v.CopyFrom(x) }},
		{2, "CopyFrom", tensor.ErrDevice, "inputs on cpu and cpu", func() { v.CopyFrom(elsewhere) }},
		{1, "FillNormal", tensor.ErrScope, "nil generator", func() { x.FillNormal(nil, 0, 1) }},
		{1, "FillUniform", tensor.ErrDType, "floating tensor", func() { i64.FillUniform(tensor.NewGenerator(1), 0, 1) }},
		{1, "Item", tensor.ErrShape, "exactly one element, the tensor has 6", func() { x.Item() }},
	} {
		before := requested(t, d)
		e := requireOpError(t, c.op, c.cause, c.f)
		require.Contains(t, e.Error(), c.msg)
		require.Len(t, e.Shapes, c.ins, "%s: %v", c.op, e)
		require.Len(t, e.DTypes, c.ins, "%s: %v", c.op, e)
		require.Equal(t, before, requested(t, d), "%s leaves nothing", c.op)
	}
	s.Close()
	requireEmpty(t, d)
}

// Labels and indices that are views (strided) are read in their logical order, in the
// forward and in the backward.
func TestStridedLabelsAndIndices(t *testing.T) {
	d := newCPU(t)
	s := tensor.NewScope()
	logits := f32(s, d, []float32{0, 1, 2, 3, 2, 1}, 2, 3).SetRequiresGrad(true)
	// Column 0 of [[2, 9], [0, 9]]: labels 2 and 0, with stride 2.
	labels := tensor.FromSlice(s, d, dtype.I64, []int32{2, 9, 0, 9}, 2, 2).Slice(1, 0, 1).Squeeze(1)
	require.False(t, labels.IsContiguous())
	dense := tensor.FromSlice(s, d, dtype.I64, []int64{2, 0})
	want := tensor.CrossEntropy(logits, dense)
	got := tensor.CrossEntropy(logits, labels)
	require.Equal(t, want.Item(), got.Item())
	got.Backward()
	g := vals(logits.Grad())
	logits.ZeroGrad(true)
	want.Backward()
	require.Equal(t, vals(logits.Grad()), g)

	table := f32(s, d, []float32{1, 2, 3, 4, 5, 6}, 3, 2).SetRequiresGrad(true)
	idx := tensor.FromSlice(s, d, dtype.I64, []int64{2, 0, 1, 1}, 2, 2).T() // [[2, 1], [0, 1]]
	e := tensor.Embedding(table, idx)
	require.Equal(t, []float32{5, 6, 3, 4, 1, 2, 3, 4}, vals(e))
	e.Sum().Backward()
	require.Equal(t, []float32{1, 1, 2, 2, 1, 1}, vals(table.Grad()))
	s.Close()
	requireEmpty(t, d)
}

// A shape whose bytes do not fit in an int64 is refused, instead of wrapping to a small
// storage (zero bytes for 2^64 elements): on the meta device that would pass for a
// full-size memory proof.
func TestShapesPastTwoToTheSixtyThreeBytesAreRefused(t *testing.T) {
	d := newSim(t, 1<<40, false)
	s := tensor.NewScope()
	requireOpError(t, "Empty", tensor.ErrShape, func() { s.Empty(d, dtype.F32, 1<<32, 1<<32) })
	requireOpError(t, "Full", tensor.ErrShape, func() { s.Zeros(d, dtype.I64, 1<<31, 1<<30) })
	a, b := s.Empty(d, dtype.F32, 1<<32, 1), s.Empty(d, dtype.F32, 1, 1<<32)
	before := requested(t, d)
	e := requireOpError(t, tensor.OpAdd, tensor.ErrShape, func() { a.Add(b) })
	require.Contains(t, e.Error(), "[4294967296 4294967296]")
	require.Equal(t, before, requested(t, d))
	require.Zero(t, s.Empty(d, dtype.F32, 1<<62, 0, 1<<62).Numel(), "an empty shape has no bytes")
	s.Close()
	requireEmpty(t, d)
}

// TryValue gives f's result back, or T's zero value and the tensor error f panicked
// with (running out of memory inside an op here: the step can be retried); other
// panics go on.
func TestTryValue(t *testing.T) {
	d := newSim(t, 30<<20, true)
	s := tensor.NewScope()
	x := s.Ones(d, dtype.F32, 3<<20) // 12 MiB
	sum := func() float64 { return x.Exp().Sum().Item() }
	ballast := s.Zeros(d, dtype.F32, 3<<20)
	v, err := tensor.TryValue(sum)
	var oom *alloc.OOMError
	require.ErrorAs(t, err, &oom)
	require.Zero(t, v)
	require.Equal(t, 2*x.Bytes(), requested(t, d), "the failed op kept nothing")
	ballast.Release()
	v, err = tensor.TryValue(sum)
	require.NoError(t, err)
	require.InDelta(t, float64(3<<20)*2.718281828, v, 1e3)
	require.PanicsWithValue(t, "boom", func() { _, _ = tensor.TryValue(func() int { panic("boom") }) })
	s.Close()
	requireEmpty(t, d)
}
