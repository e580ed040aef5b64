package optim_test

import (
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/optim"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/tensortest"
)

// blobs is a seeded classification set: k Gaussian blobs in dim dimensions.
func blobs(seed uint64, n, dim, k int) (x []float32, labels []int64) {
	r := rand.New(rand.NewPCG(seed, 1))
	centers := make([]float64, k*dim)
	for i := range centers {
		centers[i] = 3 * r.NormFloat64()
	}
	x, labels = make([]float32, n*dim), make([]int64, n)
	for i := range n {
		c := r.IntN(k)
		labels[i] = int64(c)
		for j := range dim {
			x[i*dim+j] = float32(centers[c*dim+j] + r.NormFloat64())
		}
	}
	return x, labels
}

// trainRun trains an MLP on d and returns every step's loss and, when eval is set,
// every epoch's accuracy on the training set computed under NoGrad.
func trainRun(t testing.TB, d device.Device, seed uint64, adam, eval bool) (losses, accs []float64) {
	const n, dim, k, bs, epochs = 96, 4, 3, 16, 3
	x, labels := blobs(seed, n, dim, k)
	m := nn.NewMLP(nn.Init{Device: d, Gen: tensor.NewGenerator(seed)}, nn.MLPConfig{Sizes: []int{dim, 32, 32, k}, Dropout: 0.1})
	defer m.Release()
	var o optim.Optimizer
	var err error
	if adam {
		o, err = optim.NewAdam(nn.Parameters(m), optim.AdamConfig{LR: 0.01, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8})
	} else {
		o, err = optim.NewSGD(nn.Parameters(m), optim.SGDConfig{LR: 0.05, Momentum: 0.9})
	}
	if err != nil {
		t.Error(err)
		return nil, nil
	}
	defer o.Release()
	gen := tensor.NewGenerator(seed + 100)
	for range epochs {
		m.SetTraining(true)
		for b := 0; b < n; b += bs {
			s := tensor.NewScope(tensor.WithGenerator(gen))
			xb := tensor.FromSlice(s, d, dtype.F32, x[b*dim:(b+bs)*dim], bs, dim)
			lb := tensor.FromSlice(s, d, dtype.I64, labels[b:b+bs])
			loss := nn.CrossEntropyLoss{}.Loss(m.Forward(xb), lb)
			loss.Backward()
			losses = append(losses, loss.Item())
			s.Close()
			o.Step()
			o.ZeroGrad(true)
		}
		if eval {
			m.SetTraining(false)
			s := tensor.NewScope(tensor.NoGrad())
			pred := m.Forward(tensor.FromSlice(s, d, dtype.F32, x, n, dim)).Argmax(1)
			correct := 0
			for i, p := range tensor.ToSlice[int64](pred) {
				if p == labels[i] {
					correct++
				}
			}
			accs = append(accs, float64(correct)/n)
			s.Close()
		}
	}
	return losses, accs
}

// TestTwoGoroutinesTrainAtOnce: two models train at once on one device (one allocator),
// one with SGD, one with Adam evaluating under NoGrad after each epoch; each gets,
// bit for bit, the losses it gets alone.
func TestTwoGoroutinesTrainAtOnce(t *testing.T) {
	d := tensortest.CPU(t)
	aloneA, _ := trainRun(t, d, 1, false, false)
	aloneB, accB := trainRun(t, d, 2, true, true)
	tensortest.RequireEmpty(t, d)
	require.Less(t, aloneA[len(aloneA)-1], aloneA[0], "A's loss fell")
	require.Less(t, aloneB[len(aloneB)-1], aloneB[0], "B's loss fell")
	require.Len(t, accB, 3)
	require.Greater(t, accB[2], 0.9, "B's final accuracy")

	var a, b, acc []float64
	var wg sync.WaitGroup
	wg.Go(func() { a, _ = trainRun(t, d, 1, false, false) })
	wg.Go(func() { b, acc = trainRun(t, d, 2, true, true) })
	wg.Wait()
	require.Equal(t, aloneA, a)
	require.Equal(t, aloneB, b)
	require.Equal(t, accB, acc)
	tensortest.RequireEmpty(t, d)
}
