package optim_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/optim"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/tensortest"
)

// Single updates worked out by hand from PyTorch's formulas.
func TestHandComputedUpdates(t *testing.T) {
	d := tensortest.CPU(t)
	for _, tc := range []struct {
		name  string
		make  func(p *tensor.Tensor) (optim.Optimizer, error)
		steps []float32 // p after each step with gradient 0.5, from p = 1
	}{
		{"sgd", func(p *tensor.Tensor) (optim.Optimizer, error) {
			return optim.NewSGD([]*tensor.Tensor{p}, optim.SGDConfig{LR: 0.1})
		}, []float32{0.95, 0.9}},
		// buf = 0.5, then 0.9·0.5 + 0.5 = 0.95.
		{"sgd momentum", func(p *tensor.Tensor) (optim.Optimizer, error) {
			return optim.NewSGD([]*tensor.Tensor{p}, optim.SGDConfig{LR: 0.1, Momentum: 0.9})
		}, []float32{0.95, 0.855}},
		// d = 0.5 + 0.1·1 = 0.6, then 0.5 + 0.1·0.94 = 0.594.
		{"sgd weight decay", func(p *tensor.Tensor) (optim.Optimizer, error) {
			return optim.NewSGD([]*tensor.Tensor{p}, optim.SGDConfig{LR: 0.1, WeightDecay: 0.1})
		}, []float32{0.94, 0.8806}},
		// buf = 0.5, d = 0.5 + 0.9·0.5 = 0.95; buf = 0.95, d = 0.5 + 0.855 = 1.355.
		{"sgd nesterov", func(p *tensor.Tensor) (optim.Optimizer, error) {
			return optim.NewSGD([]*tensor.Tensor{p}, optim.SGDConfig{LR: 0.1, Momentum: 0.9, Nesterov: true})
		}, []float32{0.905, 0.7695}},
		// With a constant gradient Adam's bias-corrected m̂ = 0.5 and v̂ = 0.25: each step
		// moves LR·0.5/(0.5 + eps).
		{"adam", func(p *tensor.Tensor) (optim.Optimizer, error) {
			return optim.NewAdam([]*tensor.Tensor{p}, optim.AdamConfig{LR: 0.1, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8})
		}, []float32{0.9, 0.8}},
		// AdamW first decays p by 1 − 0.1·0.1.
		{"adamw", func(p *tensor.Tensor) (optim.Optimizer, error) {
			return optim.NewAdamW([]*tensor.Tensor{p}, optim.AdamConfig{LR: 0.1, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.1})
		}, []float32{0.89, 0.7811}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := param(d, 1)
			o, err := tc.make(p)
			require.NoError(t, err)
			for i, want := range tc.steps {
				setGrad(d, p, 0.5)
				o.Step()
				assert.InDelta(t, want, vals(p)[0], 2e-7, "after step %d", i+1)
			}
			o.Release()
			p.Release()
		})
	}
	tensortest.RequireEmpty(t, d)
}

// refSGD is torch.optim.SGD's single-tensor update in float64.
func refSGD(c optim.SGDConfig, p, buf, g []float64, first bool) {
	for i := range p {
		d := g[i] + c.WeightDecay*p[i]
		if c.Momentum != 0 {
			if first {
				buf[i] = d
			} else {
				buf[i] = c.Momentum*buf[i] + (1-c.Dampening)*d
			}
			if c.Nesterov {
				d += c.Momentum * buf[i]
			} else {
				d = buf[i]
			}
		}
		p[i] -= c.LR * d
	}
}

// refAdam is torch.optim.Adam's (decoupled: AdamW's) single-tensor update in float64.
func refAdam(c optim.AdamConfig, decoupled bool, step int, p, m, v, g []float64) {
	bc1 := 1 - math.Pow(c.Beta1, float64(step))
	bc2 := 1 - math.Pow(c.Beta2, float64(step))
	for i := range p {
		gi := g[i]
		if decoupled {
			p[i] *= 1 - c.LR*c.WeightDecay
		} else {
			gi += c.WeightDecay * p[i]
		}
		m[i] = c.Beta1*m[i] + (1-c.Beta1)*gi
		v[i] = c.Beta2*v[i] + (1-c.Beta2)*gi*gi
		p[i] -= c.LR / bc1 * m[i] / (math.Sqrt(v[i])/math.Sqrt(bc2) + c.Eps)
	}
}

// gradsAt is the gradient of step k (from 0) for n elements: varied signs and sizes.
func gradsAt(k, n int) []float32 {
	g := make([]float32, n)
	for i := range g {
		g[i] = float32(math.Sin(float64(7*k+3*i+1))) * float32(1+i%3)
	}
	return g
}

func widen(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// TestUpdatesMatchReference runs five steps of every optimizer configuration and
// compares the parameters with PyTorch's update computed in float64.
func TestUpdatesMatchReference(t *testing.T) {
	d := tensortest.CPU(t)
	start := []float32{0.5, -1.25, 2, 0.01, -0.3, 1}
	const steps = 5
	sgds := []optim.SGDConfig{
		{LR: 0.05},
		{LR: 0.05, Momentum: 0.9},
		{LR: 0.05, Momentum: 0.8, Dampening: 0.3, WeightDecay: 0.01},
		{LR: 0.05, Momentum: 0.9, Nesterov: true, WeightDecay: 0.1},
	}
	for _, c := range sgds {
		t.Run(fmt.Sprintf("sgd %+v", c), func(t *testing.T) {
			p := param(d, start...)
			o, err := optim.NewSGD([]*tensor.Tensor{p}, c)
			require.NoError(t, err)
			assert.Equal(t, c, o.Config())
			ref, buf := widen(start), make([]float64, len(start))
			for k := range steps {
				g := gradsAt(k, len(start))
				setGrad(d, p, g...)
				o.Step()
				refSGD(c, ref, buf, widen(g), k == 0)
				assert.InDeltaSlice(t, ref, widen(vals(p)), 2e-6, "step %d", k+1)
			}
			o.Release()
			p.Release()
		})
	}
	adams := []optim.AdamConfig{
		optim.DefaultAdam(),
		{LR: 0.01, Beta1: 0.8, Beta2: 0.99, Eps: 1e-6, WeightDecay: 0.05},
		{LR: 0.01, Beta1: 0, Beta2: 0.9, Eps: 1e-8},
	}
	for _, c := range adams {
		for _, decoupled := range []bool{false, true} {
			t.Run(fmt.Sprintf("adam decoupled=%v %+v", decoupled, c), func(t *testing.T) {
				p := param(d, start...)
				newOpt := optim.NewAdam
				if decoupled {
					newOpt = optim.NewAdamW
				}
				o, err := newOpt([]*tensor.Tensor{p}, c)
				require.NoError(t, err)
				assert.Equal(t, c, o.Config())
				ref := widen(start)
				m, v := make([]float64, len(start)), make([]float64, len(start))
				for k := range steps {
					g := gradsAt(k, len(start))
					setGrad(d, p, g...)
					o.Step()
					refAdam(c, decoupled, k+1, ref, m, v, widen(g))
					assert.InDeltaSlice(t, ref, widen(vals(p)), 5e-7, "step %d", k+1)
				}
				o.Release()
				p.Release()
			})
		}
	}
	tensortest.RequireEmpty(t, d)
}

// A parameter without a gradient is skipped: not updated, no state; a zeroed gradient
// still steps (weight decay acts), as in PyTorch.
func TestSkipsParametersWithoutGradient(t *testing.T) {
	d := tensortest.CPU(t)
	a, b := param(d, 1, 2), param(d, 3, 4, 5)
	o, err := optim.NewAdam([]*tensor.Tensor{a, b}, optim.AdamConfig{LR: 0.1, Beta1: 0.9, Beta2: 0.999, WeightDecay: 0.5})
	require.NoError(t, err)
	setGrad(d, a, 1, 1)
	vb := b.Version()
	o.Step()
	assert.Equal(t, []float32{3, 4, 5}, vals(b), "no gradient: untouched")
	assert.Equal(t, vb, b.Version())
	assert.Equal(t, int64(2*2*4), o.StateBytes(), "state for a only")
	tensortest.RequireLive(t, d, "after a step of a only: a, b, a's gradient, m and v", 8, 12, 8, 8, 8)

	setGrad(d, b, 0, 0, 0)
	b.ZeroGrad(false)
	o.Step()
	assert.NotEqual(t, []float32{3, 4, 5}, vals(b), "a zero gradient steps: weight decay acts")
	assert.Equal(t, int64(2*(2+3)*4), o.StateBytes())
	o.Release()
	o.Release()
	assert.Zero(t, o.StateBytes())
	tensortest.RequireLive(t, d, "after releasing the optimizer: parameters and gradients", 8, 12, 8, 12)
	err = tensor.Try(o.Step)
	require.ErrorIs(t, err, tensor.ErrReleased)
	a.Release()
	b.Release()
	tensortest.RequireEmpty(t, d)
}

func TestStepBumpsVersionAndRecordsNothing(t *testing.T) {
	d := tensortest.CPU(t)
	p := param(d, 1, 2)
	o, err := optim.NewSGD([]*tensor.Tensor{p}, optim.SGDConfig{LR: 0.1})
	require.NoError(t, err)
	setGrad(d, p, 1, 1)
	v := p.Version()
	o.Step()
	assert.Greater(t, p.Version(), v, "an in-place update bumps the version")
	assert.True(t, p.IsLeaf() && p.RequiresGrad() && p.Scope() == nil, "the parameter stays a leaf owned by its module")
	assert.Equal(t, []*tensor.Tensor{p}, o.Params())
	o.Release()
	p.Release()
	tensortest.RequireEmpty(t, d)
}

func TestConfigErrors(t *testing.T) {
	d := tensortest.CPU(t)
	p := param(d, 1)
	ps := []*tensor.Tensor{p}
	frozen := param(d, 1).SetRequiresGrad(false)
	for name, err := range map[string]error{
		"negative lr":         second(optim.NewSGD(ps, optim.SGDConfig{LR: -1})),
		"NaN lr":              second(optim.NewSGD(ps, optim.SGDConfig{LR: math.NaN()})),
		"negative momentum":   second(optim.NewSGD(ps, optim.SGDConfig{LR: 1, Momentum: -0.1})),
		"nesterov, no moment": second(optim.NewSGD(ps, optim.SGDConfig{LR: 1, Nesterov: true})),
		"nesterov, dampening": second(optim.NewSGD(ps, optim.SGDConfig{LR: 1, Momentum: 0.9, Dampening: 0.1, Nesterov: true})),
		"negative decay":      second(optim.NewSGD(ps, optim.SGDConfig{LR: 1, WeightDecay: -1})),
		"beta1 = 1":           second(optim.NewAdam(ps, optim.AdamConfig{LR: 1, Beta1: 1, Beta2: 0.9})),
		"beta2 < 0":           second(optim.NewAdamW(ps, optim.AdamConfig{LR: 1, Beta1: 0.9, Beta2: -0.9})),
		"negative eps":        second(optim.NewAdam(ps, optim.AdamConfig{LR: 1, Beta1: 0.9, Beta2: 0.9, Eps: -1})),
		"adam, negative lr":   second(optim.NewAdam(ps, optim.AdamConfig{LR: -1, Beta1: 0.9, Beta2: 0.9})),
		"adam, NaN decay":     second(optim.NewAdamW(ps, optim.AdamConfig{LR: 1, Beta1: 0.9, Beta2: 0.9, WeightDecay: math.NaN()})),
		"no parameters":       second(optim.NewAdam(nil, optim.DefaultAdam())),
		"nil parameter":       second(optim.NewAdam([]*tensor.Tensor{nil}, optim.DefaultAdam())),
		"the same one twice":  second(optim.NewSGD([]*tensor.Tensor{p, p}, optim.SGDConfig{LR: 1})),
		"not requiring grad":  second(optim.NewSGD([]*tensor.Tensor{frozen}, optim.SGDConfig{LR: 1})),
	} {
		assert.Error(t, err, name)
	}
	p.Release()
	_, err := optim.NewSGD(ps, optim.SGDConfig{LR: 1})
	assert.ErrorContains(t, err, "released")
	assert.Equal(t, 0.999, optim.DefaultAdamW().Beta2)
	assert.Equal(t, 0.01, optim.DefaultAdamW().WeightDecay)
	frozen.Release()
	tensortest.RequireEmpty(t, d)
}

func second[T any](_ T, err error) error { return err }
