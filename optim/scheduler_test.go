package optim_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/optim"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/tensortest"
)

// twoGroups is an SGD over two one-element parameters in two groups with learning
// rates a and b.
func twoGroups(t *testing.T, a, b float64) (*optim.SGD, func()) {
	d := tensortest.CPU(t)
	p, q := param(d, 1), param(d, 2)
	o, err := optim.NewSGDGroups(optim.SGDGroup{Params: []*tensor.Tensor{p}, SGDConfig: optim.SGDConfig{LR: a}},
		optim.SGDGroup{Params: []*tensor.Tensor{q}, SGDConfig: optim.SGDConfig{LR: b}})
	require.NoError(t, err)
	return o, func() {
		o.Release()
		p.Release()
		q.Release()
		tensortest.RequireEmpty(t, d)
	}
}

// follow steps s n times and checks every group's rate at epochs 0..n against want,
// computed from the closed forms in float64.
func follow(t *testing.T, o optim.Optimizer, s optim.Scheduler, n int, want func(group, epoch int) float64) {
	t.Helper()
	for e := 0; e <= n; e++ {
		if e > 0 {
			s.Step()
		}
		for g := range o.NumGroups() {
			w := want(g, e)
			require.InDelta(t, w, o.LR(g), 1e-12*math.Max(1, w), "group %d, epoch %d", g, e)
			require.InDelta(t, w, s.LastLR()[g], 1e-12*math.Max(1, w), "LastLR, group %d, epoch %d", g, e)
		}
	}
}

func TestStepLR(t *testing.T) {
	o, done := twoGroups(t, 1, 0.2)
	defer done()
	s, err := optim.NewStepLR(o, 3, 0.5)
	require.NoError(t, err)
	base := []float64{1, 0.2}
	follow(t, o, s, 10, func(g, e int) float64 { return base[g] * math.Pow(0.5, float64(e/3)) })
	require.Equal(t, 10, s.Epoch())
}

func TestLinearLR(t *testing.T) {
	o, done := twoGroups(t, 0.8, 0.1)
	defer done()
	s, err := optim.NewLinearLR(o, 0.25, 1, 4)
	require.NoError(t, err)
	base := []float64{0.8, 0.1}
	follow(t, o, s, 8, func(g, e int) float64 { return base[g] * (0.25 + 0.75*float64(min(e, 4))/4) })
}

// The chainable cosine matches the closed form through T_max and past it, where the
// cosine comes back up (the special case at T_max+1 included).
func TestCosineAnnealingLR(t *testing.T) {
	o, done := twoGroups(t, 1, 0.5)
	defer done()
	s, err := optim.NewCosineAnnealingLR(o, 10, 0.1)
	require.NoError(t, err)
	base := []float64{1, 0.5}
	follow(t, o, s, 25, func(g, e int) float64 {
		return 0.1 + (base[g]-0.1)*(1+math.Cos(math.Pi*float64(e)/10))/2
	})
}

// Five epochs of linear warm-up from a tenth of the rate, then cosine annealing to 0
// over ten: the schedule PyTorch's SequentialLR gives.
func TestSequentialLRWarmupThenCosine(t *testing.T) {
	o, done := twoGroups(t, 1, 0.3)
	defer done()
	warm, err := optim.NewLinearLR(o, 0.1, 1, 5)
	require.NoError(t, err)
	cos, err := optim.NewCosineAnnealingLR(o, 10, 0)
	require.NoError(t, err)
	s, err := optim.NewSequentialLR(o, []*optim.LRScheduler{warm, cos}, []int{5})
	require.NoError(t, err)
	base := []float64{1, 0.3}
	follow(t, o, s, 20, func(g, e int) float64 {
		if e < 5 {
			return base[g] * (0.1 + 0.9*float64(e)/5)
		}
		return base[g] * (1 + math.Cos(math.Pi*float64(e-5)/10)) / 2
	})
}

// Chained schedules multiply: a step decay and a warm-up at once.
func TestChainedScheduler(t *testing.T) {
	o, done := twoGroups(t, 1, 0.4)
	defer done()
	step, err := optim.NewStepLR(o, 2, 0.5)
	require.NoError(t, err)
	warm, err := optim.NewLinearLR(o, 0.5, 1, 2)
	require.NoError(t, err)
	c, err := optim.NewChainedScheduler(step, warm)
	require.NoError(t, err)
	base := []float64{1, 0.4}
	follow(t, o, c, 8, func(g, e int) float64 {
		return base[g] * math.Pow(0.5, float64(e/2)) * (0.5 + 0.5*float64(min(e, 2))/2)
	})
	lambda, err := optim.NewLambdaLR(o, func(e int) float64 { return 1 / float64(e+1) })
	require.NoError(t, err)
	require.InDelta(t, 1.0, o.LR(0), 1e-15, "a new scheduler starts from the shared initial rates")
	lambda.Step()
	require.InDelta(t, 0.2, o.LR(1), 1e-15)
}

func TestSchedulerErrors(t *testing.T) {
	o, done := twoGroups(t, 1, 1)
	defer done()
	other, done2 := twoGroups(t, 1, 1)
	defer done2()
	for _, err := range []error{
		second(optim.NewStepLR(o, 0, 0.1)),
		second(optim.NewLinearLR(o, 0, 1, 5)),
		second(optim.NewLinearLR(o, 0.5, 1.5, 5)),
		second(optim.NewLinearLR(o, 0.5, 1, 0)),
		second(optim.NewCosineAnnealingLR(o, 0, 0)),
		second(optim.NewLambdaLR(o, nil)),
	} {
		require.Error(t, err)
	}
	a, err := optim.NewStepLR(o, 1, 0.5)
	require.NoError(t, err)
	b, err := optim.NewStepLR(other, 1, 0.5)
	require.NoError(t, err)
	require.Error(t, second(optim.NewSequentialLR(o, []*optim.LRScheduler{a, b}, []int{3})), "another optimizer")
	require.Error(t, second(optim.NewSequentialLR(o, []*optim.LRScheduler{a, a}, nil)), "milestones")
	require.Error(t, second(optim.NewChainedScheduler(a, b)))
	require.Error(t, second(optim.NewChainedScheduler()))
	require.Error(t, tensor.Try(func() { o.SetLR(2, 0.1) }))
	require.Error(t, tensor.Try(func() { o.SetLR(0, -1) }))
}
