package optim_test

import (
	"testing"

	"github.com/subletml/sublet/amp"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/optim"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/tensortest"
)

// amp's GradScaler drives optim's optimizers.
var _ amp.Optimizer = optim.Optimizer(nil)

// benchStep times Step over one parameter of n floats with its gradient, on the CPU.
// Bytes are the parameter's: each step reads the gradient and the state as well.
func benchStep(b *testing.B, n int, make func([]*tensor.Tensor) (optim.Optimizer, error)) {
	d := tensortest.CPU(b)
	s := tensor.NewScope()
	p := s.Ones(d, dtype.F32, n).AsParameter()
	p.Mul(s.Full(d, dtype.F32, 1e-3, n)).Sum().Backward()
	s.Close()
	o, err := make([]*tensor.Tensor{p})
	if err != nil {
		b.Fatal(err)
	}
	o.Step() // the lazy state
	b.SetBytes(int64(n) * 4)
	for b.Loop() {
		o.Step()
	}
	b.StopTimer()
	o.Release()
	p.Release()
	tensortest.RequireEmpty(b, d)
}

func BenchmarkSGDMomentumStep4M(b *testing.B) {
	benchStep(b, 1<<22, func(ps []*tensor.Tensor) (optim.Optimizer, error) {
		return optim.NewSGD(ps, optim.SGDConfig{LR: 0.01, Momentum: 0.9})
	})
}

func BenchmarkAdamStep4M(b *testing.B) {
	benchStep(b, 1<<22, func(ps []*tensor.Tensor) (optim.Optimizer, error) {
		return optim.NewAdam(ps, optim.DefaultAdam())
	})
}

func BenchmarkAdamWStep4M(b *testing.B) {
	benchStep(b, 1<<22, func(ps []*tensor.Tensor) (optim.Optimizer, error) {
		return optim.NewAdamW(ps, optim.DefaultAdamW())
	})
}

// benchManyStep times Step over count parameters of n floats each on the CPU (a model
// of many small layers: the per-parameter cost of a step shows). Bytes are the
// parameters'.
func benchManyStep(b *testing.B, count, n int, newOpt func([]*tensor.Tensor) (optim.Optimizer, error)) {
	d := tensortest.CPU(b)
	s := tensor.NewScope()
	ps := make([]*tensor.Tensor, count)
	for i := range ps {
		ps[i] = s.Ones(d, dtype.F32, n).AsParameter()
		ps[i].Mul(s.Full(d, dtype.F32, 1e-3, n)).Sum().Backward()
	}
	s.Close()
	o, err := newOpt(ps)
	if err != nil {
		b.Fatal(err)
	}
	o.Step()
	b.SetBytes(int64(count*n) * 4)
	for b.Loop() {
		o.Step()
	}
	b.StopTimer()
	o.Release()
	for _, p := range ps {
		p.Release()
	}
	tensortest.RequireEmpty(b, d)
}

func BenchmarkSGDMomentumStep200x1000(b *testing.B) {
	benchManyStep(b, 200, 1000, func(ps []*tensor.Tensor) (optim.Optimizer, error) {
		return optim.NewSGD(ps, optim.SGDConfig{LR: 0.01, Momentum: 0.9})
	})
}

func BenchmarkAdamStep200x1000(b *testing.B) {
	benchManyStep(b, 200, 1000, func(ps []*tensor.Tensor) (optim.Optimizer, error) {
		return optim.NewAdam(ps, optim.DefaultAdam())
	})
}
