package tensor_test

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
)

// linearStep is one step of a small model on x, as a PyTorch loop writes it: the ops
// take x (owned by a long-lived scope) and a parameter; nothing names the step scope.
func linearStep(x, w *tensor.Tensor) *tensor.Tensor {
	h := tensor.Layer(x, func(x *tensor.Tensor) *tensor.Tensor { return x.MatMul(w).Tanh() })
	loss := h.Mul(h).Mean()
	loss.Backward()
	return loss
}

// The straight translation of a PyTorch loop: a step scope opened and closed around the
// body, whose ops never name it. Its only open child, the step owns every result, so
// memory is the same after each of 100 steps, to the byte: the data, the parameter and
// its gradient.
func TestStepScopeOwnsTheLoopBody(t *testing.T) {
	d := newCPU(t)
	data := tensor.NewScope()
	x := f32(data, d, []float32{1, 2, 3, 4, 5, 6}, 2, 3)
	w := f32(data, d, []float32{0.1, 0.2, 0.3, 0.4, 0.5, 0.6}, 3, 2).SetRequiresGrad(true).AsParameter()
	for i := range 100 {
		step := data.Child()
		loss := linearStep(x, w)
		require.Same(t, step, loss.Scope(), "step %d: the step owns the loss", i)
		w.AddScaled(-0.01, w.Grad())
		w.ZeroGrad(false)
		step.Close()
		require.True(t, loss.Released())
		require.Equal(t, 1, data.Len(), "step %d: the data scope owns x alone", i)
		require.Equal(t, x.Bytes()+2*w.Bytes(), requested(t, d), "step %d: the data, the parameter and its gradient", i)
	}
	data.Close()
	w.Release()
	requireEmpty(t, d)
}

// A region (With) applies its modes to the ops routed into it and owns nothing: the
// results belong to the scope above and outlive the region, as the results of a
// `with torch.no_grad():` block do. Keep on a region lets through what outlives it.
func TestRegionAppliesModesAndPassesOwnershipUp(t *testing.T) {
	d := newCPU(t)
	data := tensor.NewScope()
	x := f32(data, d, []float32{1, 2}, 2).SetRequiresGrad(true)
	step := data.Child()
	ng := step.With(tensor.NoGrad())
	require.Same(t, step, ng.Owner())
	require.Same(t, step, step.Owner())
	require.Same(t, ng, tensor.ResultScope(x))
	y := x.Exp()
	require.False(t, y.RequiresGrad(), "the region's no-grad mode applies")
	require.Same(t, step, y.Scope(), "the nearest scope that owns owns the result")
	b := ng.Bind(x)
	require.Same(t, step, b.Scope(), "a region's Bind gives a handle its owner owns")
	require.Same(t, y, ng.Keep(y), "y outlives the region: Keep lets it through")
	inner := ng.Child()
	z := inner.Bind(x).Exp()
	requireOpError(t, "Keep", tensor.ErrScope, func() { ng.Keep(z) })
	require.Zero(t, ng.Len())
	ng.Close()
	require.True(t, inner.Closed() && z.Released(), "a region closes its children")
	require.False(t, y.Released(), "closing the region releases nothing of its own")
	require.True(t, x.Exp().RequiresGrad(), "after the region, the step records again")
	require.Equal(t, []float32{2.7182817, 7.389056}, vals(y))
	step.Close()
	require.True(t, y.Released() && b.Released())
	require.Equal(t, x.Bytes(), requested(t, d))
	data.Close()
	requireEmpty(t, d)
}

// A handle bound into a region follows the region's modes while it is open, whatever
// else is open elsewhere; once the region closed, it follows its owner again.
func TestBindIntoARegionFollowsItWhileOpen(t *testing.T) {
	d := newCPU(t)
	s := tensor.NewScope()
	ng := s.With(tensor.NoGrad())
	x := ng.Bind(f32(s, d, []float32{1}, 1).SetRequiresGrad(true))
	require.False(t, x.Exp().RequiresGrad())
	ng.Close()
	require.True(t, x.Exp().RequiresGrad(), "the region closed: the owner's modes")
	s.Close()
	requireEmpty(t, d)
}

// Bind into a closed scope or region is an error of Bind saying so (it named an
// internal step, "adopt", and "the result"), as a factory there is; nothing is left.
func TestBindIntoAClosedScopeIsAnError(t *testing.T) {
	d := newCPU(t)
	s := tensor.NewScope()
	x := f32(s, d, []float32{1}, 1)
	c, r := s.Child(), s.With(tensor.NoGrad())
	c.Close()
	r.Close()
	before := requested(t, d)
	for _, closed := range []*tensor.Scope{c, r} {
		e := requireOpError(t, "Bind", tensor.ErrScope, func() { closed.Bind(x) })
		require.Contains(t, e.Error(), "closed")
		requireOpError(t, "Full", tensor.ErrScope, func() { closed.Ones(d, dtype.F32, 1) })
	}
	require.Equal(t, before, requested(t, d))
	require.Equal(t, 1, x.Storage().Refs(), "no handle was made")
	s.Close()
	requireEmpty(t, d)
}

// A scope with several open children does not guess which owns an op's result: the op
// panics with ErrScope naming the scope and both children by where they were made.
// Closing one routes to the other; an Aside scope does not count.
func TestSeveralOpenChildrenAreAnError(t *testing.T) {
	d := newCPU(t)
	data := tensor.NewScope()
	x := f32(data, d, []float32{1, 2}, 2)
	first := data.Child()
	second := data.Child()
	_, _, line, _ := runtime.Caller(0)
	before := requested(t, d)
	e := requireOpError(t, tensor.OpExp, tensor.ErrScope, func() { x.Exp() })
	require.Contains(t, e.Error(), "has 2 open child scopes")
	for _, l := range []int{line - 2, line - 1} {
		require.Contains(t, e.Error(), fmt.Sprintf("routing_test.go:%d", l), "names both children: %v", e)
	}
	requireOpError(t, "Layer", tensor.ErrScope, func() { tensor.Layer(x, (*tensor.Tensor).Exp) })
	requireOpError(t, "ResultScope", tensor.ErrScope, func() { tensor.ResultScope(x) })
	require.Equal(t, before, requested(t, d), "nothing made")
	require.Same(t, first, first.Bind(x).Exp().Scope(), "a bound input names its scope")

	first.Close()
	require.Same(t, second, x.Exp().Scope(), "one open child again: it owns the result")
	side := data.Aside()
	require.Same(t, second, x.Exp().Scope(), "an Aside scope is not routed into")
	require.Same(t, side, side.Bind(x).Exp().Scope(), "it owns what is made in it by name")
	second.Close()
	require.Same(t, data, x.Exp().Scope(), "no open child: the data scope itself")
	data.Close()
	require.True(t, side.Closed())
	requireEmpty(t, d)
}

// Routing goes down the chain of only children as far as it goes, and each Layer
// (nn's containers) opens its child where the op would run.
func TestRoutingFollowsTheChain(t *testing.T) {
	d := newCPU(t)
	data := tensor.NewScope()
	x := f32(data, d, []float32{1, 2}, 2)
	step := data.Child()
	ng := step.With(tensor.NoGrad())
	inner := ng.Child()
	require.Same(t, inner, x.Exp().Scope())
	var in *tensor.Scope
	y := tensor.Layer(x, func(h *tensor.Tensor) *tensor.Tensor {
		in = h.Scope()
		require.Same(t, inner, in.Parent())
		require.Same(t, in, x.Exp().Scope(), "inside the layer, ops on x land in its scope")
		return h.Exp()
	})
	require.Same(t, inner, y.Scope(), "the layer's result goes to where it was opened")
	require.True(t, in.Closed())
	inner.Close()
	require.Same(t, step, x.Exp().Scope(), "the region owns nothing: the step")
	step.Close()
	require.Same(t, data, x.Exp().Scope())
	data.Close()
	requireEmpty(t, d)
}

// Two goroutines with their own scopes never affect each other, nor does a goroutine
// working in an Aside scope of a shared parent while the other runs its step loop
// there: each one's memory is exact at every step (the race detector watches).
func TestGoroutinesWithTheirOwnScopes(t *testing.T) {
	loop := func(d device.Device, data *tensor.Scope, x *tensor.Tensor, steps int) error {
		w := data.Bind(x).Detach().Clone().SetRequiresGrad(true).AsParameter()
		defer w.Release()
		base := requested(t, d)
		for i := range steps {
			step := data.Child()
			loss := x.Mul(w).Sum()
			loss.Backward()
			if loss.Scope() != step {
				return fmt.Errorf("step %d: the loss is owned by %v", i, loss.Scope())
			}
			step.Close()
			if got, want := requested(t, d), base+w.Bytes(); got != want {
				return fmt.Errorf("step %d: %d bytes, want %d", i, got, want)
			}
			w.ZeroGrad(true)
		}
		return nil
	}
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for g := range 2 {
		d := newCPU(t)
		wg.Go(func() {
			data := tensor.NewScope()
			defer data.Close()
			errs[g] = loop(d, data, f32(data, d, []float32{1, 2, 3}, 3), 50)
		})
	}
	// A shared parent: the main goroutine loops in it; a worker binds x into its Aside
	// and makes views of it (results that take no memory, so the loop's bytes stay
	// exact).
	d := newCPU(t)
	shared := tensor.NewScope()
	x := f32(shared, d, []float32{1, 2, 3}, 3)
	side := shared.Aside()
	xw := side.Bind(x)
	wg.Go(func() {
		for range 500 {
			y := xw.Reshape(3, 1)
			if y.Scope() != side {
				errs[2] = fmt.Errorf("the worker's result is owned by %v", y.Scope())
				return
			}
			y.Release()
		}
	})
	require.NoError(t, loop(d, shared, x, 50))
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	shared.Close()
	requireEmpty(t, d)
}

// The traps routing cannot see are reported by Leaks as growth at their second step:
// no scope per step (every step's tensors stay in the long-lived scope), and a
// factory into the long-lived scope inside the loop. The loop with a step scope
// reports nothing.
func TestGrowthIsReported(t *testing.T) {
	d := newCPU(t)
	init := tensor.NewScope()
	w := init.Ones(d, dtype.F32, 3).SetRequiresGrad(true).AsParameter()
	init.Close()
	growing := func(site string) *tensor.Leak {
		for _, l := range tensor.Leaks() {
			if l.Growing && strings.HasPrefix(strings.TrimSpace(l.Site), site) {
				return &l
			}
		}
		return nil
	}

	noStep := tensor.NewScope()
	x := f32(noStep, d, []float32{1, 2, 3}, 3)
	before := growing("tensor_test.growNoStep") // the report lasts the process (-count)
	for i := range 3 {
		growNoStep(x, w)
		if i == 0 {
			require.Equal(t, before, growing("tensor_test.growNoStep"), "one step is no growth")
		}
	}
	l := growing("tensor_test.growNoStep")
	require.NotNil(t, l, "leaks: %+v", tensor.Leaks())
	require.Equal(t, 6, l.Count, "the products and the losses, one of each per step")
	require.Equal(t, int64(3*(12+4)), l.Bytes)
	noStep.Close()

	data := tensor.NewScope()
	x = f32(data, d, []float32{1, 2, 3}, 3)
	for range 3 {
		step := data.Child()
		growInData(data, d, x, w)
		step.Close()
	}
	l = growing("tensor_test.growInData")
	require.NotNil(t, l, "leaks: %+v", tensor.Leaks())
	require.Equal(t, 3, l.Count, "the batch FromSlice put in data, one per step")
	for range 3 {
		step := data.Child()
		noGrowth(x, w)
		step.Close()
	}
	require.Nil(t, growing("tensor_test.noGrowth"))
	data.Close()
	w.Release()
	requireEmpty(t, d)
}

//go:noinline
func growNoStep(x, w *tensor.Tensor) { x.Mul(w).Sum().Backward() }

//go:noinline
func growInData(data *tensor.Scope, d device.Device, x, w *tensor.Tensor) {
	batch := tensor.FromSlice(data, d, dtype.F32, []float32{1, 1, 1}, 3)
	x.Add(batch).Mul(w).Sum().Backward()
}

//go:noinline
func noGrowth(x, w *tensor.Tensor) { x.Mul(w).Sum().Backward() }
