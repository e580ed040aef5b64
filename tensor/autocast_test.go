package tensor_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
)

// halfProducts is a toy autocast policy: products run in F16, the rest as they come.
type halfProducts struct{ seen []string }

func (p *halfProducts) Inputs(_ *tensor.Scope, op string, in []*tensor.Tensor, cast func(*tensor.Tensor, dtype.DType) *tensor.Tensor) []*tensor.Tensor {
	p.seen = append(p.seen, op)
	if op != tensor.OpLinear && op != tensor.OpMatMul {
		return in
	}
	for i, t := range in {
		if t.DType() == dtype.F32 {
			in[i] = cast(t, dtype.F16)
		}
	}
	return in
}

func TestAutocastHookCastsInputsAboveAutograd(t *testing.T) {
	d := newCPU(t)
	setup := tensor.NewScope()
	w := f32(setup, d, []float32{0.5, -1, 2, 0.25, 1, -0.5}, 2, 3).AsParameter()
	x := f32(setup, d, []float32{1, 2, 3, 4, 5, 6}, 2, 3)

	reference := func() []float32 {
		s := setup.Child()
		defer s.Close()
		tensor.Linear(s.Bind(x), w, nil).Sum().Backward()
		g := vals(w.Grad())
		w.ZeroGrad(true)
		return g
	}()

	policy := &halfProducts{}
	s := setup.Child(tensor.WithAutocast(policy))
	require.Same(t, policy, s.Autocast())
	xb := s.Bind(x)
	before := requested(t, d)
	y := tensor.Linear(xb, w, nil)
	require.Equal(t, dtype.F16, y.DType(), "the op ran on the F16 casts")
	// The graph saved the F16 cast of x (w needs a gradient), half x's bytes; w's cast
	// was a temporary of the op (x needs no gradient, so nothing saved it).
	require.Equal(t, before+y.Bytes()+x.Bytes()/2, requested(t, d))
	loss := y.Sum()
	require.Equal(t, dtype.F16, loss.DType())
	loss.Backward()
	require.Equal(t, dtype.F32, w.Grad().DType(), "the gradient is cast back to the parameter's type")
	require.InDeltaSlice(t, reference, vals(w.Grad()), 1e-2)
	require.Equal(t, []string{tensor.OpLinear, tensor.OpSum}, policy.seen, "Cast itself is never offered to the policy")
	require.False(t, slices.Contains(policy.seen, tensor.OpCast))
	s.Close()
	setup.Close()
	w.Release()
	requireEmpty(t, d)
}

// cloneToHalf casts the input of Clone, and of no other op, to F16.
type cloneToHalf struct{}

func (cloneToHalf) Inputs(_ *tensor.Scope, op string, in []*tensor.Tensor, cast func(*tensor.Tensor, dtype.DType) *tensor.Tensor) []*tensor.Tensor {
	if op == "Clone" && in[0].DType() == dtype.F32 {
		in[0] = cast(in[0], dtype.F16)
	}
	return in
}

// To copies a strided tensor contiguous inside the op, which the policy does not see:
// the result has the input's type and exactly its bytes, whatever the policy does to
// other ops, and the copy is gone after the op.
func TestToCopiesStridedInputsWithoutOtherOps(t *testing.T) {
	a, b := newCPU(t), newSim(t, 64<<20, true)
	s := tensor.NewScope()
	x := f32(s, a, []float32{1, 2, 3, 4, 5, 6}, 2, 3).SetRequiresGrad(true)
	c := s.Child(tensor.WithAutocast(cloneToHalf{}))
	before := requested(t, a)
	y := c.Bind(x).T().To(b)
	require.Equal(t, dtype.F32, y.DType())
	require.Equal(t, y.Bytes(), y.Storage().Size())
	require.Equal(t, []float32{1, 4, 2, 5, 3, 6}, vals(y))
	require.Equal(t, before, requested(t, a), "no copy left on the source device")
	y.Sum().Backward()
	require.Equal(t, []float32{1, 1, 1, 1, 1, 1}, vals(x.Grad()))
	s.Close()
	requireEmpty(t, a)
	requireEmpty(t, b)
}
