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

func costsOf(t *testing.T, dev string, args ...string) []cost {
	c, err := parseFlags(args, io.Discard)
	require.NoError(t, err)
	d, a, _, err := demo.Open(dev)
	require.NoError(t, err)
	var costs []cost
	require.NoError(t, demo.Try(d, func() error { costs, err = measureAll(c, d, a); return err }))
	tensortest.RequireEmpty(t, d)
	return costs
}

// PyTorch's sizes (docs/checkpoint.md): what each way keeps after the forward is what PyTorch keeps, to the
// byte (17 F16 activations and 16 weight casts under autocast; 3 boundaries and the
// last segment's 4 activations with checkpointing; both together 3 + 4 F16 activations
// and 4 weight casts); the peak is the end of backward's for every way.
func TestTheSpecsTable(t *testing.T) {
	costs := costsOf(t, "sim")
	const act, half = 4 * mib, 2 * mib
	assert.Equal(t, int64(16*act), costs[0].kept)
	assert.Equal(t, int64(7*act), costs[1].kept)
	assert.Equal(t, int64(17*half+16*half), costs[2].kept)
	assert.Equal(t, int64(3*half+4*half+4*half), costs[3].kept)
	const w, b = 4 * mib, 4 * 1024
	peak := int64(3*act + 16*(w+b) + 4) // an activation, the output's and the input's gradients, every weight's and bias's, the loss
	for _, k := range costs {
		assert.Equal(t, peak, k.peak, k.name)
		assert.Equal(t, int64(16*(w+b)+act), k.grads)
	}
}

func TestPeaksDropWhenActivationsDominate(t *testing.T) {
	costs := costsOf(t, "sim", "-batch", "8192", "-depth", "8", "-segments", "3")
	f32, ckpt, mixed, both := costs[0], costs[1], costs[2], costs[3]
	assert.Less(t, ckpt.peak, f32.peak)
	assert.Less(t, mixed.peak, f32.peak)
	assert.Less(t, both.peak, ckpt.peak)
	assert.Less(t, both.peak, mixed.peak)
	assert.Less(t, both.kept, ckpt.kept)
	assert.Less(t, both.kept, mixed.kept)
}

func TestOnTheCPU(t *testing.T) {
	costs := costsOf(t, "cpu", "-width", "32", "-batch", "64", "-depth", "4", "-segments", "2")
	assert.Less(t, costs[3].kept, costs[0].kept)
}

func TestRunPrintsPyTorchsFigures(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(nil, &out))
	for _, want := range []string{"PyTorch: after forward", "84.06 MiB", "checkpointed + autocast", "22.00 MiB",
		"(PyTorch 2.11 on the H200, docs/checkpoint.md): what the forward keeps is PyTorch's for every way, the peaks at or below PyTorch's\n",
		"autocast alone keeps as much or more: beside its F16 activations, backward needs the F16 casts of the weights (32.00 MiB), and at this size a weight weighs as much as an activation\n"} {
		assert.Contains(t, out.String(), want)
	}
	assert.Contains(t, out.String(), "the peak comes at the end of backward, where the 68.06 MiB of gradients are alive whatever the way")
	out.Reset()
	require.NoError(t, run([]string{"-batch", "2048"}, &out))
	assert.NotContains(t, out.String(), "PyTorch", "PyTorch's figures are for its sizes only")

	// Activations outweigh the gradients: the peaks are not the same for every way, and
	// the example does not say they are.
	out.Reset()
	require.NoError(t, run([]string{"-batch", "8192"}, &out))
	assert.NotContains(t, out.String(), "whatever the way")
	assert.Contains(t, out.String(), "the peaks drop too (checkpointed + autocast 35% of F32's): the activations, kept or recomputed, outweigh the 96.06 MiB of gradients\n")
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-segments", "1"}, {"-segments", "17"}, {"-width", "0"}, {"extra"}} {
		assert.Error(t, run(args, io.Discard), "%v", args)
	}
}
