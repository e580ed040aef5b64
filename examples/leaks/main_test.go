package main

import (
	"bytes"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/examples/internal/demo"
	"github.com/subletml/sublet/tensor/tensortest"
)

func measureOn(t *testing.T, name string, args ...string) result {
	t.Helper()
	c, err := parseFlags(args, io.Discard)
	require.NoError(t, err)
	dev, a, hasData, err := demo.Open(name)
	require.NoError(t, err)
	var r result
	require.NoError(t, demo.Try(dev, func() error { r, err = measure(c, dev, a, hasData); return err }))
	tensortest.RequireEmpty(t, dev)
	return r
}

func growths(t *testing.T, loops []loop) []int64 {
	t.Helper()
	var g []int64
	for _, l := range loops {
		d, ok := l.growth()
		require.True(t, ok, "%s grows evenly: %v", l.name, l.after)
		g = append(g, d)
	}
	return g
}

// The seed's loop at its own size, 1000 × 1000 floats (4 000 000 bytes), on the meta
// device: x and y pile up in one scope, nothing with a scope per iteration, also over an
// input made before the loop (routed into the iteration's scope, bound or not).
func TestSeedLoopAtFullSize(t *testing.T) {
	const x = 1000 * 1000 * 4
	r := measureOn(t, "sim", "-iterations", "4")
	assert.Equal(t, []int64{2 * x, 0, 0, 0}, growths(t, r.seed))
	assert.Equal(t, []int64{2 * x, 4 * x, 6 * x, 8 * x}, r.seed[0].after)
	assert.Equal(t, []int64{0, 0, 0, 0}, r.seed[1].after)
	assert.Equal(t, []int64{x, x, x, x}, r.seed[2].after, "only x: each y went to its iteration's scope")
	assert.Equal(t, []int64{x, x, x, x}, r.seed[3].after, "only x")
}

// Keeping the total keeps each iteration's graph, and with it exactly what the ops
// saved for backward; the three fixes keep nothing but the total's 4 bytes.
func TestAccumulatedLossKeepsEveryGraph(t *testing.T) {
	r := measureOn(t, "cpu", "-size", "64")
	const batch, in, hidden, classes = 128, 64, 256, 10
	saved := int64(batch*in*4 + // the batch, saved by the first Linear for its weight's gradient
		2*batch*hidden*4 + // the two ReLU outputs (the next Linears' inputs too)
		batch*classes*4 + (batch+1)*4 + // the logits, their log-sum-exps and the count, saved by CrossEntropy
		batch*8) // the labels
	assert.Equal(t, []int64{saved, 0, 0, 0}, growths(t, r.accumulate))
	for i, l := range r.accumulate[1:3] {
		assert.Equal(t, []int64{4, 4, 4, 4, 4}, l.after, "variant %d holds only the total", i+1)
	}
	assert.Equal(t, []int64{0, 0, 0, 0, 0}, r.accumulate[3].after)
	assert.Equal(t, int64((64*256+256+256*256+256+256*10+10)*4), r.params)
	assert.Equal(t, r.params, r.left)
	for _, v := range r.totals[1:] {
		assert.InDelta(t, r.totals[0], v, 1e-4, "every way sums the same losses")
	}
	assert.Greater(t, r.totals[0], 5*2.0, "five losses of about ln 10 each")
}

func TestRunPrintsTables(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run([]string{"-size", "100", "-iterations", "3"}, &out))
	text := out.String()
	for _, want := range []string{
		"the seed's loop: x = randn(100, 100); y = x * 2 (x is 39.06 KiB)",
		"one scope around the loop (the straight translation)",
		"+78.12 KiB", "x made before the loop, a scope per iteration         39.06 KiB   39.06 KiB   39.06 KiB            0 B", "+294.50 KiB",
		"total += loss.Item(), a Go float64",
		"after every loop: 340008 bytes requested, the model's parameters",
	} {
		assert.Contains(t, text, want)
	}

	out.Reset()
	require.NoError(t, run([]string{"-device", "sim", "-iterations", "2"}, &out))
	assert.Contains(t, out.String(), "sim keeps no data")
	assert.NotContains(t, out.String(), "Item", "no values to read on the meta device")
}

func TestCUDAWithoutAGPUIsAClearError(t *testing.T) {
	if _, _, _, err := demo.Open("cuda:0"); err == nil {
		t.Skip("a GPU is present")
	}
	err := run([]string{"-device", "cuda:0"}, io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "use -device cpu, sim or sim-backed")
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-iterations", "1"}, {"-size", "0"}, {"-batch", "0"}, {"-device", "tpu"}, {"extra"}, {"-nosuchflag"},
	} {
		assert.Error(t, run(args, io.Discard), "%v", args)
	}
}
