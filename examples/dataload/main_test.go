package main

import (
	"bytes"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/examples/internal/demo"
	"github.com/subletml/sublet/examples/internal/toy"
	"github.com/subletml/sublet/tensor/tensortest"
)

// small is an epoch of 40 batches of 16 samples of 64 values: a fraction of a second.
var small = []string{"-samples", "640", "-batch", "16", "-features", "64", "-hidden", "32", "-classes", "4"}

func TestEachWayLoadsEverySampleAndTrainsTheSame(t *testing.T) {
	c, err := parseFlags(small, io.Discard)
	require.NoError(t, err)
	dev, a, hasData, err := demo.Open("cpu")
	require.NoError(t, err)
	ds := images{n: c.samples, seed: c.seed, t: toy.NewTeacher(c.seed, c.features, c.classes)}
	params := int64((64*32 + 32 + 32*4 + 4) * 4)
	var losses []float64
	for _, w := range []way{{"slices", false, 0}, {"prefetched", false, 3}, {"pinned", true, 3}} {
		var o outcome
		require.NoError(t, demo.Try(dev, func() error { o, err = epoch(c, dev, a, ds, w, hasData); return err }))
		assert.Equal(t, 40, o.stats.Batches, w.name)
		assert.Equal(t, 640, o.stats.Samples, w.name)
		assert.Equal(t, int64(640*(64*4+8)), o.stats.HostBytes, w.name)
		assert.False(t, o.async, "cpu copies are synchronous")
		assert.Equal(t, 2*params, o.left, "%s: the parameters and the momentum", w.name)
		losses = append(losses, o.loss)
		if w.pinned {
			assert.Equal(t, int64(1), o.hostAllocs, "one pinned buffer serves every batch: each is free once copied")
		} else {
			assert.Equal(t, int64(80), o.hostAllocs, "two new slices per batch")
		}
	}
	assert.Equal(t, losses[0], losses[1], "prefetching changes nothing but the time")
	assert.Equal(t, losses[0], losses[2], "nor does pinning")
	assert.Less(t, losses[0], 1.2, "the model learns (chance is ln 4 = 1.39)")
	tensortest.RequireEmpty(t, dev)
}

func TestRunPrintsTheComparison(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(small, &out))
	for _, want := range []string{
		"4.12 KiB a batch of 16",
		"Go slices, made by Next", "Go slices, prefetch 2", "pinned, prefetch 2",
		"samples/s", "waiting for data", "mean loss",
		"40 batches, 640 samples, 165.00 KiB collated each way",
		"on cpu the pinned allocator's memory is ordinary pageable memory",
	} {
		assert.Contains(t, out.String(), want)
	}
	out.Reset()
	require.NoError(t, run(append([]string{"-device", "sim"}, small...), &out))
	assert.Contains(t, out.String(), "sim keeps no data")
	assert.NotContains(t, out.String(), "mean loss")
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-prefetch", "0"}, {"-classes", "1"}, {"-lr", "0"}, {"-samples", "0"}, {"-device", "tpu"}, {"extra"},
	} {
		assert.Error(t, run(args, io.Discard), "%v", args)
	}
}
