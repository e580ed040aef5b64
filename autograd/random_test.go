package autograd_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/autograd"
)

// program is a random DAG of toy ops over a few leaves; the loss sums some of
// its values.
type program struct {
	leaves []float64
	params []bool // which leaves require grad (leaf 0 always does)
	steps  []step
	outs   []int // values summed into the loss
}

type step struct {
	op   int // index into programOps
	a, b int // operand value indices
}

var programOps = []struct {
	name string
	run  func(tp *tape, a, b *scalar) []*scalar
}{
	{"add", func(tp *tape, a, b *scalar) []*scalar { return []*scalar{tp.add(a, b)} }},
	{"mul", func(tp *tape, a, b *scalar) []*scalar { return []*scalar{tp.mul(a, b)} }},
	{"tanh", func(tp *tape, a, _ *scalar) []*scalar { return []*scalar{tp.tanh(a)} }},
	{"exp", func(tp *tape, a, _ *scalar) []*scalar { return []*scalar{tp.exp(a)} }},
	{"pow2", func(tp *tape, a, _ *scalar) []*scalar { return []*scalar{tp.pow(a, 2)} }},
	{"pow3", func(tp *tape, a, _ *scalar) []*scalar { return []*scalar{tp.pow(a, 3)} }},
	{"sincos", func(tp *tape, a, _ *scalar) []*scalar { s, c := tp.sincos(a); return []*scalar{s, c} }},
}

func randomProgram(seed uint64) program {
	r := rand.New(rand.NewPCG(seed, 0x5ab1e7))
	p := program{}
	for i := range 1 + r.IntN(4) {
		p.leaves = append(p.leaves, 2*r.Float64()-1)
		p.params = append(p.params, i == 0 || r.IntN(3) > 0)
	}
	values := len(p.leaves)
	for range 1 + r.IntN(12) {
		s := step{op: r.IntN(len(programOps)), a: r.IntN(values), b: r.IntN(values)}
		p.steps = append(p.steps, s)
		values++
		if programOps[s.op].name == "sincos" {
			values++
		}
	}
	p.outs = []int{values - 1}
	for i := range values - 1 {
		if r.IntN(4) == 0 {
			p.outs = append(p.outs, i)
		}
	}
	return p
}

// run builds the program on tp; leaves that require grad are params unless
// constant is set (a plain evaluation for finite differences).
func (p program) run(tp *tape, leaves []float64, constant bool) ([]*scalar, *scalar) {
	var handles, vals []*scalar
	for i, x := range leaves {
		s := tp.constant(x)
		if p.params[i] && !constant {
			s = tp.param(x)
		}
		handles = append(handles, s)
	}
	vals = append(vals, handles...)
	for _, s := range p.steps {
		vals = append(vals, programOps[s.op].run(tp, vals[s.a], vals[s.b])...)
	}
	loss := vals[p.outs[0]]
	for _, i := range p.outs[1:] {
		loss = tp.add(loss, vals[i])
	}
	return handles, loss
}

func (p program) eval(t testing.TB, leaves []float64) float64 {
	tp := newTape(t, newWorld())
	defer tp.close()
	_, loss := p.run(tp, leaves, true)
	return loss.x
}

func checkProgram(t *testing.T, seed uint64) {
	p := randomProgram(seed)
	if math.Abs(p.eval(t, p.leaves)) > 1e6 {
		return // exp chains can overflow; such programs test nothing
	}
	var logs [2][]string
	for run := range logs {
		w := newWorld()
		tp := newTape(t, w)
		leaves, loss := p.run(tp, p.leaves, false)
		if loss.edge.Node == nil {
			tp.close()
			return // the loss uses no leaf that requires grad
		}
		for _, h := range tp.handles {
			if h != loss && h.leaf == nil {
				h.release(t) // drop the intermediates: dead branches are freed now
			}
		}
		require.NoError(t, tp.backward(loss, autograd.Options{}))
		assert.Zero(t, w.count("saved"), "seed %d: saved values left", seed)
		assert.Zero(t, w.count("grad"), "seed %d: intermediate gradients left", seed)
		for i, l := range leaves {
			if l.leaf == nil {
				continue
			}
			const h = 1e-6
			up := append([]float64(nil), p.leaves...)
			down := append([]float64(nil), p.leaves...)
			up[i] += h
			down[i] -= h
			fd := (p.eval(t, up) - p.eval(t, down)) / (2 * h)
			g := l.grad()
			assert.InDelta(t, fd, g, 1e-5*math.Max(1, math.Abs(fd)), "seed %d leaf %d: engine %v, finite differences %v", seed, i, g, fd)
		}
		logs[run] = w.releasedLog()
		tp.close()
		w.requireEmpty(t)
	}
	assert.Equal(t, logs[0], logs[1], "seed %d: release order differs between identical graphs", seed)
}

func FuzzRandomDAG(f *testing.F) {
	for seed := range uint64(200) {
		f.Add(seed)
	}
	f.Fuzz(checkProgram)
}
