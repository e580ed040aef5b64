package optim_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/optim"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/tensortest"
)

// An optimizer loaded from another's state dict (through JSON for the groups, as a
// file carries them) steps exactly as the original goes on stepping.
func TestStateDictRoundTrip(t *testing.T) {
	d := tensortest.CPU(t)
	makers := map[string]func(ps []*tensor.Tensor) optim.Optimizer{
		"sgd": func(ps []*tensor.Tensor) optim.Optimizer {
			o, err := optim.NewSGDGroups(optim.SGDGroup{Params: ps[:1], SGDConfig: optim.SGDConfig{LR: 0.1, Momentum: 0.9}},
				optim.SGDGroup{Params: ps[1:], SGDConfig: optim.SGDConfig{LR: 0.05}})
			require.NoError(t, err)
			return o
		},
		"adamw": func(ps []*tensor.Tensor) optim.Optimizer {
			o, err := optim.NewAdamWGroups(optim.AdamGroup{Params: ps[:1], AdamConfig: optim.DefaultAdamW()},
				optim.AdamGroup{Params: ps[1:], AdamConfig: optim.AdamConfig{LR: 0.01, Beta1: 0.8, Beta2: 0.9, Eps: 1e-6}})
			require.NoError(t, err)
			return o
		},
	}
	for name, mk := range makers {
		t.Run(name, func(t *testing.T) {
			start := [][]float32{{0.5, -1, 2}, {3, -0.25}}
			ps := []*tensor.Tensor{param(d, start[0]...), param(d, start[1]...)}
			o := mk(ps)
			_, err := optim.NewStepLR(o, 1, 0.5) // records initial_lr, halves nothing yet
			require.NoError(t, err)
			for k := range 3 {
				for i, p := range ps {
					setGrad(d, p, gradsAt(k+i, p.Numel())...)
				}
				o.Step()
			}
			s := tensor.NewScope()
			sd := o.StateDict(s)
			b, err := json.Marshal(sd.Groups)
			require.NoError(t, err)
			sd.Groups = nil
			require.NoError(t, json.Unmarshal(b, &sd.Groups))

			qs := []*tensor.Tensor{param(d, vals(ps[0])...), param(d, vals(ps[1])...)}
			q := mk(qs)
			q.SetLR(0, 7) // overwritten by the load
			require.NoError(t, q.LoadStateDict(sd))
			require.Equal(t, o.StateBytes(), q.StateBytes())
			require.Equal(t, o.LR(0), q.LR(0))
			s.Close()
			for k := 3; k < 6; k++ {
				for i := range ps {
					setGrad(d, ps[i], gradsAt(k+i, ps[i].Numel())...)
					setGrad(d, qs[i], gradsAt(k+i, qs[i].Numel())...)
				}
				o.Step()
				q.Step()
			}
			for i := range ps {
				require.Equal(t, vals(ps[i]), vals(qs[i]), "parameter %d", i)
			}

			s = tensor.NewScope()
			sd = o.StateDict(s)
			bad := sd
			bad.Kind = "Adagrad"
			require.ErrorContains(t, q.LoadStateDict(bad), "Adagrad")
			bad = sd
			bad.Groups = bad.Groups[:1]
			require.ErrorContains(t, q.LoadStateDict(bad), "1 parameter groups for 2")
			if name == "adamw" {
				sd.Groups[1]["decoupled_weight_decay"] = false
				require.ErrorContains(t, q.LoadStateDict(sd), "group 1: decoupled_weight_decay is false; this is AdamW")
			}
			s.Close()
			for _, x := range []optim.Optimizer{o, q} {
				x.Release()
				for _, p := range x.Params() {
					p.Release()
				}
			}
			tensortest.RequireEmpty(t, d)
		})
	}
}
