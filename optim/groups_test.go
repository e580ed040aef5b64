package optim_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/optim"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/tensortest"
)

// An optimizer over two groups steps each parameter as an optimizer of its group's
// hyper-parameters alone would; SGD keeps momentum only where its group has some.
func TestGroupsStepAsSeparateOptimizers(t *testing.T) {
	d := tensortest.CPU(t)
	sgd := []optim.SGDConfig{{LR: 0.1, Momentum: 0.9}, {LR: 0.01, WeightDecay: 0.1}}
	adam := []optim.AdamConfig{optim.DefaultAdam(), {LR: 0.05, Beta1: 0.5, Beta2: 0.9, Eps: 1e-6, WeightDecay: 0.2}}
	start := [][]float32{{0.5, -1, 2}, {3, -0.25}}
	run := func(grouped bool, kind string) [][]float32 {
		ps := []*tensor.Tensor{param(d, start[0]...), param(d, start[1]...)}
		var opts []optim.Optimizer
		var err error
		switch {
		case kind == "sgd" && grouped:
			var o *optim.SGD
			o, err = optim.NewSGDGroups(optim.SGDGroup{Params: ps[:1], SGDConfig: sgd[0]}, optim.SGDGroup{Params: ps[1:], SGDConfig: sgd[1]})
			require.NoError(t, err)
			opts = append(opts, o)
		case kind == "sgd":
			for i := range ps {
				o, err := optim.NewSGD(ps[i:i+1], sgd[i])
				require.NoError(t, err)
				opts = append(opts, o)
			}
		case grouped:
			o, err := optim.NewAdamWGroups(optim.AdamGroup{Params: ps[:1], AdamConfig: adam[0]}, optim.AdamGroup{Params: ps[1:], AdamConfig: adam[1]})
			require.NoError(t, err)
			opts = append(opts, o)
		default:
			for i := range ps {
				o, err := optim.NewAdamW(ps[i:i+1], adam[i])
				require.NoError(t, err)
				opts = append(opts, o)
			}
		}
		for k := range 4 {
			for i, p := range ps {
				setGrad(d, p, gradsAt(k+i, p.Numel())...)
			}
			for _, o := range opts {
				o.Step()
			}
		}
		out := [][]float32{vals(ps[0]), vals(ps[1])}
		if kind == "sgd" && grouped {
			require.Equal(t, ps[0].Bytes(), opts[0].StateBytes(), "a momentum buffer for the first group only")
		}
		for _, o := range opts {
			o.Release()
		}
		for _, p := range ps {
			p.Release()
		}
		return out
	}
	for _, kind := range []string{"sgd", "adam"} {
		require.Equal(t, run(false, kind), run(true, kind), kind)
	}
	tensortest.RequireEmpty(t, d)
}

func TestGroupsAddChangeAndRefuse(t *testing.T) {
	d := tensortest.CPU(t)
	a, b, c := param(d, 1), param(d, 2), param(d, 3)
	o, err := optim.NewSGDGroups(optim.SGDGroup{Params: []*tensor.Tensor{a}, SGDConfig: optim.SGDConfig{LR: 1}})
	require.NoError(t, err)
	require.Error(t, o.AddGroup(optim.SGDGroup{Params: []*tensor.Tensor{b, a}, SGDConfig: optim.SGDConfig{LR: 1}}),
		"a is in group 0 already")
	require.Equal(t, 1, o.NumGroups(), "a refused group leaves the optimizer as it was")
	require.ErrorContains(t, o.AddGroup(optim.SGDGroup{Params: []*tensor.Tensor{b}, SGDConfig: optim.SGDConfig{LR: -1}}), "group 1")
	require.NoError(t, o.AddGroup(optim.SGDGroup{Params: []*tensor.Tensor{b, c}, SGDConfig: optim.SGDConfig{LR: 0.5}}))
	require.Equal(t, []*tensor.Tensor{a, b, c}, o.Params())
	require.Equal(t, []*tensor.Tensor{b, c}, o.GroupParams(1))
	require.Equal(t, 0.5, o.Group(1).LR)
	require.NoError(t, o.SetGroupConfig(0, optim.SGDConfig{LR: 2, Momentum: 0.5}))
	require.Error(t, o.SetGroupConfig(0, optim.SGDConfig{LR: 1, Nesterov: true}))
	for _, p := range []*tensor.Tensor{a, b, c} {
		setGrad(d, p, 1)
	}
	o.Step()
	require.Equal(t, [][]float32{{-1}, {1.5}, {2.5}}, [][]float32{vals(a), vals(b), vals(c)})
	require.Equal(t, a.Bytes(), o.StateBytes(), "the momentum group's buffer")

	_, err = optim.NewAdamGroups(optim.AdamGroup{Params: []*tensor.Tensor{a}, AdamConfig: optim.DefaultAdam()},
		optim.AdamGroup{Params: []*tensor.Tensor{a}, AdamConfig: optim.DefaultAdam()})
	require.ErrorContains(t, err, "already parameter 0 of group 0")
	_, err = optim.NewSGDGroups()
	require.Error(t, err)
	require.Error(t, tensor.Try(func() { o.Group(2) }))
	o.Release()
	for _, p := range []*tensor.Tensor{a, b, c} {
		p.Release()
	}
	tensortest.RequireEmpty(t, d)
}
