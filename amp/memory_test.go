package amp_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/amp"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/tensortest"
)

// deepModel is 16 × (Linear(1024→1024) + ReLU), the model of docs/checkpoint.md with a
// ReLU after each Linear.
func deepModel(d device.Device) *nn.Sequential {
	init := nn.Init{Device: d, Gen: tensor.NewGenerator(1)}
	var layers []nn.Module
	for range 16 {
		layers = append(layers, nn.NewLinear(init, 1024, 1024, true), nn.ReLU{})
	}
	return nn.NewSequential(layers...)
}

// memoryRun is what one forward and backward of deepModel kept, in bytes beyond the
// parameters and the input.
type memoryRun struct {
	forward     int64 // held after forward, in the autocast scope
	cache       int64 // the weight-cast cache then (autocast only)
	afterRegion int64 // held once the autocast scope closed: what the graph saved
	peak        int64 // most requested during forward and backward
}

// runDeep runs deepModel at full size (batch 1024) on the meta device, under
// autocast to low unless low is Invalid, then backward, and checks that afterwards only
// the parameters, their gradients, the input and its gradient remain, and nothing
// after release.
func runDeep(t *testing.T, low dtype.DType) memoryRun {
	d := tensortest.Meta(t)
	m := deepModel(d)
	params := nn.ParameterBytes(m)
	require.Equal(t, int64(16*(4*MiB+4096)), params)
	root := tensor.NewScope()
	x := root.Empty(d, dtype.F32, 1024, 1024).SetRequiresGrad(true)
	start := tensortest.Requested(t, d)
	require.Equal(t, params+4*MiB, start)
	al := tensortest.Allocator(t, d)
	al.ResetPeakStats()

	var r memoryRun
	fwd := root
	if low != dtype.Invalid {
		fwd = autocast(t, root, low)
	}
	out := m.Forward(fwd.Bind(x))
	r.forward = tensortest.Requested(t, d) - start
	r.cache = amp.CacheBytes(fwd)
	if fwd != root {
		fwd.Keep(out)
		fwd.Close()
	}
	r.afterRegion = tensortest.Requested(t, d) - start
	loss := out.Sum()
	loss.Backward()
	r.peak = tensortest.PeakRequested(t, d) - start
	require.Equal(t, 2*params+2*x.Bytes()+out.Bytes()+loss.Bytes(), tensortest.Requested(t, d),
		"after backward: parameters, gradients, the input, its gradient, the output and the loss")
	root.Close()
	require.Equal(t, 2*params, tensortest.Requested(t, d), "after the step's scope closed: parameters and gradients")
	m.Release()
	tensortest.RequireEmpty(t, d)
	return r
}

// TestActivationMemoryF16AgainstF32 measures what an autocast forward of 16 ×
// (Linear 1024→1024 + ReLU), batch 1024, keeps, against F32 (input excluded).
//
// F32: each ReLU saves its output, which the next Linear saves as its input, and each
// Linear's output dies at its layer boundary (ReLU saves its output, not its input): 16
// activations of 4 MiB, the last one the model's output = 64 MiB, PyTorch's figure
// for the same chain (§2.9).
//
// F16 (and BF16): the first Linear saves the low-precision cast of the input, then the
// same 16 ReLU outputs, in 16 bits: 17 × 2 MiB = 34 MiB of activations, 53.1 % of F32
// (PyTorch keeps 17 fp16 activations, §3.7). The cache holds 16 weight casts (2 MiB),
// 16 bias casts (2 KiB) and the input's cast, which PyTorch's rule caches too (an F32
// leaf that requires grad): 34 MiB + 32 KiB, so after forward the step holds 34 + 32
// MiB + 32 KiB. When the autocast scope closes the bias casts go; the weight casts
// stay, saved by the Linear nodes (the input requires grad, so every Linear saves its
// weight), until backward: 34 + 32 = 66 MiB, PyTorch's 66 MiB.
func TestActivationMemoryF16AgainstF32(t *testing.T) {
	f32 := runDeep(t, dtype.Invalid)
	require.Equal(t, int64(64*MiB), f32.forward)
	require.Zero(t, f32.cache)
	require.Equal(t, f32.forward, f32.afterRegion)

	const weightCasts = 16 * 2 * MiB
	for _, low := range []dtype.DType{dtype.F16, dtype.BF16} {
		r := runDeep(t, low)
		require.Equal(t, int64(34*MiB+weightCasts+16*2048), r.forward, low)
		require.Equal(t, int64(2*MiB+weightCasts+16*2048), r.cache, low)
		require.Equal(t, int64(34*MiB+weightCasts), r.afterRegion, low)
		activations := r.afterRegion - weightCasts
		require.LessOrEqual(t, float64(activations)/float64(f32.forward), 0.55)
		require.Less(t, r.peak, f32.peak)
		t.Logf("%v: activations %d B (%.1f%% of F32's %d B), cache %d B, after forward %d B, after the region %d B; peak %d B (F32 %d B)",
			low, activations, 100*float64(activations)/float64(f32.forward), f32.forward,
			r.cache, r.forward, r.afterRegion, r.peak, f32.peak)
	}
}
