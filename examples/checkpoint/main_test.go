package main

import (
	"bytes"
	"io"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/device/named"
)

// small trains in half a second: 8 blocks of width 32, batch 16384 (2 MiB
// activations, so the allocator's 2 MiB granularity does not hide the difference), 3
// steps of Adam.
var small = []string{"-depth", "8", "-width", "32", "-batch", "16384", "-steps", "3", "-lr", "0.02"}

func runOK(t *testing.T, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	require.NoError(t, run(args, &out), "output:\n%s", out.String())
	return out.String()
}

func mibOf(t *testing.T, s string) float64 {
	v, err := strconv.ParseFloat(s, 64)
	require.NoError(t, err)
	return v
}

func TestOutOfMemoryWithoutAndTrainsWith(t *testing.T) {
	out := runOK(t, small...)
	assert.Contains(t, out, "3 segments over the 9 layers: [0,3) checkpointed [3,6) checkpointed [6,9) plain")

	m := regexp.MustCompile(`without checkpointing: peak ([0-9.]+) MiB allocated.*\n\s+with 3 segments:\s+peak ([0-9.]+) MiB allocated, ([0-9.]+) MiB reserved`).FindStringSubmatch(out)
	require.NotNil(t, m, out)
	plain, ckpt := mibOf(t, m[1]), mibOf(t, m[2])
	assert.Less(t, ckpt, 0.6*plain, "checkpointing saves most of the activations")

	m = regexp.MustCompile(`a simulated GPU of ([0-9.]+) MiB`).FindStringSubmatch(out)
	require.NotNil(t, m, out)
	capacity := mibOf(t, m[1])
	assert.Less(t, capacity, plain)

	assert.Contains(t, out, "without checkpointing the first step runs out of memory")
	assert.Contains(t, out, "alloc: out of memory on sim.")
	assert.Regexp(t, `\n\s+hint: `, out, "the OOMError's hint is printed")

	m = regexp.MustCompile(`loss ([0-9.]+) → ([0-9.]+) in 3 steps; peak ([0-9.]+) MiB allocated of ([0-9.]+) MiB`).FindStringSubmatch(out)
	require.NotNil(t, m, out)
	assert.Less(t, mibOf(t, m[2]), 0.8*mibOf(t, m[1]), "the loss goes down")
	assert.Equal(t, ckpt, mibOf(t, m[3]), "the real run peaks where the meta device said")
	assert.LessOrEqual(t, mibOf(t, m[3]), capacity)

	assert.Regexp(t, `after training: (\d+) bytes requested = parameters \d+ \+ batch \d+ \+ Adam state \d+\n$`, out)
}

// TestOnTheGPU runs the example on cuda:0 where there is a GPU, capped by the memory
// fraction: the plain step runs out of memory, the checkpointed steps train and peak
// where the meta device said.
func TestOnTheGPU(t *testing.T) {
	if _, err := named.Open("cuda:0"); err != nil {
		t.Skip(err)
	}
	out := runOK(t, append([]string{"-device", "cuda:0"}, small...)...)
	assert.Contains(t, out, "capped at")
	assert.Contains(t, out, "without checkpointing the first step runs out of memory")
	m := regexp.MustCompile(`with 3 segments:\s+peak ([0-9.]+) MiB allocated`).FindStringSubmatch(out)
	require.NotNil(t, m, out)
	ckpt := mibOf(t, m[1])
	m = regexp.MustCompile(`loss ([0-9.]+) → ([0-9.]+) in 3 steps; peak ([0-9.]+) MiB allocated`).FindStringSubmatch(out)
	require.NotNil(t, m, out)
	assert.Less(t, mibOf(t, m[2]), 0.8*mibOf(t, m[1]), "the loss goes down")
	t.Logf("peak %s MiB on the GPU (the workspace included), %v MiB on the meta device", m[3], ckpt)
	assert.Regexp(t, `after training: (\d+) bytes requested = parameters \d+ \+ batch \d+ \+ Adam state \d+\n$`, out)
}

// The peaks of two steps on the meta device, to the byte (measured; the meta device
// allocates what a device with data does): without checkpointing 19 blocks of an
// activation's size (2 MiB) at once beside 496.50 KiB of smaller ones (parameters,
// gradients, Adam's state, labels, logits); with 3 segments 10 beside 505.50 KiB.
func TestPeaksOnTheMetaDevice(t *testing.T) {
	c, err := parseFlags(small, io.Discard)
	require.NoError(t, err)
	plain, err := measure(c, 1)
	require.NoError(t, err)
	ckpt, err := measure(c, c.segments)
	require.NoError(t, err)
	const act = 2 << 20
	assert.Equal(t, usage{allocated: 19*act + 508416, reserved: 42 << 20}, plain)
	assert.Equal(t, usage{allocated: 10*act + 517632, reserved: 22 << 20}, ckpt)
}

func TestCapacityThatFitsBoth(t *testing.T) {
	var out bytes.Buffer
	err := run(append([]string{"-capacity", "512"}, small...), &out)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the plain step fit in 512.00 MiB")
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-depth", "0"}, {"-segments", "1"}, {"-segments", "18"}, {"-lr", "0"}, {"-capacity", "-1"},
		{"-classes", "1"}, {"extra"}, {"-nosuchflag"},
	} {
		var out bytes.Buffer
		assert.Error(t, run(args, &out), "%v", args)
	}
}

// With small activations the checkpointed steps reserve as much as the plain ones
// allocate (the allocator's 2 MiB segments hide the difference): no capacity between
// them exists, and the example says what to change instead of training.
func TestSavingTooLittleToChooseACapacity(t *testing.T) {
	var out bytes.Buffer
	err := run([]string{"-depth", "3", "-width", "8", "-batch", "4", "-steps", "1"}, &out)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "checkpointing saves too little at this size")
	assert.Contains(t, err.Error(), "use a larger -batch or -depth, or set -capacity")
	assert.NotContains(t, out.String(), "device: sim", "nothing was trained")
}
