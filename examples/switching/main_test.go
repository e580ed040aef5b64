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

func parse(t *testing.T, args ...string) config {
	c, err := parseFlags(args, io.Discard)
	require.NoError(t, err)
	return c
}

func TestGANStepsMemory(t *testing.T) {
	c := parse(t, "-steps", "10")
	dev, a, hasData, err := demo.Open("sim")
	require.NoError(t, err)
	var g ganResult
	require.NoError(t, demo.Try(dev, func() error { g, err = trainGAN(c, dev, a, hasData); return err }))
	tensortest.RequireEmpty(t, dev)

	const h = 1024
	assert.Equal(t, int64((8*h+h+h*h+h+h*2+2)*4), g.paramsG)
	assert.Equal(t, int64((2*h+h+h*h+h+h*2+2)*4), g.paramsD)
	assert.Equal(t, 2*g.paramsG, g.stateG, "Adam keeps two moments")
	assert.Equal(t, 2*g.paramsD, g.stateD)
	held := g.paramsG + g.paramsD + g.stateG + g.stateD
	for _, m := range []moment{g.d, g.g, g.gFrozen} {
		assert.Equal(t, held, m.before, "between steps: parameters and Adam state")
		assert.Equal(t, held, m.after)
	}
	assert.Equal(t, g.paramsD, g.g.backward-g.gFrozen.backward, "the unfrozen discriminator's gradients")

	assert.Zero(t, g.plain.deviceFrees, "never emptied: no segment goes back")
	assert.Equal(t, int64(2), g.plain.deviceAllocs, "the warm-up's segments serve every later step")
	assert.GreaterOrEqual(t, g.emptied.deviceFrees, int64(c.steps/c.every), "each EmptyCache gives back segments the next steps take again")
	assert.Greater(t, g.emptied.deviceAllocs, g.plain.deviceAllocs, "and the steps after it allocate them again")
	assert.Greater(t, g.emptied.driver, g.plain.driver)
}

func TestGANOnTheCPU(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run([]string{"-device", "cpu", "-batch", "16", "-hidden", "8", "-steps", "4", "-report", "2",
		"-a-width", "256", "-b-width", "512"}, &out))
	assert.Contains(t, out.String(), "step    2  discriminator loss ")
	assert.Contains(t, out.String(), "step    4  discriminator loss ")
}

func TestSwapping(t *testing.T) {
	c := parse(t)
	capacity, err := capacityFor(c)
	require.NoError(t, err)
	assert.Equal(t, int64(228*mib), capacity, "B's 170 MiB (parameters, evaluation) and half of A's 118 MiB")
	steps := func(rows []row) []string {
		var s []string
		for _, r := range rows {
			s = append(s, r.step)
		}
		return s
	}
	var sessions [numSessions][]row
	for w := range numSessions {
		sessions[w], err = swap(w, c.a, c.b, capacity)
		require.NoError(t, err, sessionNames[w])
		for _, r := range sessions[w] {
			assert.Equal(t, capacity-r.reserved, r.free, "%s, %s: the device's free memory is what the allocator does not hold", sessionNames[w], r.step)
		}
	}
	kept := sessions[keepA]
	assert.Equal(t, []string{"load A", "evaluate A", "load B", "evaluate B"}, steps(kept))
	require.Error(t, kept[3].err, "with A kept, B cannot run")
	assert.Equal(t, c.a.paramBytes()+c.b.paramBytes(), kept[2].allocated, "both models' parameters fit, B's evaluation does not")

	released := sessions[releaseA]
	assert.Equal(t, []string{"load A", "evaluate A", "release A", "load B", "evaluate B", "release B"}, steps(released))
	assert.Equal(t, released[1].reserved, released[2].reserved, "released, A's blocks stay cached")
	assert.Equal(t, released[2].retries+1, released[3].retries, "loading B, the allocator released them itself")
	for _, r := range released {
		assert.NoError(t, r.err)
	}
	assert.Zero(t, released[5].allocated)

	emptied := sessions[releaseThen]
	assert.Equal(t, []string{"load A", "evaluate A", "release A", "EmptyCache", "load B", "evaluate B", "release B"}, steps(emptied))
	assert.Zero(t, emptied[3].reserved)
	assert.Equal(t, capacity, emptied[3].free)
	assert.Zero(t, emptied[6].retries, "no retry needed after EmptyCache")
	assert.Equal(t, released[4].reserved, emptied[5].reserved, "B ends with the same memory either way")
}

func TestRunPrintsBothParts(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run([]string{"-steps", "10"}, &out))
	for _, want := range []string{
		"part 1: a GAN, generator MLP 8-1024-1024-2",
		"generator step, discriminator frozen",
		"after backward an unfrozen discriminator holds 4.02 MiB more",
		"every 5 generator steps (the seeds)",
		"part 2: interactive model swapping on a simulated GPU of 228.00 MiB",
		"A kept (never released):", "out of memory", "A released, then EmptyCache:",
	} {
		assert.Contains(t, out.String(), want)
	}
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-batch", "0"}, {"-every", "0"}, {"-lr", "0"}, {"-a-width", "0"}, {"-capacity", "-1"}, {"-device", "tpu"}, {"extra"},
	} {
		assert.Error(t, run(args, io.Discard), "%v", args)
	}
}
