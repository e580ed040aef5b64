package autograd_test

import (
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/autograd"
)

func TestRetainGraphThenBackwardTwiceError(t *testing.T) {
	w, tp := toy(t)
	a := tp.param(2)
	y := tp.mul(a, tp.exp(a))
	for range 2 {
		require.NoError(t, tp.backward(y, autograd.Options{RetainGraph: true}))
		assert.Equal(t, 3, w.count("saved"), "retained: Mul keeps 2, Exp keeps 1")
	}
	require.NoError(t, tp.backward(y, autograd.Options{}))
	assert.Zero(t, w.count("saved"))
	assert.InDelta(t, 3*3*math.Exp(2), a.grad(), 1e-11)

	err := tp.backward(y, autograd.Options{})
	require.ErrorIs(t, err, autograd.ErrBackwardTwice)
	assert.ErrorContains(t, err, "node Mul#3")
	assert.ErrorContains(t, err, "Specify RetainGraph=true")
	assert.InDelta(t, 3*3*math.Exp(2), a.grad(), 1e-11, "a failed backward accumulates nothing")
	assert.Zero(t, w.count("grad"), "the seed of a failed backward is released")
}

func TestBackwardReachingConsumedPrefixFailsBeforeRunning(t *testing.T) {
	w, tp := toy(t)
	a := tp.param(0.5)
	h := tp.tanh(a)
	require.NoError(t, tp.backward(tp.exp(h), autograd.Options{}))
	y := tp.mul(h, h) // new node on top of a consumed one
	err := tp.backward(y, autograd.Options{})
	require.ErrorIs(t, err, autograd.ErrBackwardTwice)
	assert.ErrorContains(t, err, "Tanh#2")
	assert.False(t, y.edge.Node.Released(), "nothing ran: Mul keeps its saved values")
	assert.Equal(t, 2, w.count("saved"))
}

// diamond builds y = tanh(x)² + exp(x)² and returns the leaf and y.
func diamond(tp *tape) (x, y *scalar) {
	x = tp.param(0.25)
	b1 := tp.tanh(x)                           // Tanh#2
	b2 := tp.exp(x)                            // Exp#3
	y = tp.add(tp.mul(b1, b1), tp.mul(b2, b2)) // Mul#4, Mul#5, Add#6
	return x, y
}

func TestReleaseOrderIsDeterministic(t *testing.T) {
	want := []string{"Mul#5.0", "Mul#5.1", "Mul#4.0", "Mul#4.1", "Exp#3.0", "Tanh#2.0"}
	for range 3 {
		w, tp := toy(t)
		_, y := diamond(tp)
		require.NoError(t, tp.backward(y, autograd.Options{}))
		assert.Equal(t, want, w.releasedLog())
	}
}

func TestSavedReleasedRightAfterTheirNode(t *testing.T) {
	for _, retain := range []bool{false, true} {
		w, tp := toy(t)
		x := tp.param(0.3)
		h := x
		saves := map[string]int{}
		for i := range 6 {
			if i%2 == 0 {
				h = tp.mul(h, h)
			} else {
				h = tp.tanh(h)
			}
			saves[h.edge.Node.String()] = 2 - i%2
		}
		left := 9
		var order []string
		opts := autograd.Options{RetainGraph: retain, AfterNode: func(n *autograd.Node) {
			order = append(order, n.String())
			if n.Kind() == autograd.KindAccumulate {
				assert.Zero(t, w.count("grad"), "no gradient left once the leaf has it")
				return
			}
			if !retain {
				left -= saves[n.String()]
			}
			assert.Equal(t, left, w.count("saved"), "after %s", n)
			assert.Equal(t, !retain, n.Released())
			assert.Equal(t, 1, w.count("grad"), "one gradient in flight after %s", n)
		}}
		require.NoError(t, tp.backward(h, opts))
		assert.Equal(t, []string{"Tanh#7", "Mul#6", "Tanh#5", "Mul#4", "Tanh#3", "Mul#2", "AccumulateGrad#1"}, order)
	}
}

func TestGraphReleaseWithoutBackwardSharedPrefix(t *testing.T) {
	w, tp := toy(t)
	a := tp.param(0.4)
	e := tp.exp(a)
	h := tp.tanh(e)
	l1 := tp.mul(h, h)
	l2 := tp.pow(h, 3)
	prefix := []*autograd.Node{e.edge.Node, h.edge.Node}
	e.release(t)
	h.release(t)
	assert.Equal(t, 5, w.count("saved"))

	l1.release(t)
	assert.Equal(t, 3, w.count("saved"), "Mul's two released; the prefix is still Pow's")
	assert.True(t, l1.edge.Node.Freed())
	for _, n := range prefix {
		assert.False(t, n.Freed())
	}

	l2.release(t)
	assert.Zero(t, w.count("saved"))
	for _, n := range prefix {
		assert.True(t, n.Freed(), "%s", n)
	}
	assert.Equal(t, 1, a.edge.Node.Refs(), "the leaf keeps its accumulator")
	assert.Equal(t, []string{"Mul#4.0", "Mul#4.1", "Pow#5.0", "Tanh#3.0", "Exp#2.0"}, w.releasedLog())
}

func TestRetainedGraphFreedByItsHandles(t *testing.T) {
	w, tp := toy(t)
	a := tp.param(1.1)
	h := tp.tanh(a)
	y := tp.mul(h, h)
	require.NoError(t, tp.backward(y, autograd.Options{RetainGraph: true}))
	assert.Equal(t, 3, w.count("saved"))
	y.release(t)
	assert.Equal(t, 1, w.count("saved"), "Tanh is still held by h's handle")
	h.release(t)
	assert.Zero(t, w.count("saved"))
}

func TestBackwardHoldsTheGraphWhileHandlesGo(t *testing.T) {
	w, tp := toy(t)
	a := tp.param(0.8)
	h := tp.exp(a)
	y := tp.mul(h, a)
	once := false
	opts := autograd.Options{RetainGraph: true, AfterNode: func(n *autograd.Node) {
		if !once {
			once = true
			y.release(t) // the user drops the loss mid-backward
			h.release(t)
			assert.Equal(t, 3, w.count("saved"), "the engine's reference keeps the graph")
		}
	}}
	require.NoError(t, tp.backward(y, opts))
	assert.Zero(t, w.count("saved"), "freed when the engine let go")
	assert.InDelta(t, math.Exp(0.8)*1.8, a.grad(), 1e-12)
}

func TestUseAfterFree(t *testing.T) {
	w, tp := toy(t)
	a := tp.param(1)
	y := tp.exp(a)
	n := y.edge.Node
	y.release(t)
	require.True(t, n.Freed())
	for name, err := range map[string]error{
		"Release":     n.Release(),
		"Retain":      n.Retain(),
		"AddGradHook": n.AddGradHook(0, func(autograd.Value) (autograd.Value, error) { return nil, nil }),
		"AddPostHook": n.AddPostHook(func(*autograd.Node) error { return nil }),
		"Backward": autograd.Backward([]autograd.Root{{Edge: autograd.Edge{Node: n}, Grad: w.newVal("grad", "seed", 1)}},
			autograd.Options{Arith: arith{}}),
	} {
		require.ErrorIs(t, err, autograd.ErrFreed, name)
		assert.ErrorContains(t, err, "Exp#2", name)
	}
	_, err := n.Save(w.newVal("saved", "late", 1), nil)
	require.ErrorIs(t, err, autograd.ErrFreed)
	_, err = autograd.NewNode(autograd.NodeSpec{Name: "Late", Outputs: 1, Fn: &toyFn{w: w}, Inputs: []autograd.Edge{{Node: a.edge.Node}, {Node: n}}})
	require.ErrorIs(t, err, autograd.ErrFreed)
	assert.Equal(t, 1, a.edge.Node.Refs(), "the failed NewNode gave back its reference on input 0")
}

func TestSaveOnConsumedOrAccumulateNode(t *testing.T) {
	w, tp := toy(t)
	a := tp.param(1)
	y := tp.exp(a)
	require.NoError(t, tp.backward(y, autograd.Options{}))
	_, err := y.edge.Node.Save(w.newVal("saved", "late", 1), nil)
	require.True(t, errors.Is(err, autograd.ErrBackwardTwice))
	_, err = a.edge.Node.Save(w.newVal("saved", "leaf", 1), nil)
	require.ErrorContains(t, err, "accumulate node saves nothing")
	_, err = a.edge.Node.Save(nil, nil)
	require.ErrorContains(t, err, "nil value")
}

func TestNodeThatSavedNothingRunsAgain(t *testing.T) {
	w, tp := toy(t)
	a := tp.param(1.5)
	y := tp.add(a, a) // Add saves nothing
	for range 2 {
		require.NoError(t, tp.backward(y, autograd.Options{}))
	}
	assert.False(t, y.edge.Node.Released(), "as in PyTorch, a node with nothing saved is not consumed")
	assert.InDelta(t, 4, a.grad(), 1e-12)

	z := tp.mul(y, y) // Mul saves both operands: consumed by its first backward
	require.NoError(t, tp.backward(z, autograd.Options{}))
	require.ErrorIs(t, tp.backward(z, autograd.Options{}), autograd.ErrBackwardTwice)
	assert.Zero(t, w.count("saved"))
}
