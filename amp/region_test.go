package amp_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/amp"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/optim"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/tensortest"
)

// PyTorch's AMP loop translated line for line: a step scope, an autocast region around
// forward and loss, the scaled backward after the region closed, no Bind and no Keep.
// The ops on x (owned by the data scope) run under autocast, the loss outlives the
// region, and after every one of 20 steps the allocator holds exactly the data, the
// parameters and the optimizer's state: the region's cache and the step's tensors
// are gone.
func TestAutocastRegionInTheNaturalLoop(t *testing.T) {
	d := tensortest.CPU(t)
	model := nn.NewMLP(nn.Init{Device: d, Gen: tensor.NewGenerator(1)}, nn.MLPConfig{Sizes: []int{4, 8, 3}})
	defer model.Release()
	opt, err := optim.NewSGD(nn.Parameters(model), optim.SGDConfig{LR: 0.1, Momentum: 0.9})
	require.NoError(t, err)
	defer opt.Release()
	scaler, err := amp.NewGradScaler(amp.ScalerConfig{InitScale: 1024})
	require.NoError(t, err)

	data := tensor.NewScope()
	x := f32(data, d, seq(8, 0.25), 2, 4)
	y := tensor.FromSlice(data, d, dtype.I64, []int64{0, 2})
	var flat int64
	for i := range 20 {
		step := data.Child()
		ac := autocast(t, step, dtype.F16)
		logits := model.Forward(x)
		require.Equal(t, dtype.F16, logits.DType(), "step %d: the Linear ran under autocast", i)
		loss := nn.CrossEntropyLoss{}.Loss(logits, y)
		require.Equal(t, dtype.F32, loss.DType())
		require.Same(t, step, loss.Scope(), "the region owns nothing: the step owns the loss")
		require.Positive(t, amp.CacheBytes(ac))
		ac.Close()
		require.Zero(t, amp.CacheBytes(ac), "closing the region released its cache")
		scaler.Scale(loss).Backward()
		_, err := scaler.Step(opt)
		require.NoError(t, err)
		require.NoError(t, scaler.Update())
		opt.ZeroGrad(true)
		step.Close()
		held := tensortest.Requested(t, d)
		if i == 0 {
			flat = held
			require.Equal(t, x.Bytes()+y.Bytes()+nn.ParameterBytes(model)+opt.StateBytes(), flat)
		}
		require.Equal(t, flat, held, "step %d: memory is flat", i)
	}
	data.Close()
	opt.Release()
	model.Release()
	tensortest.RequireEmpty(t, d)
}

// An autocast region made on a scope that already has an open child is a sibling of
// it: the ops on the parent's tensors fail, naming both, instead of running in one.
func TestAutocastBesideAStepIsAnError(t *testing.T) {
	d := tensortest.CPU(t)
	w := param(d, seq(4, 0.5), 2, 2)
	data := tensor.NewScope()
	x := f32(data, d, seq(4, 1), 2, 2)
	step := data.Child()
	autocast(t, data, dtype.F16)
	e := tensortest.RequireOpError(t, tensor.OpLinear, tensor.ErrScope, func() { tensor.Linear(x, w, nil) })
	require.Contains(t, e.Error(), "region_test.go")
	step.Close()
	require.Equal(t, dtype.F16, tensor.Linear(x, w, nil).DType(), "the region is the only open child now")
	data.Close()
	w.Release()
	tensortest.RequireEmpty(t, d)
}
