package autograd_test

import (
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/autograd"
)

func TestGradientOfAExpA(t *testing.T) {
	w, tp := toy(t)
	a := tp.param(2)
	y := tp.mul(a, tp.exp(a))
	require.NoError(t, tp.backward(y, autograd.Options{}))
	assert.InDelta(t, 3*math.Exp(2), a.grad(), 1e-12)
	assert.Zero(t, w.count("grad"), "intermediate gradients left after backward")
	assert.Equal(t, 1, w.count("leafgrad"))
	assert.Zero(t, w.count("saved"), "saved values left after backward")
}

func TestDiamondAccumulates(t *testing.T) {
	_, tp := toy(t)
	a := tp.param(0.5)
	b := tp.tanh(a)
	c := tp.mul(b, b)            // two edges to the same slot of b's node
	d := tp.pow(b, 3)            // a third use of b
	y := tp.add(c, tp.add(d, a)) // a reaches the accumulator twice
	require.NoError(t, tp.backward(y, autograd.Options{}))
	tb := math.Tanh(0.5)
	want := (2*tb+3*tb*tb)*(1-tb*tb) + 1
	assert.InDelta(t, want, a.grad(), 1e-12)
}

func TestMultipleOutputsSumBeforeRun(t *testing.T) {
	_, tp := toy(t)
	a := tp.param(0.7)
	s, c := tp.sincos(a)
	y := tp.add(tp.mul(s, c), tp.pow(c, 2))
	fn := s.edge.Node
	var calls int
	require.NoError(t, fn.AddPostHook(func(*autograd.Node) error { calls++; return nil }))
	require.NoError(t, tp.backward(y, autograd.Options{}))
	// d/da [sin·cos + cos²] = cos²−sin² − 2 cos sin
	sa, ca := math.Sin(0.7), math.Cos(0.7)
	assert.InDelta(t, ca*ca-sa*sa-2*ca*sa, a.grad(), 1e-12)
	assert.Equal(t, 1, calls, "a two-output node runs once")
}

func TestOnlyOneOutputOfMultiOutputNodeUsed(t *testing.T) {
	_, tp := toy(t)
	a := tp.param(0.3)
	_, c := tp.sincos(a)
	require.NoError(t, tp.backward(tp.mul(c, c), autograd.Options{}))
	assert.InDelta(t, -2*math.Cos(0.3)*math.Sin(0.3), a.grad(), 1e-12)
}

func TestInputsWithoutGradGetNone(t *testing.T) {
	_, tp := toy(t)
	a := tp.param(3)
	k := tp.constant(5)
	y := tp.mul(a, k)
	require.False(t, y.edge.Node.Input(1).Node != nil)
	require.NoError(t, tp.backward(y, autograd.Options{}))
	assert.Equal(t, 5.0, a.grad())
}

func TestGradientsAccumulateAcrossBackwards(t *testing.T) {
	_, tp := toy(t)
	x := tp.param(2)
	for range 2 {
		require.NoError(t, tp.backward(tp.mul(x, x), autograd.Options{}))
	}
	assert.Equal(t, 8.0, x.grad(), "x·x twice: 4 then 8")
}

func TestBackwardFromLeaf(t *testing.T) {
	_, tp := toy(t)
	x := tp.param(2)
	require.NoError(t, tp.backward(x, autograd.Options{}))
	assert.Equal(t, 1.0, x.grad())
}

func TestSeveralRoots(t *testing.T) {
	w, tp := toy(t)
	a := tp.param(1.5)
	b := tp.exp(a)
	c := tp.mul(b, a)
	roots := []autograd.Root{
		{Edge: c.edge, Grad: w.newVal("grad", "seed", 2)},
		{Edge: b.edge, Grad: w.newVal("grad", "seed", 1)}, // b also feeds c
		{Edge: c.edge, Grad: w.newVal("grad", "seed", 1)}, // same root twice: seeds sum
	}
	require.NoError(t, autograd.Backward(roots, autograd.Options{Arith: arith{}}))
	e := math.Exp(1.5)
	assert.InDelta(t, 3*(e*1.5+e)+e, a.grad(), 1e-12)
}

func TestBackwardEntryErrors(t *testing.T) {
	w, tp := toy(t)
	a := tp.param(1)
	y := tp.exp(a)
	seed := func() autograd.Value { return w.newVal("grad", "seed", 1) }
	cases := []struct {
		name string
		root autograd.Root
		opts autograd.Options
		msg  string
	}{
		{"no node", autograd.Root{Grad: seed()}, autograd.Options{Arith: arith{}}, "does not require grad"},
		{"nil grad", autograd.Root{Edge: y.edge}, autograd.Options{Arith: arith{}}, "nil gradient"},
		{"bad slot", autograd.Root{Edge: autograd.Edge{Node: y.edge.Node, Slot: 1}, Grad: seed()}, autograd.Options{Arith: arith{}}, "slot 1"},
		{"no arith", autograd.Root{Edge: y.edge, Grad: seed()}, autograd.Options{}, "Arith"},
	}
	for _, c := range cases {
		err := autograd.Backward([]autograd.Root{c.root}, c.opts)
		require.ErrorContains(t, err, c.msg, c.name)
	}
	require.ErrorContains(t, autograd.Backward(nil, autograd.Options{Arith: arith{}}), "no roots")
	assert.Zero(t, w.count("grad"), "seeds are released on error")
	assert.False(t, y.edge.Node.Released(), "a failed entry check consumes nothing")
	require.NoError(t, tp.backward(y, autograd.Options{}))
	assert.InDelta(t, math.E, a.grad(), 1e-12)
}

func TestNewNodeErrors(t *testing.T) {
	w, tp := toy(t)
	a := tp.param(1)
	fn := &toyFn{w: w}
	cases := []struct {
		spec autograd.NodeSpec
		msg  string
	}{
		{autograd.NodeSpec{Fn: fn, Outputs: 1}, "empty name"},
		{autograd.NodeSpec{Name: "X", Outputs: 1}, "nil Fn"},
		{autograd.NodeSpec{Name: "X", Fn: fn}, "0 outputs"},
		{autograd.NodeSpec{Name: "X", Fn: fn, Outputs: 1, Kind: 7}, "unknown kind"},
		{autograd.NodeSpec{Name: "X", Fn: fn, Outputs: 2, Kind: autograd.KindAccumulate}, "accumulate node"},
		{autograd.NodeSpec{Name: "X", Fn: fn, Outputs: 1, Inputs: []autograd.Edge{{Node: a.edge.Node, Slot: 1}}}, "slot 1"},
	}
	for _, c := range cases {
		_, err := autograd.NewNode(c.spec)
		require.ErrorContains(t, err, c.msg)
	}
	assert.Equal(t, 1, a.edge.Node.Refs(), "failed NewNode holds no reference")
}

// badFn returns n fresh gradients and err.
type badFn struct {
	w   *world
	n   int
	err error
}

func (f *badFn) Backward(*autograd.Ctx, []autograd.Value) ([]autograd.Value, error) {
	outs := make([]autograd.Value, f.n)
	for i := range outs {
		outs[i] = f.w.newVal("grad", "bad", 1)
	}
	return outs, f.err
}

func TestFunctionErrorsReleaseEverything(t *testing.T) {
	w, tp := toy(t)
	a := tp.param(1)
	for _, f := range []*badFn{{w: w, n: 1, err: errBoom}, {w: w, n: 2}} {
		n, err := autograd.NewNode(autograd.NodeSpec{Name: "Bad", Outputs: 1, Fn: f, Inputs: []autograd.Edge{a.edge}})
		require.NoError(t, err)
		s, err := n.Save(w.newVal("saved", "bad", 1), nil)
		require.NoError(t, err)
		err = autograd.Backward([]autograd.Root{{Edge: autograd.Edge{Node: n}, Grad: w.newVal("grad", "seed", 1)}}, autograd.Options{Arith: arith{}})
		require.ErrorContains(t, err, "backward of Bad#0")
		assert.Zero(t, w.count("grad"))
		assert.False(t, s.Released(), "a failed node keeps its saved values")
		require.NoError(t, n.Release())
		assert.True(t, s.Released())
	}
	assert.Zero(t, a.grad())
}

var errBoom = errors.New("boom")

// brokenArith fails Add (releasing both operands, as Add owns them) or
// HasNonFinite.
type brokenArith struct{ add, check bool }

func (b brokenArith) Add(x, y autograd.Value) (autograd.Value, error) {
	if b.add {
		x.Release()
		y.Release()
		return nil, errBoom
	}
	return arith{}.Add(x, y)
}

func (b brokenArith) HasNonFinite(v autograd.Value) (bool, error) {
	if b.check {
		return false, errBoom
	}
	return arith{}.HasNonFinite(v)
}

func TestArithErrorsAbortAndRelease(t *testing.T) {
	for _, c := range []struct {
		arith brokenArith
		msg   string
	}{
		{brokenArith{add: true}, "summing the gradients of output 0 of Tanh#2"},
		{brokenArith{check: true}, "checking gradient 0 for NaN/Inf"},
	} {
		w, tp := toy(t)
		a := tp.param(0.5)
		h := tp.tanh(a)
		y := tp.mul(h, h)
		err := autograd.Backward([]autograd.Root{{Edge: y.edge, Grad: w.newVal("grad", "seed", 1)}},
			autograd.Options{Arith: c.arith, DetectAnomaly: true})
		require.ErrorIs(t, err, errBoom)
		assert.ErrorContains(t, err, c.msg)
		assert.Zero(t, w.count("grad"))
		assert.Zero(t, a.grad())
	}
}

func TestNodeAccessors(t *testing.T) {
	w, tp := toy(t)
	a := tp.param(1)
	site := autograd.CaptureSite(0)
	n, err := autograd.NewNode(autograd.NodeSpec{Name: "Pair", Seq: 42, Outputs: 2, Fn: &toyFn{w: w},
		Inputs: []autograd.Edge{{}, a.edge}, Site: site})
	require.NoError(t, err)
	assert.Equal(t, "Pair", n.Name())
	assert.Equal(t, "Pair#42", n.String())
	assert.Equal(t, uint64(42), n.Seq())
	assert.Equal(t, autograd.KindOp, n.Kind())
	assert.Equal(t, "op", n.Kind().String())
	assert.Equal(t, "accumulate", a.edge.Node.Kind().String())
	assert.Equal(t, "Kind(9)", autograd.Kind(9).String())
	assert.Equal(t, site, n.Site())
	assert.Equal(t, 2, n.NumInputs())
	assert.Equal(t, autograd.Edge{}, n.Input(0))
	assert.Equal(t, a.edge, n.Input(1))
	assert.Equal(t, 2, n.NumOutputs())
	assert.Equal(t, 2, a.edge.Node.Refs(), "the leaf's handle and Pair's edge")
	require.NoError(t, n.Release())
	assert.Equal(t, 1, a.edge.Node.Refs())
	var c autograd.Clock
	assert.Equal(t, []uint64{1, 2, 3}, []uint64{c.Next(), c.Next(), c.Next()})
}

// stopFn returns no gradient at all (a detach-like op).
type stopFn struct{}

func (stopFn) Backward(*autograd.Ctx, []autograd.Value) ([]autograd.Value, error) {
	return []autograd.Value{nil}, nil
}

func TestNodeReachedByNoGradientIsConsumedNotRun(t *testing.T) {
	w, tp := toy(t)
	a := tp.param(1)
	h := tp.exp(a)
	n, err := autograd.NewNode(autograd.NodeSpec{Name: "Stop", Outputs: 1, Fn: stopFn{}, Inputs: []autograd.Edge{h.edge}})
	require.NoError(t, err)
	defer func() { require.NoError(t, n.Release()) }()
	posts := 0
	for _, m := range []*autograd.Node{h.edge.Node, a.edge.Node} {
		require.NoError(t, m.AddPostHook(func(*autograd.Node) error { posts++; return nil }))
	}
	var ran []string
	require.NoError(t, runNode(tp, n, autograd.Options{AfterNode: func(m *autograd.Node) { ran = append(ran, m.String()) }}))
	assert.Equal(t, []string{"Stop#0", "Exp#2", "AccumulateGrad#1"}, ran)
	assert.Zero(t, posts, "neither Exp's nor the leaf's hooks ran")
	assert.True(t, h.edge.Node.Released())
	assert.Zero(t, w.count("saved"))
	assert.Zero(t, w.count("leafgrad"), "the leaf got no gradient")
}

// A node that fails while another branch's gradient waits in the engine: the waiting
// gradient is released too.
func TestFailureReleasesGradientsWaitingForOtherNodes(t *testing.T) {
	w, tp := toy(t)
	a := tp.param(1)
	b := tp.exp(a) // waits for its gradient while Bad runs first (higher sequence number)
	bad, err := autograd.NewNode(autograd.NodeSpec{Name: "Bad", Seq: 100, Outputs: 1,
		Fn: &badFn{w: w, n: 1, err: errBoom}, Inputs: []autograd.Edge{a.edge}})
	require.NoError(t, err)
	y := tp.add(b, &scalar{edge: autograd.Edge{Node: bad}})
	err = tp.backward(y, autograd.Options{})
	require.ErrorContains(t, err, "backward of Bad")
	assert.Zero(t, w.count("grad"), "Exp's buffered gradient is released")
	require.NoError(t, bad.Release())
}

// taker is a leaf's accumulator that takes the gradient it is given.
type taker struct{ got autograd.Value }

func (k *taker) Backward(_ *autograd.Ctx, grads []autograd.Value) ([]autograd.Value, error) {
	k.got, grads[0] = grads[0], nil
	return nil, nil
}

// A Function that takes a gradient (its entry set to nil) owns it: the engine does
// not release it.
func TestFunctionTakesItsGradient(t *testing.T) {
	w := newWorld()
	k := &taker{}
	leaf, err := autograd.NewNode(autograd.NodeSpec{Name: "AccumulateGrad", Kind: autograd.KindAccumulate, Outputs: 1, Fn: k})
	require.NoError(t, err)
	roots := []autograd.Root{{Edge: autograd.Edge{Node: leaf}, Grad: w.newVal("grad", "seed", 1)}}
	require.NoError(t, autograd.Backward(roots, autograd.Options{Arith: freeArith{}}))
	require.Equal(t, 1, w.count("grad"), "the taken gradient is alive")
	k.got.Release()
	require.NoError(t, leaf.Release())
	w.requireEmpty(t)
}
