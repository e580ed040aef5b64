package main

import (
	"bytes"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/device/sim"
	"github.com/subletml/sublet/examples/internal/demo"
)

func moments(t *testing.T, args ...string) (config, []moment) {
	c, err := parseFlags(args, io.Discard)
	require.NoError(t, err)
	dev, a, hasData, err := demo.OpenWith(c.device, sim.Options{Occupied: c.occupied})
	require.NoError(t, err)
	var ms []moment
	require.NoError(t, demo.Try(dev, func() error { ms, err = live(c, dev, a, hasData); return err }))
	require.NoError(t, demo.Drain(a))
	return c, ms
}

func TestMemoryAtEachMoment(t *testing.T) {
	c, ms := moments(t)
	require.Len(t, ms, 6)
	const params = 4 * (4096*4096 + 4096) * 4
	for _, m := range ms {
		assert.Equal(t, int64(h200Occupied), m.others(), "%s: the context's share never moves", m.name)
		assert.Equal(t, sim.DefaultCapacity, m.total)
	}
	opened, made, trained, failed, released, emptied := ms[0], ms[1], ms[2], ms[3], ms[4], ms[5]
	assert.Equal(t, sim.DefaultCapacity-c.occupied, opened.free)
	assert.Equal(t, int64(params), made.allocated)
	assert.Equal(t, int64(4*64<<20+2<<20), made.reserved, "a 64 MiB segment per weight, the biases in one small segment")
	assert.Equal(t, int64(1282<<20), trained.reserved, "measured: Adam's state and the steps' activations beside")
	assert.Equal(t, int64(3*params), trained.allocated, "the parameters and Adam's two moments")
	assert.Equal(t, trained.allocated, failed.allocated, "the failed step left nothing")
	assert.Equal(t, trained.reserved, failed.reserved)
	assert.Zero(t, released.allocated)
	assert.Equal(t, trained.reserved, released.reserved, "released tensors stay in the cache")
	assert.Equal(t, trained.free, released.free, "so the driver's free memory does not move")
	assert.Zero(t, emptied.reserved)
	assert.Equal(t, opened.free, emptied.free, "after EmptyCache the device is as it was")
}

func TestWithoutAContextNothingStays(t *testing.T) {
	_, ms := moments(t, "-occupied", "0", "-width", "256", "-batch", "64")
	last := ms[len(ms)-1]
	assert.Equal(t, last.total, last.free)
}

func TestRunPrints(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run([]string{"-width", "512", "-batch", "256"}, &out))
	for _, want := range []string{"device opened", "a step failed half-way", "model and optimizer released", "EmptyCache",
		"3.85 GiB stays used by others: the context's share"} {
		assert.Contains(t, out.String(), want)
	}
	out.Reset()
	require.NoError(t, run([]string{"-device", "sim-backed", "-occupied", "1024", "-width", "64", "-batch", "8", "-layers", "2"}, &out))
	assert.Contains(t, out.String(), "1.00 KiB stays used by others")
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-occupied", "-1"}, {"-width", "0"}, {"-device", "tpu"}, {"extra"}} {
		assert.Error(t, run(args, io.Discard), "%v", args)
	}
	assert.Error(t, run([]string{"-occupied", "200000000000"}, io.Discard), "more occupied than the device has")
}

// On a GPU others' memory can move while the program runs: the report says what it saw
// instead of "as when it was opened".
func TestReportOnAChangingDevice(t *testing.T) {
	dev, _, _, err := demo.Open("sim")
	require.NoError(t, err)
	const gib = 1 << 30
	ms := []moment{
		{"device opened", 100 * gib, 140 * gib, 0, 0},
		{"model and optimizer released", 98 * gib, 140 * gib, 1 * gib, 0},
		{"EmptyCache", 97 * gib, 140 * gib, 0, 0},
	}
	var out bytes.Buffer
	report(&out, config{}, dev, ms)
	assert.Contains(t, out.String(), "after EmptyCache the device has 97.00 GiB free, 3.00 GiB less than when it was opened (100.00 GiB): others took it meanwhile; 43.00 GiB is used by others\n")
	assert.NotContains(t, out.String(), "as when it was opened")
}
