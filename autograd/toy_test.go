package autograd_test

// A micrograd-style scalar "tensor package" that drives the engine the way
// the real tensor package will: each op records a node with a toyFn beside
// its forward, saves values through Node.Save, and each handle holds one
// node reference.

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/autograd"
)

// world counts the toy values alive, by kind, and logs saved releases.
type world struct {
	mu       sync.Mutex
	live     map[string]int // kind -> values alive
	released []string       // labels of released "saved" values, in order
	doubles  int            // values released twice (must stay 0)
}

func newWorld() *world { return &world{live: map[string]int{}} }

// val is a toy value: a gradient, a saved scalar, a host copy...
type val struct {
	w        *world
	kind     string
	label    string
	x        float64
	released bool // guarded by w.mu
}

func (w *world) newVal(kind, label string, x float64) *val {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.live[kind]++
	return &val{w: w, kind: kind, label: label, x: x}
}

// base returns the val itself (also when embedded).
func (v *val) base() *val { return v }

func (v *val) Release() {
	v.w.mu.Lock()
	defer v.w.mu.Unlock()
	if v.released {
		v.w.doubles++
		return
	}
	v.released = true
	v.w.live[v.kind]--
	if v.kind == "saved" {
		v.w.released = append(v.w.released, v.label)
	}
}

func (w *world) count(kind string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.live[kind]
}

func (w *world) releasedLog() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.released...)
}

// requireEmpty asserts that every toy value was released exactly once.
func (w *world) requireEmpty(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	for kind, n := range w.live {
		require.Zero(t, n, "live %s values", kind)
	}
	require.Zero(t, w.doubles, "values released twice")
}

// arith sums toy gradients in place, like the tensor package reusing a's
// buffer.
type arith struct{}

func (arith) Add(a, b autograd.Value) (autograd.Value, error) {
	a.(*val).x += b.(*val).x
	b.Release()
	return a, nil
}

func (arith) HasNonFinite(v autograd.Value) (bool, error) {
	x := v.(*val).x
	return math.IsNaN(x) || math.IsInf(x, 0), nil
}

// tape is the toy scope: it owns every handle created in it, carries the
// clock, the saved hooks in effect and whether sites are recorded.
type tape struct {
	t       testing.TB
	w       *world
	clock   autograd.Clock
	hooks   autograd.SavedHooks
	sites   bool
	handles []*scalar
}

func newTape(t testing.TB, w *world) *tape { return &tape{t: t, w: w} }

// toy returns a world and a tape whose handles are released when the test
// ends, after which every toy value must have been released exactly once.
func toy(t *testing.T) (*world, *tape) {
	w := newWorld()
	tp := newTape(t, w)
	t.Cleanup(func() {
		tp.close()
		w.requireEmpty(t)
	})
	return w, tp
}

// scalar is a toy tensor handle.
type scalar struct {
	x        float64
	edge     autograd.Edge // zero for values that do not require grad
	leaf     *leaf         // set on leaves that require grad
	released bool
}

// leaf is the accumulate node's Function: it folds gradients into grad.
type leaf struct {
	w    *world
	mu   sync.Mutex // leaves may be shared by concurrent backwards
	grad *val       // guarded by mu; kind "leafgrad"
}

func (l *leaf) Backward(_ *autograd.Ctx, grads []autograd.Value) ([]autograd.Value, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	g := grads[0].(*val)
	if l.grad == nil {
		l.grad = l.w.newVal("leafgrad", "grad", g.x)
	} else {
		l.grad.x += g.x
	}
	return nil, nil
}

func (l *leaf) value() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.grad == nil {
		return 0
	}
	return l.grad.x
}

// param creates a leaf that requires grad.
func (tp *tape) param(x float64) *scalar {
	l := &leaf{w: tp.w}
	n, err := autograd.NewNode(autograd.NodeSpec{Name: "AccumulateGrad", Kind: autograd.KindAccumulate, Seq: tp.clock.Next(), Outputs: 1, Fn: l})
	require.NoError(tp.t, err)
	return tp.keep(&scalar{x: x, edge: autograd.Edge{Node: n}, leaf: l})
}

// constant creates a value that does not require grad.
func (tp *tape) constant(x float64) *scalar { return tp.keep(&scalar{x: x}) }

func (tp *tape) keep(s *scalar) *scalar {
	tp.handles = append(tp.handles, s)
	return s
}

// grad returns the leaf's accumulated gradient.
func (s *scalar) grad() float64 { return s.leaf.value() }

// release drops the handle's node reference (a tensor handle's Release).
func (s *scalar) release(t testing.TB) {
	if s.released {
		return
	}
	s.released = true
	if s.leaf != nil {
		s.leaf.mu.Lock()
		if s.leaf.grad != nil {
			s.leaf.grad.Release()
			s.leaf.grad = nil
		}
		s.leaf.mu.Unlock()
	}
	if s.edge.Node != nil {
		require.NoError(t, s.edge.Node.Release())
	}
}

// close releases every handle of the tape, like closing a scope.
func (tp *tape) close() {
	for _, s := range tp.handles {
		s.release(tp.t)
	}
	tp.handles = nil
}

// rule maps the saved values and the gradients of the outputs (0 where none
// arrived) to the gradients of the inputs.
type rule func(saved, gout []float64) []float64

// toyFn is the Function of every toy op.
type toyFn struct {
	w     *world
	saved []*autograd.Saved
	rule  rule
	calls atomic.Int32 // concurrent backwards may share a retained node
}

func (f *toyFn) Backward(c *autograd.Ctx, grads []autograd.Value) ([]autograd.Value, error) {
	f.calls.Add(1)
	sv := make([]float64, len(f.saved))
	for i, s := range f.saved {
		v, err := s.Get(c)
		if err != nil {
			return nil, err
		}
		sv[i] = v.(*val).x
	}
	gout := make([]float64, len(grads))
	for i, g := range grads {
		if g != nil {
			gout[i] = g.(*val).x
		}
	}
	gin := f.rule(sv, gout)
	outs := make([]autograd.Value, len(gin))
	for i, x := range gin {
		if c.NeedsGrad(i) {
			outs[i] = f.w.newVal("grad", c.Node().String(), x)
		}
	}
	return outs, nil
}

// op records a toy op: outputs outs computed from ins, saving save for r.
// Without an input that requires grad it records nothing (no_grad-like).
func (tp *tape) op(name string, ins []*scalar, outs, save []float64, r rule) []*scalar {
	res := make([]*scalar, len(outs))
	edges := make([]autograd.Edge, len(ins))
	needs := false
	for i, in := range ins {
		edges[i] = in.edge
		needs = needs || in.edge.Node != nil
	}
	if !needs {
		for i, x := range outs {
			res[i] = tp.constant(x)
		}
		return res
	}
	fn := &toyFn{w: tp.w, rule: r}
	spec := autograd.NodeSpec{Name: name, Seq: tp.clock.Next(), Inputs: edges, Outputs: len(outs), Fn: fn}
	if tp.sites {
		spec.Site = autograd.CaptureSite(2)
	}
	n, err := autograd.NewNode(spec)
	require.NoError(tp.t, err)
	for i, x := range save {
		s, err := n.Save(tp.w.newVal("saved", fmt.Sprintf("%s.%d", n, i), x), tp.hooks)
		require.NoError(tp.t, err)
		fn.saved = append(fn.saved, s)
	}
	for i, x := range outs {
		if i > 0 {
			require.NoError(tp.t, n.Retain())
		}
		res[i] = tp.keep(&scalar{x: x, edge: autograd.Edge{Node: n, Slot: i}})
	}
	return res
}

func (tp *tape) add(a, b *scalar) *scalar {
	return tp.op("Add", []*scalar{a, b}, []float64{a.x + b.x}, nil,
		func(_, g []float64) []float64 { return []float64{g[0], g[0]} })[0]
}

func (tp *tape) mul(a, b *scalar) *scalar {
	return tp.op("Mul", []*scalar{a, b}, []float64{a.x * b.x}, []float64{a.x, b.x},
		func(s, g []float64) []float64 { return []float64{g[0] * s[1], g[0] * s[0]} })[0]
}

func (tp *tape) exp(a *scalar) *scalar {
	y := math.Exp(a.x)
	return tp.op("Exp", []*scalar{a}, []float64{y}, []float64{y},
		func(s, g []float64) []float64 { return []float64{g[0] * s[0]} })[0]
}

func (tp *tape) tanh(a *scalar) *scalar {
	y := math.Tanh(a.x)
	return tp.op("Tanh", []*scalar{a}, []float64{y}, []float64{y},
		func(s, g []float64) []float64 { return []float64{g[0] * (1 - s[0]*s[0])} })[0]
}

func (tp *tape) pow(a *scalar, k float64) *scalar {
	return tp.op("Pow", []*scalar{a}, []float64{math.Pow(a.x, k)}, []float64{a.x},
		func(s, g []float64) []float64 { return []float64{g[0] * k * math.Pow(s[0], k-1)} })[0]
}

func (tp *tape) log(a *scalar) *scalar {
	return tp.op("Log", []*scalar{a}, []float64{math.Log(a.x)}, []float64{a.x},
		func(s, g []float64) []float64 { return []float64{g[0] / s[0]} })[0]
}

// sincos is a two-output op: (sin a, cos a).
func (tp *tape) sincos(a *scalar) (*scalar, *scalar) {
	r := tp.op("SinCos", []*scalar{a}, []float64{math.Sin(a.x), math.Cos(a.x)}, []float64{a.x},
		func(s, g []float64) []float64 { return []float64{g[0]*math.Cos(s[0]) - g[1]*math.Sin(s[0])} })
	return r[0], r[1]
}

// backward seeds loss with 1 and runs the engine with the toy arithmetic.
func (tp *tape) backward(loss *scalar, opts autograd.Options) error {
	opts.Arith = arith{}
	return autograd.Backward([]autograd.Root{{Edge: loss.edge, Grad: tp.w.newVal("grad", "seed", 1)}}, opts)
}
