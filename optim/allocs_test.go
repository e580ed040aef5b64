package optim_test

import (
	"testing"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/optim"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/tensortest"
)

// A warm step of small parameters allocates nothing: the optimizer keeps its lists,
// the fused step its operands, the kernels their constants (a training loop's step
// leaves no garbage of the optimizer's own).
func TestWarmStepAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops the pooled lists at random under the race detector")
	}
	for name, newOpt := range map[string]func([]*tensor.Tensor) (optim.Optimizer, error){
		"SGD": func(ps []*tensor.Tensor) (optim.Optimizer, error) {
			return optim.NewSGD(ps, optim.SGDConfig{LR: 0.01, Momentum: 0.9})
		},
		"Adam": func(ps []*tensor.Tensor) (optim.Optimizer, error) { return optim.NewAdam(ps, optim.DefaultAdam()) },
	} {
		d := tensortest.CPU(t)
		s := tensor.NewScope()
		p, q := s.Ones(d, dtype.F32, 16).AsParameter(), s.Ones(d, dtype.F32, 4, 4).AsParameter()
		s.Bind(p).Sum().Add(s.Bind(q).Sum()).Backward()
		s.Close()
		o, err := newOpt([]*tensor.Tensor{p, q})
		if err != nil {
			t.Fatal(err)
		}
		o.Step() // the lazy state
		if n := testing.AllocsPerRun(100, o.Step); n != 0 {
			t.Errorf("%s: %v heap objects per step", name, n)
		}
		o.Release()
		p.Release()
		q.Release()
		tensortest.RequireEmpty(t, d)
	}
}
