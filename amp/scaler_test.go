package amp_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/amp"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/tensortest"
)

// sgd is plain gradient descent, the optimizer the scaler drives in these tests.
type sgd struct {
	params []*tensor.Tensor
	lr     float64
	steps  int
}

func (o *sgd) Params() []*tensor.Tensor { return o.params }

func (o *sgd) Step() {
	o.steps++
	for _, p := range o.params {
		if g := p.Grad(); g != nil {
			p.AddScaled(-o.lr, g)
		}
	}
}

// problem is one F32 parameter w whose loss Σ w·x has the gradient x.
type problem struct {
	d   device.Device
	w   *tensor.Tensor
	opt *sgd
}

func newProblem(t *testing.T, w []float32) *problem {
	d := tensortest.CPU(t)
	p := &problem{d: d, w: param(d, w, len(w))}
	p.opt = &sgd{params: []*tensor.Tensor{p.w}, lr: 1}
	t.Cleanup(func() {
		p.w.Release()
		tensortest.RequireEmpty(t, d)
	})
	return p
}

// backward drops the gradient and backpropagates the scaled loss Σ w·x: w's gradient
// becomes x·S.
func (p *problem) backward(sc *amp.GradScaler, x ...float32) {
	p.w.ZeroGrad(true)
	s := tensor.NewScope()
	defer s.Close()
	loss := s.Bind(p.w).Mul(f32(s, p.d, x)).Sum()
	sc.Scale(loss).Backward()
}

func newScaler(t *testing.T, c amp.ScalerConfig) *amp.GradScaler {
	sc, err := amp.NewGradScaler(c)
	require.NoError(t, err)
	return sc
}

// PyTorch's defaults: with no configuration, or zero fields; two configurations are
// an error.
func TestScalerDefaults(t *testing.T) {
	plain, err := amp.NewGradScaler()
	require.NoError(t, err)
	for _, sc := range []*amp.GradScaler{plain, newScaler(t, amp.ScalerConfig{})} {
		require.True(t, sc.Enabled())
		require.Equal(t, 65536.0, sc.GetScale())
		require.Equal(t, amp.ScalerState{Scale: 65536, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 2000}, sc.State())
	}
	_, err = amp.NewGradScaler(amp.ScalerConfig{}, amp.ScalerConfig{})
	require.ErrorContains(t, err, "amp: NewGradScaler: 2 configurations; pass one, or none for PyTorch's defaults")
}

// TestScalerStateMachine walks PyTorch's update rule with growth interval 3: three
// good steps double the scale, an Inf or a NaN halves it and skips the step, leaving
// the parameter untouched, and restarts the count.
func TestScalerStateMachine(t *testing.T) {
	p := newProblem(t, []float32{10, 20})
	sc := newScaler(t, amp.ScalerConfig{InitScale: 8, GrowthInterval: 3})
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	for i, c := range []struct {
		x       []float32
		stepped bool
		scale   float64
		tracker int
	}{
		{[]float32{1, 2}, true, 8, 1},
		{[]float32{1, 2}, true, 8, 2},
		{[]float32{1, 2}, true, 16, 0},
		{[]float32{1, 2}, true, 16, 1},
		{[]float32{inf, 2}, false, 8, 0},
		{[]float32{1, nan}, false, 4, 0},
		{[]float32{1, 2}, true, 4, 1},
		{[]float32{1, 2}, true, 4, 2},
		{[]float32{1, 2}, true, 8, 0},
	} {
		before := vals(p.w)
		steps := p.opt.steps
		p.backward(sc, c.x...)
		stepped, err := sc.Step(p.opt)
		require.NoError(t, err)
		require.Equal(t, c.stepped, stepped, "iteration %d", i)
		if c.stepped {
			require.Equal(t, c.x, vals(p.w.Grad()), "iteration %d: the gradient is unscaled", i)
			require.Equal(t, []float32{before[0] - c.x[0], before[1] - c.x[1]}, vals(p.w), "iteration %d", i)
			require.Equal(t, steps+1, p.opt.steps)
		} else {
			require.Equal(t, before, vals(p.w), "iteration %d: a skipped step leaves the parameter untouched", i)
			require.Equal(t, steps, p.opt.steps, "iteration %d: the optimizer did not step", i)
		}
		require.NoError(t, sc.Update())
		require.Equal(t, c.scale, sc.GetScale(), "iteration %d", i)
		require.Equal(t, c.tracker, sc.GrowthTracker(), "iteration %d", i)
	}
}

// TestScalerNeverGrowsToInfinity: a growth that would overflow float32 keeps the scale
// and still restarts the count.
func TestScalerNeverGrowsToInfinity(t *testing.T) {
	p := newProblem(t, []float32{0})
	sc := newScaler(t, amp.ScalerConfig{InitScale: math.Ldexp(1, 127), GrowthFactor: 1.5, GrowthInterval: 1})
	grown := 1.5 * math.Ldexp(1, 127) // 2.55e38; once more would be 3.8e38 > MaxFloat32
	for i, want := range []float64{grown, grown, grown} {
		p.backward(sc, 1)
		stepped, err := sc.Step(p.opt)
		require.NoError(t, err)
		require.True(t, stepped)
		require.NoError(t, sc.Update())
		require.Equal(t, want, sc.GetScale(), "update %d", i)
		require.Zero(t, sc.GrowthTracker())
	}
}

// TestUnscaleUsesTheFloat64Reciprocal: the gradient is multiplied by 1/S computed in
// float64 and rounded to float32, not divided by S: with S = 7 the gradient 3 comes
// back as 21·float32(1/7) = 3.0000002, as in PyTorch.
func TestUnscaleUsesTheFloat64Reciprocal(t *testing.T) {
	p := newProblem(t, []float32{0, 0, 0})
	sc := newScaler(t, amp.ScalerConfig{InitScale: 7})
	require.Equal(t, 7.0, sc.GetScale())
	x := []float32{1, 3, 5}
	p.backward(sc, x...)
	scaled := vals(p.w.Grad())
	require.NoError(t, sc.Unscale(p.opt))
	inv := float32(1 / float64(7))
	for i, g := range vals(p.w.Grad()) {
		require.Equal(t, scaled[i]*inv, g)
	}
	require.Equal(t, float32(3.0000002), vals(p.w.Grad())[1])
	stepped, err := sc.Step(p.opt)
	require.NoError(t, err)
	require.True(t, stepped)
}

// TestUnscaleFindsInfAndNaN: Unscale of F32 gradients holding an Inf or a NaN records
// found-inf (the finite elements are still unscaled) and the Step that follows is
// skipped.
func TestUnscaleFindsInfAndNaN(t *testing.T) {
	for _, bad := range []float32{float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())} {
		p := newProblem(t, []float32{1, 1, 1})
		sc := newScaler(t, amp.ScalerConfig{InitScale: 4})
		p.backward(sc, 2, bad, 3)
		require.NoError(t, sc.Unscale(p.opt))
		g := vals(p.w.Grad())
		require.Equal(t, []float32{2, 3}, []float32{g[0], g[2]})
		stepped, err := sc.Step(p.opt)
		require.NoError(t, err)
		require.False(t, stepped, "%v", bad)
		require.Equal(t, []float32{1, 1, 1}, vals(p.w))
		require.NoError(t, sc.Update())
		require.Equal(t, 2.0, sc.GetScale())
	}
}

func TestScalerMisuseErrorsSayWhatPyTorchSays(t *testing.T) {
	p := newProblem(t, []float32{1, 2})
	sc := newScaler(t, amp.ScalerConfig{})
	requireErr := func(err, want error, text string) {
		t.Helper()
		require.ErrorIs(t, err, want)
		require.ErrorContains(t, err, text)
	}

	// Before any Scale, PyTorch's scale tensor does not exist yet and every method
	// that reads it refuses, naming itself.
	const fix = " but _scale is None.  This may indicate your script did not use scaler.scale(loss or outputs) earlier in the iteration."
	requireErr(sc.Unscale(p.opt), amp.ErrNotScaled, "amp: GradScaler.Unscale: Attempted unscale_"+fix)
	_, err := sc.Step(p.opt)
	requireErr(err, amp.ErrNotScaled, "amp: GradScaler.Step: Attempted step"+fix)
	requireErr(sc.Update(), amp.ErrNotScaled, "amp: GradScaler.Update: Attempted update"+fix)
	requireErr(sc.UpdateTo(2), amp.ErrNotScaled, "amp: GradScaler.UpdateTo: Attempted update"+fix)
	require.Equal(t, 65536.0, sc.GetScale(), "nothing changed")
	require.Equal(t, 0, p.opt.steps, "nor did the optimizer step")

	// A Scale whose backward left no gradient: nothing to check.
	p.backward(sc, 1, 2)
	p.w.ZeroGrad(true)
	requireErr(sc.Update(), amp.ErrNoInfChecks, "No inf checks were recorded prior to update.")
	_, err = sc.Step(p.opt)
	requireErr(err, amp.ErrNoInfChecksForOptimizer, "No inf checks were recorded for this optimizer.")
	// As in PyTorch, that Step unscaled (nothing) first, and Update has no checks to go
	// by: only an explicit scale starts the iteration over.
	requireErr(sc.Unscale(p.opt), amp.ErrUnscaledTwice, "")
	requireErr(sc.Update(), amp.ErrNoInfChecks, "")
	require.NoError(t, sc.UpdateTo(sc.GetScale()))

	p.backward(sc, 1, 2)
	require.NoError(t, sc.Unscale(p.opt))
	requireErr(sc.Unscale(p.opt), amp.ErrUnscaledTwice, "unscale_() has already been called on this optimizer since the last update().")
	_, err = sc.Step(p.opt)
	require.NoError(t, err)
	requireErr(sc.Unscale(p.opt), amp.ErrUnscaleAfterStep, "unscale_() is being called after step().")
	_, err = sc.Step(p.opt)
	requireErr(err, amp.ErrSteppedTwice, "step() has already been called since the last update().")
	require.NoError(t, sc.Update())
	require.Equal(t, []float32{1, 2}, vals(p.w.Grad()), "the gradient was unscaled once")

	// The next iteration starts over.
	p.backward(sc, 1, 2)
	stepped, err := sc.Step(p.opt)
	require.NoError(t, err)
	require.True(t, stepped)
	require.NoError(t, sc.Update())
}

// TestUnscaleRejectsF16Gradients before touching any gradient; BF16 ones pass.
func TestUnscaleRejectsF16Gradients(t *testing.T) {
	d := tensortest.CPU(t)
	mk := func(dt dtype.DType) *tensor.Tensor {
		s := tensor.NewScope()
		defer s.Close()
		return tensor.FromSlice(s, d, dt, []float32{1, 2}).AsParameter()
	}
	w32, w16, wbf := mk(dtype.F32), mk(dtype.F16), mk(dtype.BF16)
	s := tensor.NewScope()
	sc := newScaler(t, amp.ScalerConfig{InitScale: 4})
	sc.Scale(s.Bind(w32).Sum().Add(s.Bind(w16).Sum()).Add(s.Bind(wbf).Sum())).Backward()
	s.Close()
	require.Equal(t, dtype.F16, w16.Grad().DType())

	err := sc.Unscale(&sgd{params: []*tensor.Tensor{w32, w16}})
	require.ErrorIs(t, err, amp.ErrFP16Gradients)
	require.ErrorContains(t, err, "Attempting to unscale FP16 gradients.")
	require.Equal(t, []float32{4, 4}, vals(w32.Grad()), "nothing was unscaled")

	opt := &sgd{params: []*tensor.Tensor{w32, wbf}}
	require.NoError(t, sc.Unscale(opt), "the failed call left the optimizer's stage as it was")
	require.Equal(t, []float32{1, 1}, vals(wbf.Grad()))
	for _, w := range []*tensor.Tensor{w32, w16, wbf} {
		w.Release()
	}
	tensortest.RequireEmpty(t, d)
}

// TestSeveralOptimizers: an Inf in one optimizer's gradients skips its step only, and
// backs off the scale they share once.
func TestSeveralOptimizers(t *testing.T) {
	p := newProblem(t, []float32{5})
	q := newProblem(t, []float32{5})
	sc := newScaler(t, amp.ScalerConfig{InitScale: 2, GrowthInterval: 1})
	p.backward(sc, 1)
	q.backward(sc, float32(math.Inf(-1)))
	stepped, err := sc.Step(p.opt)
	require.NoError(t, err)
	require.True(t, stepped)
	stepped, err = sc.Step(q.opt)
	require.NoError(t, err)
	require.False(t, stepped)
	require.NoError(t, sc.Update())
	require.Equal(t, 1.0, sc.GetScale())
	require.Equal(t, []float32{4}, vals(p.w))
	require.Equal(t, []float32{5}, vals(q.w))
}

// TestF16OverflowIsFoundAndSkipped: under F16 autocast the scaled gradient of the
// Linear's F16 output is the scale itself, and 65536 is beyond float16 (65520 and up
// round to +Inf); the Inf reaches the F32 weight's gradient, the scaler finds it, skips
// the step and backs off. At 32768 the gradients (32768·x) fit, and the step is taken.
func TestF16OverflowIsFoundAndSkipped(t *testing.T) {
	d := tensortest.CPU(t)
	w := param(d, []float32{1, 1}, 1, 2)
	opt := &sgd{params: []*tensor.Tensor{w}, lr: 0.5}
	sc := newScaler(t, amp.ScalerConfig{InitScale: 65536})
	for i, want := range []struct {
		stepped bool
		scale   float64
	}{{false, 32768}, {true, 32768}} {
		w.ZeroGrad(true)
		root := tensor.NewScope()
		x := f32(root, d, []float32{1, 1.5}, 1, 2)
		ac := autocast(t, root, dtype.F16)
		y := tensor.Layer(ac.Bind(x), linear(w, nil))
		loss := ac.Keep(y.Sum())
		ac.Close()
		sc.Scale(loss).Backward()
		root.Close()
		g := vals(w.Grad())
		if !want.stepped {
			require.True(t, math.IsInf(float64(g[0]), 1) && math.IsInf(float64(g[1]), 1), "iteration %d: %v", i, g)
		}
		stepped, err := sc.Step(opt)
		require.NoError(t, err)
		require.Equal(t, want.stepped, stepped, "iteration %d", i)
		require.NoError(t, sc.Update())
		require.Equal(t, want.scale, sc.GetScale(), "iteration %d", i)
	}
	require.Equal(t, []float32{0.5, 0.25}, vals(w))
	w.Release()
	tensortest.RequireEmpty(t, d)
}

func TestDisabledScalerPassesThrough(t *testing.T) {
	p := newProblem(t, []float32{3})
	sc := newScaler(t, amp.ScalerConfig{Disabled: true})
	require.False(t, sc.Enabled())
	require.Equal(t, 1.0, sc.GetScale())
	p.backward(sc, float32(math.Inf(1)))
	require.NoError(t, sc.Unscale(p.opt))
	require.NoError(t, sc.Unscale(p.opt))
	stepped, err := sc.Step(p.opt)
	require.NoError(t, err)
	require.True(t, stepped, "a disabled scaler checks nothing")
	require.Equal(t, 1, p.opt.steps)
	require.NoError(t, sc.Update())
	require.NoError(t, sc.UpdateTo(5))
	require.Equal(t, amp.ScalerState{}, sc.State())
	require.NoError(t, sc.LoadState(amp.ScalerState{Scale: 8}))
	require.Equal(t, 1.0, sc.GetScale())

	s := tensor.NewScope()
	defer s.Close()
	x := f32(s, p.d, []float32{2})
	require.Same(t, x, sc.Scale(x))
}

// TestScalerStateRoundTrip: a scaler restored from State continues exactly as the
// original.
func TestScalerStateRoundTrip(t *testing.T) {
	p := newProblem(t, []float32{1})
	a := newScaler(t, amp.ScalerConfig{InitScale: 1024, GrowthFactor: 4, BackoffFactor: 0.25, GrowthInterval: 3})
	iterate := func(sc *amp.GradScaler, x float32) {
		p.backward(sc, x)
		_, err := sc.Step(p.opt)
		require.NoError(t, err)
		require.NoError(t, sc.Update())
	}
	iterate(a, float32(math.NaN()))
	iterate(a, 1)
	st := a.State()
	require.Equal(t, amp.ScalerState{Scale: 256, GrowthFactor: 4, BackoffFactor: 0.25, GrowthInterval: 3, GrowthTracker: 1}, st)

	b := newScaler(t, amp.ScalerConfig{})
	require.NoError(t, b.LoadState(st))
	require.Equal(t, st, b.State())
	for range 2 {
		iterate(a, 1)
		iterate(b, 1)
	}
	require.Equal(t, a.State(), b.State())
	require.Equal(t, 1024.0, b.GetScale())

	err := b.LoadState(amp.ScalerState{})
	require.ErrorIs(t, err, amp.ErrEmptyState)
	require.ErrorContains(t, err, "The source state dict is empty, possibly because it was saved from a disabled instance of GradScaler.")
	require.ErrorContains(t, b.LoadState(amp.ScalerState{Scale: 1, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 3, GrowthTracker: 3}), "growth tracker 3")
	require.Equal(t, a.State(), b.State(), "a refused state changes nothing")
}

func TestScalerConfigErrors(t *testing.T) {
	for _, c := range []struct {
		cfg  amp.ScalerConfig
		want string
	}{
		{amp.ScalerConfig{GrowthFactor: 1}, "The growth factor must be > 1.0."},
		{amp.ScalerConfig{GrowthFactor: math.NaN()}, "The growth factor must be > 1.0."},
		{amp.ScalerConfig{BackoffFactor: 1}, "The backoff factor must be < 1.0."},
		{amp.ScalerConfig{BackoffFactor: -0.5}, "must also be above 0"},
		{amp.ScalerConfig{GrowthInterval: -1}, "growth interval -1"},
		{amp.ScalerConfig{InitScale: -1}, "scale -1: give a positive float32 value"},
		{amp.ScalerConfig{InitScale: 1e39}, "scale 1e+39"},
	} {
		_, err := amp.NewGradScaler(c.cfg)
		require.ErrorContains(t, err, c.want)
	}
	sc := newScaler(t, amp.ScalerConfig{})
	require.ErrorContains(t, sc.UpdateTo(math.Inf(1)), "amp: GradScaler.UpdateTo: scale +Inf")
	require.Equal(t, 65536.0, sc.GetScale())
}
