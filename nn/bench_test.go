package nn_test

import (
	"math/rand/v2"
	"testing"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/optim"
	"github.com/subletml/sublet/tensor"
)

// benchTinyStep is one training step of sublet-bench's tiny cases on the CPU (an MLP
// 784→256→256→10, batch 64, cross-entropy, a step scope per step, ZeroGrad(true)):
// the host's cost of a small model, where the garbage each step leaves (allocs/op,
// B/op) costs the most collector time.
func benchTinyStep(b *testing.B, newOpt func([]*tensor.Tensor) (optim.Optimizer, error)) {
	const batch = 64
	sizes := []int{784, 256, 256, 10}
	d := newCPU(b)
	model := nn.NewMLP(nn.Init{Device: d, Gen: tensor.NewGenerator(1)}, nn.MLPConfig{Sizes: sizes})
	opt, err := newOpt(nn.Parameters(model))
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(2, 3))
	x := make([]float32, batch*sizes[0])
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	labels := make([]int64, batch)
	for i := range labels {
		labels[i] = rng.Int64N(int64(sizes[len(sizes)-1]))
	}
	data := tensor.NewScope()
	xt, lt := tensor.FromSlice(data, d, dtype.F32, x, batch, sizes[0]), tensor.FromSlice(data, d, dtype.I64, labels)
	step := func() {
		s := data.Child()
		defer s.Close()
		nn.CrossEntropyLoss{}.Loss(model.Forward(xt), lt).Backward()
		opt.Step()
		opt.ZeroGrad(true)
	}
	for range 3 { // the optimizer's lazy state, the allocator's blocks
		step()
	}
	b.ReportAllocs()
	for b.Loop() {
		step()
	}
	b.StopTimer()
	data.Close()
	opt.Release()
	model.Release()
	requireEmpty(b, d)
}

func BenchmarkTinyStepSGD(b *testing.B) {
	benchTinyStep(b, func(ps []*tensor.Tensor) (optim.Optimizer, error) {
		return optim.NewSGD(ps, optim.SGDConfig{LR: 0.01, Momentum: 0.9})
	})
}

func BenchmarkTinyStepAdam(b *testing.B) {
	benchTinyStep(b, func(ps []*tensor.Tensor) (optim.Optimizer, error) {
		return optim.NewAdam(ps, optim.DefaultAdam())
	})
}
