package tensor_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
)

// SetRequiresGrad(false) drops the leaf's gradient (its memory goes back) and its
// accumulator: a graph recorded before still runs, but the gradient is dropped. Only
// the handle that made the leaf require grad can turn it off, and only leaves take it.
func TestSetRequiresGradOffDropsTheGradient(t *testing.T) {
	d := newCPU(t)
	s := tensor.NewScope()
	x := f32(s, d, []float32{1, 2}).SetRequiresGrad(true)
	require.Same(t, x, x.SetRequiresGrad(true), "again is a no-op")
	x.MulScalar(2).Sum().Backward()
	require.Equal(t, []float32{2, 2}, vals(x.Grad()))
	pending := x.Exp().Sum() // records an edge to x's accumulator
	bound := s.Bind(x)
	requireOpError(t, "SetRequiresGrad", tensor.ErrGrad, func() { bound.SetRequiresGrad(false) })
	requireOpError(t, "SetRequiresGrad", tensor.ErrGrad, func() { pending.SetRequiresGrad(false) })
	before := requested(t, d)
	x.SetRequiresGrad(false)
	require.False(t, x.RequiresGrad())
	require.Nil(t, x.Grad())
	require.Equal(t, before-x.Bytes(), requested(t, d), "the gradient's memory is back")
	pending.Backward()
	require.Nil(t, x.Grad(), "a gradient reaching a leaf that stopped requiring grad is dropped")
	require.Equal(t, before-x.Bytes(), requested(t, d))
	require.False(t, x.Exp().RequiresGrad())
	s.Close()
	requireEmpty(t, d)
}

// Releasing a leaf while a graph still leads to it: the backward runs, the gradient
// is dropped, nothing leaks.
func TestBackwardToAReleasedLeaf(t *testing.T) {
	d := newCPU(t)
	s := tensor.NewScope()
	x := f32(s, d, []float32{1, 2}).SetRequiresGrad(true)
	w := f32(s, d, []float32{3, 4}).SetRequiresGrad(true)
	loss := x.Mul(w).Sum()
	x.Release()
	loss.Backward()
	require.Equal(t, []float32{1, 2}, vals(w.Grad()))
	s.Close()
	requireEmpty(t, d)
}

// A gradient that something else holds (the seed the caller passed) is copied into the
// leaf, not stolen; the next one is added into that copy.
func TestSeedGradientIsCopiedNotStolen(t *testing.T) {
	d := newCPU(t)
	s := tensor.NewScope()
	x := f32(s, d, []float32{1, 2, 3}).SetRequiresGrad(true)
	seed := f32(s, d, []float32{1, 10, 100})
	y := x.Contiguous() // a view: the seed reaches x unchanged
	y.BackwardWith(tensor.BackwardOptions{Grad: seed, RetainGraph: true})
	require.NotSame(t, seed.Storage(), x.Grad().Storage())
	y.BackwardWith(tensor.BackwardOptions{Grad: seed})
	require.Equal(t, []float32{2, 20, 200}, vals(x.Grad()))
	require.Equal(t, []float32{1, 10, 100}, vals(seed), "the caller's seed is only read")

	requireOpError(t, "Backward", tensor.ErrShape, func() {
		x.Exp().BackwardWith(tensor.BackwardOptions{Grad: s.Ones(d, dtype.F32, 2)})
	})
	requireOpError(t, "Backward", tensor.ErrShape, func() {
		x.Exp().BackwardWith(tensor.BackwardOptions{Grad: s.Ones(d, dtype.F16, 3)})
	})
	other := newCPU(t)
	requireOpError(t, "Backward", tensor.ErrShape, func() {
		x.Exp().BackwardWith(tensor.BackwardOptions{Grad: s.Ones(other, dtype.F32, 3)})
	})
	s.Close()
	requireEmpty(t, d)
	requireEmpty(t, other)
}

// RetainGrad keeps a copy of a non-leaf's gradient per backward (accumulated, as a
// leaf's); on a leaf it changes nothing; twice is once.
func TestRetainGrad(t *testing.T) {
	d := newCPU(t)
	s := tensor.NewScope()
	x := f32(s, d, []float32{1, 2}).SetRequiresGrad(true)
	x.RetainGrad()
	h := x.MulScalar(3)
	h.RetainGrad()
	h.RetainGrad()
	loss := h.MulScalar(2).Sum()
	loss.BackwardWith(tensor.BackwardOptions{RetainGraph: true})
	require.Equal(t, []float32{2, 2}, vals(h.Grad()))
	loss.Backward()
	require.Equal(t, []float32{4, 4}, vals(h.Grad()))
	require.Equal(t, []float32{12, 12}, vals(x.Grad()))
	requireOpError(t, "RetainGrad", tensor.ErrGrad, func() { s.Ones(d, dtype.F32, 1).RetainGrad() })
	before := requested(t, d)
	h.Release()
	require.Equal(t, before-h.Bytes()-h.Bytes(), requested(t, d), "h and its retained gradient")
	s.Close()
	requireEmpty(t, d)
}

// A hook that returns a gradient of another shape or type, or fails, fails the
// backward naming the cause; every gradient the engine held is released.
func TestFailingGradientHooks(t *testing.T) {
	d := newCPU(t)
	errHook := errors.New("hook failed")
	for name, c := range map[string]struct {
		hook  func(s *tensor.Scope, g *tensor.Tensor) *tensor.Tensor
		cause error
	}{
		"shape":  {func(s *tensor.Scope, g *tensor.Tensor) *tensor.Tensor { return g.Sum() }, tensor.ErrShape},
		"type":   {func(s *tensor.Scope, g *tensor.Tensor) *tensor.Tensor { return g.Cast(dtype.F16) }, tensor.ErrShape},
		"panics": {func(s *tensor.Scope, g *tensor.Tensor) *tensor.Tensor { panic(&tensor.Error{Op: "hook", Err: errHook}) }, errHook},
	} {
		t.Run(name, func(t *testing.T) {
			s := tensor.NewScope()
			x := f32(s, d, []float32{1, 2}).SetRequiresGrad(true)
			h := x.Exp()
			h.RegisterHook(c.hook)
			loss := h.Mul(h).Sum()
			before := requested(t, d)
			err := tensor.Try(loss.Backward)
			require.ErrorIs(t, err, c.cause)
			require.ErrorIs(t, err, tensor.ErrGrad)
			require.Nil(t, x.Grad())
			require.Equal(t, before, requested(t, d), "no gradient in flight is left")
			s.Close()
			requireEmpty(t, d)
		})
	}
	s := tensor.NewScope()
	defer s.Close()
	x := s.Ones(d, dtype.F32, 1).SetRequiresGrad(true)
	requireOpError(t, "RegisterPostAccumulateHook", tensor.ErrGrad, func() { x.Exp().RegisterPostAccumulateHook(func() {}) })
	requireOpError(t, "RegisterPostAccumulateHook", tensor.ErrGrad, func() { s.Ones(d, dtype.F32, 1).RegisterPostAccumulateHook(func() {}) })
	requireOpError(t, "AsParameter", tensor.ErrGrad, func() { x.Exp().AsParameter() })
}

// ZeroGrad on a tensor without a gradient (yet) does nothing; Grad of a tensor that
// does not require grad is nil.
func TestZeroGradWithoutAGradient(t *testing.T) {
	d := newCPU(t)
	s := tensor.NewScope()
	plain := s.Ones(d, dtype.F32, 2)
	plain.ZeroGrad(true)
	plain.ZeroGrad(false)
	require.Nil(t, plain.Grad())
	x := s.Ones(d, dtype.F32, 2).SetRequiresGrad(true)
	x.ZeroGrad(false)
	x.ZeroGrad(true)
	require.Nil(t, x.Grad())
	require.Equal(t, plain.Bytes()+x.Bytes(), requested(t, d))
	s.Close()
	requireEmpty(t, d)
}
