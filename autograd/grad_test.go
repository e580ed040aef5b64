package autograd_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/autograd"
)

// grad runs autograd.Grad of loss (seeded with 1) for the edges of ins.
func (tp *tape) grad(loss *scalar, opts autograd.Options, ins ...*scalar) ([]float64, error) {
	opts.Arith = arith{}
	edges := make([]autograd.Edge, len(ins))
	for i, s := range ins {
		edges[i] = s.edge
	}
	vs, err := autograd.Grad([]autograd.Root{{Edge: loss.edge, Grad: tp.w.newVal("grad", "seed", 1)}}, edges, opts)
	if err != nil {
		return nil, err
	}
	out := make([]float64, len(vs))
	for i, v := range vs {
		out[i] = math.NaN()
		if v != nil {
			out[i] = v.(*val).x
			v.Release()
		}
	}
	return out, nil
}

// Grad returns d(a·e^a)/da = (1+a)·e^a and leaves the leaf's gradient alone; the
// graph is consumed unless retained.
func TestGradReturnsWithoutAccumulating(t *testing.T) {
	w, tp := toy(t)
	a := tp.param(2)
	y := tp.mul(a, tp.exp(a))
	g, err := tp.grad(y, autograd.Options{RetainGraph: true}, a)
	require.NoError(t, err)
	require.InDelta(t, 3*math.Exp(2), g[0], 1e-12)
	require.Zero(t, a.grad())
	require.Zero(t, w.count("leafgrad"), "no accumulation")
	require.Zero(t, w.count("grad"), "the engine kept no gradient")
	g, err = tp.grad(y, autograd.Options{}, a)
	require.NoError(t, err)
	require.InDelta(t, 3*math.Exp(2), g[0], 1e-12, "the retained graph runs again")
	require.Zero(t, w.count("saved"), "the second Grad consumed the graph")
	_, err = tp.grad(y, autograd.Options{}, a)
	require.ErrorIs(t, err, autograd.ErrBackwardTwice)
}

// The gradient of a non-leaf is taken at its node's output, which does not run:
// what lies upstream keeps its saved values and can still be backpropagated.
func TestGradOfANonLeafStopsThere(t *testing.T) {
	w, tp := toy(t)
	a := tp.param(0.5)
	b := tp.tanh(a)
	y := tp.mul(b, b)
	g, err := tp.grad(y, autograd.Options{}, b)
	require.NoError(t, err)
	tb := math.Tanh(0.5)
	require.InDelta(t, 2*tb, g[0], 1e-12)
	require.Equal(t, 1, w.count("saved"), "Tanh did not run: its output is still saved")
	require.Zero(t, a.grad())
	g, err = tp.grad(b, autograd.Options{}, a)
	require.NoError(t, err)
	require.InDelta(t, 1-tb*tb, g[0], 1e-12, "the untouched Tanh runs in a later Grad")
}

// With inputs at two depths the nearer one is captured and the gradient flows on to
// the farther one; an input the loss does not reach gets nothing.
func TestGradOfSeveralInputs(t *testing.T) {
	_, tp := toy(t)
	a, c := tp.param(0.5), tp.param(3)
	b := tp.tanh(a)
	y := tp.mul(b, b)
	g, err := tp.grad(y, autograd.Options{}, b, a, c)
	require.NoError(t, err)
	tb := math.Tanh(0.5)
	require.InDelta(t, 2*tb, g[0], 1e-12)
	require.InDelta(t, 2*tb*(1-tb*tb), g[1], 1e-12)
	require.True(t, math.IsNaN(g[2]), "c is not used: nil")
}

func TestGradErrors(t *testing.T) {
	w, tp := toy(t)
	a := tp.param(1)
	y := tp.exp(a)
	_, err := tp.grad(y, autograd.Options{}, a, a)
	require.ErrorContains(t, err, "same edge")
	_, err = tp.grad(y, autograd.Options{}, tp.constant(2))
	require.ErrorContains(t, err, "does not require grad")
	_, err = tp.grad(y, autograd.Options{})
	require.ErrorContains(t, err, "no inputs")
	require.Zero(t, w.count("grad"), "the seeds of failed calls were released")
	require.Equal(t, 1, w.count("saved"), "nothing ran")
}

// Backward restricted to inputs accumulates into those leaves only, and runs only
// what leads to them.
func TestBackwardRestrictedToInputs(t *testing.T) {
	w, tp := toy(t)
	a, c := tp.param(2), tp.param(3)
	ec := tp.exp(c)
	y := tp.mul(a, ec)
	require.NoError(t, tp.backward(y, autograd.Options{Inputs: []autograd.Edge{a.edge}, RetainGraph: true}))
	require.InDelta(t, math.Exp(3), a.grad(), 1e-12)
	require.Zero(t, c.grad(), "c is not an input")
	require.NoError(t, tp.backward(y, autograd.Options{Inputs: []autograd.Edge{c.edge}}))
	require.InDelta(t, 2*math.Exp(3), c.grad(), 1e-12)
	require.InDelta(t, math.Exp(3), a.grad(), 1e-12, "a accumulated once")
	require.Zero(t, w.count("saved"))
}
