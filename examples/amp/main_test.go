package main

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/device/named"
)

// small is a run that takes a fraction of a second: MLP 16-64-64-4, batch 128, 30
// steps; its first steps overflow at 2^24, and 10 good steps grow the scale.
var small = []string{"-features", "16", "-classes", "4", "-hidden", "64", "-layers", "2", "-batch", "128",
	"-steps", "30", "-growth-interval", "10"}

func smallConfig(t *testing.T, args ...string) config {
	c, err := parseFlags(append(append([]string{}, small...), args...), io.Discard)
	require.NoError(t, err)
	return c
}

func TestRunPrintsScaleChangesSkipsAndMemory(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(small, &out), out.String())
	text := out.String()
	assert.Contains(t, text, "step   1  loss 1.")
	assert.Contains(t, text, "Inf/NaN in the gradients: step skipped, scale 2^24 -> 2^23")
	assert.Contains(t, text, "10 good steps in a row: scale")
	for _, row := range []string{"held after forward and loss", "of which the weight-cast cache", "saved for backward", "peak during the step"} {
		assert.Contains(t, text, row)
	}
	// The CPU kernels convert F16 operands through bounded scratch on the stack: no
	// float32 buffer comes from the allocator, and the peak counts none.
	assert.NotContains(t, text, "float32 buffers")
	assert.Contains(t, text, "(the peak comes during backward: what the graph saved, still alive, beside the gradients backward makes; the parameters' gradients are F32 in both runs)\n")
	assert.Contains(t, text, "F32 after training:")
	assert.Contains(t, text, "AMP F16 after training:")
}

// TestMixedPrecisionTrainsAndSavesActivations runs on the CPU, and on cuda:0 where
// there is a GPU: the same bytes at the same moments, the scale's history, learning.
func TestMixedPrecisionTrainsAndSavesActivations(t *testing.T) {
	devs := []string{"cpu"}
	if _, err := named.Open("cuda:0"); err == nil {
		devs = append(devs, "cuda:0")
	}
	for _, dev := range devs {
		t.Run(dev, func(t *testing.T) { checkMixedPrecision(t, smallConfig(t, "-device", dev)) })
	}
}

func checkMixedPrecision(t *testing.T, c config) {
	f32, err := train(c, false, io.Discard)
	require.NoError(t, err)
	mixed, err := train(c, true, io.Discard)
	require.NoError(t, err)

	require.NotEmpty(t, mixed.skipped)
	assert.Equal(t, 1, mixed.skipped[0], "2^24 overflows float16 at once")
	assert.Empty(t, f32.skipped)
	assert.Equal(t, float64(1<<23), mixed.scales[0])
	grew := false
	for i := 1; i < len(mixed.scales); i++ {
		grew = grew || mixed.scales[i] > mixed.scales[i-1]
	}
	assert.True(t, grew, "the scale grew after 10 good steps: %v", mixed.scales)
	assert.InDelta(t, f32.losses[0], mixed.losses[0], 0.01, "the same model and batch at the start")
	last := func(v []float64) float64 { return v[len(v)-1] }
	assert.Less(t, last(f32.losses), f32.losses[0])
	assert.Less(t, last(mixed.losses), mixed.losses[0], "mixed precision learns too")

	// What a step keeps, exactly: hidden 64, batch 128, 4 classes, inputs of 16.
	const act32 = 2*128*64*4 + 128*4*4 + 129*4 + 4 // two ReLU outputs; logits, log-sum-exps (and the count) and loss
	assert.Equal(t, int64(act32), f32.last.forward)
	assert.Equal(t, f32.last.forward, f32.last.saved)
	const casts = (16*64 + 64*64 + 64*4) * 2 // the weights in F16
	const biasCasts = (64 + 64 + 4) * 2
	// The input's F16 cast, two F16 ReLU outputs, F16 logits, their F32 cast (saved by
	// CrossEntropy), log-sum-exps (and the count) and loss; and the cache.
	const act16 = 128*16*2 + 2*128*64*2 + 128*4*2 + 128*4*4 + 129*4 + 4
	assert.Equal(t, int64(act16+casts+biasCasts), mixed.last.forward)
	assert.Equal(t, int64(casts+biasCasts), mixed.last.cache)
	// Releasing the logits frees the F16 logits (the F32 cast is what the loss saved);
	// closing the autocast region frees the bias casts and the first weight's cast, which no Linear saved: the
	// input requires no gradient, so the first Linear needs no weight for backward.
	assert.Equal(t, int64(act16-128*4*2+casts-16*64*2), mixed.last.saved)
	// The peak comes during backward; measured (deterministic: the same seeds, the same
	// ops), mixed precision's lower by its F16 activations and their gradients.
	assert.Equal(t, int64(132116), f32.last.peak)
	assert.Equal(t, int64(78872), mixed.last.peak)
	for _, r := range []result{f32, mixed} {
		assert.Equal(t, r.params+r.state, r.left, "%s: only the parameters and the momentum remain", r.name)
		assert.Equal(t, r.params, r.state)
	}
}

func TestSimBackedComputesWhatTheCPUDoes(t *testing.T) {
	losses := func(dev string) string {
		var out bytes.Buffer
		require.NoError(t, run(append([]string{"-device", dev}, small...), &out))
		text := out.String()
		return text[:strings.Index(text, "memory of the last step")]
	}
	onCPU, onSim := losses("cpu"), losses("sim-backed")
	onSim = strings.NewReplacer("on sim-backed", "on cpu", "run on sim", "run on cpu").Replace(onSim)
	assert.Equal(t, onCPU, onSim, "the simulated GPU with data computes what the CPU does, bit for bit")
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-device", "sim"}, {"-hidden", "0"}, {"-classes", "1"}, {"-lr", "0"}, {"-init-scale", "-1"},
		{"-growth-interval", "0"}, {"extra"}, {"-nosuchflag"},
	} {
		assert.Error(t, run(args, io.Discard), "%v", args)
	}
}
