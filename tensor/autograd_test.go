package tensor_test

import (
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/autograd"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
)

func TestKnownGradientAExpA(t *testing.T) {
	for _, td := range dataDevices(t) {
		t.Run(td.Name, func(t *testing.T) {
			d := td.Device
			s := tensor.NewScope()
			a := f32(s, d, []float32{2}).SetRequiresGrad(true)
			y := a.Mul(a.Exp())
			require.True(t, y.RequiresGrad())
			require.False(t, y.IsLeaf())
			y.Backward()
			// d/da a·e^a = (1+a)e^a = 3e² at 2.
			require.InDelta(t, 3*math.Exp(2), tensor.ToSlice[float64](a.Grad())[0], 1e-4)
			s.Close()
			requireEmpty(t, d)
		})
	}
}

func TestGradientsAccumulateStealThenAddInPlace(t *testing.T) {
	d := newCPU(t)
	s := tensor.NewScope()
	x := f32(s, d, []float32{1, 2, 3}).AsParameter()
	step := func() {
		c := s.Child()
		c.Bind(x).Mul(c.Bind(x)).Sum().Backward()
		c.Close()
	}
	step()
	g := x.Grad()
	require.Equal(t, []float32{2, 4, 6}, vals(g))
	require.Equal(t, x.Bytes()+g.Bytes(), requested(t, d), "after backward: the parameter and its gradient, nothing else")
	st := g.Storage()
	step()
	require.Same(t, g, x.Grad(), "the second gradient is added in place")
	require.Same(t, st, x.Grad().Storage())
	require.Equal(t, []float32{4, 8, 12}, vals(x.Grad()))

	x.ZeroGrad(false)
	require.Equal(t, []float32{0, 0, 0}, vals(x.Grad()))
	require.Equal(t, 2*x.Bytes(), requested(t, d))
	x.ZeroGrad(true)
	require.Nil(t, x.Grad())
	require.Equal(t, x.Bytes(), requested(t, d), "set to none: the gradient's memory is back")
	step()
	require.Equal(t, []float32{2, 4, 6}, vals(x.Grad()))
	x.Release()
	s.Close()
	requireEmpty(t, d)
}

func TestBackwardTwiceAndRetainGraph(t *testing.T) {
	d := newCPU(t)
	s := tensor.NewScope()
	x := f32(s, d, []float32{0.5, -1}).SetRequiresGrad(true)
	y := x.Tanh().Sum()
	y.BackwardWith(tensor.BackwardOptions{RetainGraph: true})
	y.Backward()
	want := 2 * (1 - math.Pow(math.Tanh(0.5), 2))
	require.InDelta(t, want, tensor.ToSlice[float64](x.Grad())[0], 1e-6)
	err := tensor.Try(y.Backward)
	require.ErrorIs(t, err, autograd.ErrBackwardTwice)
	require.ErrorIs(t, err, tensor.ErrGrad)

	z := s.Ones(d, dtype.F32, 2)
	requireOpError(t, "Backward", tensor.ErrGrad, func() { z.Sum().Backward() })
	requireOpError(t, "Backward", tensor.ErrShape, func() { x.Exp().Backward() })
	s.Close()
	requireEmpty(t, d)
}

func TestSavedTensorsReleasedByBackwardAndByReleasingTheGraph(t *testing.T) {
	d := newCPU(t)
	s := tensor.NewScope()
	w := s.Ones(d, dtype.F32, 256).AsParameter()
	forward := func(c *tensor.Scope) *tensor.Tensor {
		h := chain(c.Bind(w), 4, func(x *tensor.Tensor) *tensor.Tensor { return x.MulScalar(0.5).Exp() })
		defer h.Release()
		return h.Sum()
	}
	// Each layer: MulScalar saves nothing, Exp saves its output, the layer's result.
	// The MulScalar temporaries died at the layer boundaries, the layer outputs are
	// released once consumed: only what the graph saved stays.
	c := s.Child()
	loss := forward(c)
	require.Equal(t, w.Bytes()+4*w.Bytes()+4, requested(t, d), "parameter + 4 saved exp outputs + loss")
	loss.Backward()
	require.Equal(t, 2*w.Bytes()+4, requested(t, d), "parameter + gradient + loss: every saved tensor went")
	c.Close()
	require.Equal(t, 2*w.Bytes(), requested(t, d))

	// Without backward: releasing the loss frees the graph and its saved tensors.
	c = s.Child()
	loss = forward(c)
	require.Equal(t, 2*w.Bytes()+4*w.Bytes()+4, requested(t, d))
	loss.Release()
	require.Equal(t, 2*w.Bytes(), requested(t, d), "the graph died with its last output handle")
	c.Close()
	// Or by closing the scope.
	c = s.Child()
	forward(c)
	c.Close()
	require.Equal(t, 2*w.Bytes(), requested(t, d))
	w.Release()
	s.Close()
	requireEmpty(t, d)
}

func TestNoGradRecordsNothing(t *testing.T) {
	d := newCPU(t)
	s := tensor.NewScope()
	w := s.Ones(d, dtype.F32, 64).AsParameter()
	ng := s.Child(tensor.NoGrad())
	require.False(t, ng.GradEnabled())
	y := ng.Bind(w).Exp().Tanh()
	require.False(t, y.RequiresGrad())
	require.True(t, y.IsLeaf())
	before := requested(t, d)
	e := ng.Bind(w).Exp()
	e.Release()
	require.Equal(t, before, requested(t, d), "a released temporary is freed at once: nothing saved it")
	en := ng.Child(tensor.EnableGrad())
	require.True(t, en.Bind(w).Exp().RequiresGrad(), "enable_grad inside no_grad records again")
	requireOpError(t, "Backward", tensor.ErrGrad, func() { y.Sum().Backward() })
	s.Close()
	w.Release()
	requireEmpty(t, d)
}

func TestHooksRetainGradAndPostAccumulate(t *testing.T) {
	d := newCPU(t)
	s := tensor.NewScope()
	x := f32(s, d, []float32{1, 2}).SetRequiresGrad(true)
	h := x.MulScalar(3)
	h.RetainGrad()
	var seen []float32
	h.RegisterHook(func(s *tensor.Scope, g *tensor.Tensor) *tensor.Tensor {
		seen = vals(g)
		return g.MulScalar(10)
	})
	x.RegisterHook(func(s *tensor.Scope, g *tensor.Tensor) *tensor.Tensor {
		require.Equal(t, []float32{60, 60}, vals(g))
		return nil
	})
	posts := 0
	x.RegisterPostAccumulateHook(func() {
		posts++
		require.Equal(t, []float32{60, 60}, vals(x.Grad()))
	})
	h.MulScalar(2).Sum().Backward()
	require.Equal(t, []float32{2, 2}, seen)
	require.Equal(t, []float32{2, 2}, vals(h.Grad()), "RetainGrad sees the gradient before later hooks")
	require.Equal(t, 1, posts)
	requireOpError(t, "RegisterHook", tensor.ErrGrad, func() { s.Ones(d, dtype.F32, 1).RegisterHook(nil) })
	s.Close()
	requireEmpty(t, d)
}

func TestAnomalyNamesTheOpAndWhereItWasCreated(t *testing.T) {
	d := newCPU(t)
	s := tensor.NewScope(tensor.WithAnomaly(true))
	x := f32(s, d, []float32{-1, 1}).SetRequiresGrad(true)
	y := x.Sqrt().Sum() // sqrt(-1) = NaN: its gradient is NaN
	err := tensor.Try(y.Backward)
	var an *autograd.AnomalyError
	require.True(t, errors.As(err, &an), "got %v", err)
	require.Equal(t, tensor.OpSqrt, an.Node.Name())
	require.Contains(t, err.Error(), "autograd_test.go")
	site := an.Node.Site()
	require.GreaterOrEqual(t, len(site), 2)
	require.Equal(t, "tensor.(*Tensor).Sqrt", site[0].Function, "the site starts at the op the program called: %v", site)
	require.Contains(t, site[1].Function, "TestAnomalyNamesTheOpAndWhereItWasCreated", "then its caller: %v", site)
	s.Close()

	quiet := tensor.NewScope()
	x = f32(quiet, d, []float32{-1}).SetRequiresGrad(true)
	x.Sqrt().Sum().Backward()
	require.True(t, math.IsNaN(tensor.ToSlice[float64](x.Grad())[0]), "without anomaly mode the NaN flows")
	quiet.Close()
	requireEmpty(t, d)
}

func TestInPlaceChangeOfASavedTensorFailsBackward(t *testing.T) {
	d := newCPU(t)
	s := tensor.NewScope()
	x := f32(s, d, []float32{1, 2}).SetRequiresGrad(true)
	e := x.Exp()
	y := e.Sum()
	e.Detach().Fill(0) // Exp saved its output; the detached handle shares it
	err := tensor.Try(y.Backward)
	require.ErrorIs(t, err, autograd.ErrModifiedInPlace)
	requireOpError(t, "Fill", tensor.ErrGrad, func() { e.Fill(1) })
	s.Close()
	requireEmpty(t, d)
}

// offload moves saved tensors to another device and back: saved-tensor hooks.
type offload struct {
	t      *testing.T
	to     func(x *tensor.Tensor) *tensor.Tensor
	back   func(x *tensor.Tensor) *tensor.Tensor
	packed int
}

func (o *offload) Pack(v autograd.Value) (autograd.Value, error) {
	o.packed++
	x := v.(*tensor.Tensor)
	defer x.Release()
	var out *tensor.Tensor
	err := tensor.Try(func() {
		s := tensor.NewScope(tensor.NoGrad())
		defer s.Close()
		out = s.Keep(o.to(s.Bind(x)))
	})
	return out, err
}

func (o *offload) Unpack(p autograd.Value) (autograd.Value, error) {
	var out *tensor.Tensor
	err := tensor.Try(func() {
		s := tensor.NewScope(tensor.NoGrad())
		defer s.Close()
		out = s.Keep(o.back(s.Bind(p.(*tensor.Tensor))))
	})
	return out, err
}

func TestSavedTensorHooksOffloadActivations(t *testing.T) {
	gpu, host := newSim(t, 64<<20, true), newCPU(t)
	hooks := &offload{t: t}
	hooks.to = func(x *tensor.Tensor) *tensor.Tensor { return x.To(host) }
	hooks.back = func(x *tensor.Tensor) *tensor.Tensor { return x.To(gpu) }
	s := tensor.NewScope()
	x := f32(s, gpu, []float32{0.1, 0.2, 0.3}).SetRequiresGrad(true)
	c := s.Child(tensor.WithSavedHooks(hooks))
	require.Same(t, hooks, c.SavedHooks())
	y := chain(c.Bind(x), 3, func(x *tensor.Tensor) *tensor.Tensor { return x.Tanh() })
	loss := y.Sum()
	require.Equal(t, 3, hooks.packed)
	require.Equal(t, 3*x.Bytes(), requested(t, host), "the three saved tanh outputs live on the host")
	require.Equal(t, x.Bytes()+x.Bytes()+4, requested(t, gpu), "x, the last output, the loss: nothing saved on the device")
	loss.Backward()
	require.Zero(t, requested(t, host))
	want := []float64{0.1, 0.2, 0.3}
	for i, v := range want {
		a := math.Tanh(v)
		b := math.Tanh(a)
		want[i] = (1 - math.Pow(math.Tanh(b), 2)) * (1 - b*b) * (1 - a*a)
	}
	require.InDeltaSlice(t, want, tensor.ToSlice[float64](x.Grad()), 1e-6)
	s.Close()
	requireEmpty(t, gpu)
	requireEmpty(t, host)
}

// chain runs n layers f from x, releasing each layer's output once the next consumed
// it (as a Sequential does), and returns the last.
func chain(x *tensor.Tensor, n int, f func(*tensor.Tensor) *tensor.Tensor) *tensor.Tensor {
	h := x
	for range n {
		next := tensor.Layer(h, f)
		if h != x {
			h.Release()
		}
		h = next
	}
	return h
}

func TestReleasingAGradientIsSettingItToNone(t *testing.T) {
	d := newCPU(t)
	s := tensor.NewScope()
	x := f32(s, d, []float32{1, 2}).SetRequiresGrad(true)
	x.Exp().Sum().Backward()
	before := requested(t, d)
	x.Grad().Release()
	require.Nil(t, x.Grad())
	require.Equal(t, before-x.Bytes(), requested(t, d))
	x.MulScalar(3).Sum().Backward()
	require.Equal(t, []float32{3, 3}, vals(x.Grad()))
	s.Close()
	requireEmpty(t, d)
}
