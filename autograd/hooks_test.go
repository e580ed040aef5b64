package autograd_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/autograd"
)

func TestGradHookReplacesGradient(t *testing.T) {
	w, tp := toy(t)
	a := tp.param(0.5)
	h := tp.tanh(a)
	y := tp.mul(h, h)
	var seen []float64
	require.NoError(t, h.edge.Node.AddGradHook(0, func(g autograd.Value) (autograd.Value, error) {
		seen = append(seen, g.(*val).x)
		return w.newVal("grad", "doubled", 2*g.(*val).x), nil
	}))
	require.NoError(t, h.edge.Node.AddGradHook(0, func(g autograd.Value) (autograd.Value, error) {
		seen = append(seen, g.(*val).x)
		return nil, nil // keep
	}))
	require.NoError(t, tp.backward(y, autograd.Options{}))
	th := math.Tanh(0.5)
	assert.InDeltaSlice(t, []float64{2 * th, 4 * th}, seen, 1e-12, "the sum of both uses, then the replacement")
	assert.InDelta(t, 4*th*(1-th*th), a.grad(), 1e-12)
}

func TestGradHookKeepsACopy(t *testing.T) {
	w, tp := toy(t)
	a := tp.param(0.5)
	h := tp.exp(a)
	y := tp.mul(h, a)
	var kept *val
	require.NoError(t, h.edge.Node.AddGradHook(0, func(g autograd.Value) (autograd.Value, error) {
		kept = w.newVal("kept", "h.grad", g.(*val).x) // retain_grad takes its own reference
		return nil, nil
	}))
	require.NoError(t, tp.backward(y, autograd.Options{}))
	assert.Equal(t, 1, w.count("kept"), "after backward: the leaf's grad and what the caller kept")
	assert.Equal(t, 1, w.count("leafgrad"))
	assert.Zero(t, w.count("grad"))
	assert.Equal(t, 0.5, kept.x)
	kept.Release()
}

func TestLeafHookSeesSummedGradientAndPostHookSeesAccumulated(t *testing.T) {
	_, tp := toy(t)
	x, y := diamond(tp)
	var pre, post []float64
	require.NoError(t, x.edge.Node.AddGradHook(0, func(g autograd.Value) (autograd.Value, error) {
		pre = append(pre, g.(*val).x)
		return nil, nil
	}))
	require.NoError(t, x.edge.Node.AddPostHook(func(n *autograd.Node) error {
		assert.Equal(t, autograd.KindAccumulate, n.Kind())
		post = append(post, x.grad())
		return nil
	}))
	require.NoError(t, tp.backward(y, autograd.Options{RetainGraph: true}))
	require.NoError(t, tp.backward(y, autograd.Options{}))
	th, e := math.Tanh(0.25), math.Exp(0.25)
	g := 2*th*(1-th*th) + 2*e*e
	assert.InDeltaSlice(t, []float64{g, g}, pre, 1e-12, "once per backward, both branches summed")
	assert.InDeltaSlice(t, []float64{g, 2 * g}, post, 1e-12)
}

func TestHookErrorsAbortAndRelease(t *testing.T) {
	for _, where := range []string{"grad", "post"} {
		w, tp := toy(t)
		a := tp.param(0.5)
		h := tp.exp(a)
		y := tp.mul(h, h)
		if where == "grad" {
			require.NoError(t, h.edge.Node.AddGradHook(0, func(autograd.Value) (autograd.Value, error) { return nil, errBoom }))
		} else {
			require.NoError(t, h.edge.Node.AddPostHook(func(*autograd.Node) error { return errBoom }))
		}
		err := tp.backward(y, autograd.Options{})
		require.ErrorIs(t, err, errBoom, where)
		assert.ErrorContains(t, err, "backward of Exp#2", where)
		assert.Zero(t, w.count("grad"), where)
		assert.Zero(t, a.grad(), where)
		assert.Equal(t, 1, w.count("saved"), "%s: Exp did not finish and keeps its value", where)
	}
}

func TestAddGradHookBadSlot(t *testing.T) {
	_, tp := toy(t)
	y := tp.exp(tp.param(1))
	require.ErrorContains(t, y.edge.Node.AddGradHook(1, nil), "slot 1, node has 1 outputs")
}
