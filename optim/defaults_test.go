package optim_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/optim"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/tensortest"
)

// Arguments with a PyTorch default can be left out: Adam and AdamW without a
// configuration, StepLR without gamma, CosineAnnealingLR without eta_min. Two values
// for one are an error, and so is a configuration whose betas and eps are all zero
// (some fields set, the rest forgotten).
func TestDefaultsNeedNoArguments(t *testing.T) {
	d := tensortest.CPU(t)
	p := param(d, 1)
	ps := []*tensor.Tensor{p}

	adam, err := optim.NewAdam(ps)
	require.NoError(t, err)
	require.Equal(t, optim.DefaultAdam(), adam.Config())
	adam.Release()
	adamw, err := optim.NewAdamW(ps)
	require.NoError(t, err)
	require.Equal(t, optim.DefaultAdamW(), adamw.Config())
	require.Equal(t, "AdamW", adamw.StateDict(nil).Kind)

	_, err = optim.NewAdamW(ps, optim.AdamWConfig{LR: 3e-4})
	require.ErrorContains(t, err, "betas (0, 0) and eps 0: set only some fields? Start from DefaultAdam() or DefaultAdamW()")
	_, err = optim.NewAdam(ps, optim.DefaultAdam(), optim.DefaultAdam())
	require.ErrorContains(t, err, "optim: Adam: 2 configurations; pass one, or none")
	c := optim.DefaultAdamW()
	c.LR = 3e-4
	custom, err := optim.NewAdamW(ps, c)
	require.NoError(t, err)
	require.Equal(t, 3e-4, custom.LR(0))
	custom.Release()

	cos, err := optim.NewCosineAnnealingLR(adamw, 10)
	require.NoError(t, err)
	follow(t, adamw, cos, 12, func(_, e int) float64 { return 1e-3 * (1 + math.Cos(math.Pi*float64(e)/10)) / 2 })
	_, err = optim.NewCosineAnnealingLR(adamw, 10, 0, 1)
	require.ErrorContains(t, err, "optim: CosineAnnealingLR: 2 values of eta_min; pass one, or none for PyTorch's default 0")
	adamw.Release()

	sgd, err := optim.NewSGD(ps, optim.SGDConfig{LR: 1})
	require.NoError(t, err)
	step, err := optim.NewStepLR(sgd, 2)
	require.NoError(t, err)
	follow(t, sgd, step, 5, func(_, e int) float64 { return math.Pow(0.1, float64(e/2)) })
	sgd.Release()
	p.Release()
	tensortest.RequireEmpty(t, d)
}
