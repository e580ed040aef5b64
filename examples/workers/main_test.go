package main

import (
	"bytes"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Both ways answer every request with the same logits and leave each device holding the
// parameters alone between requests and nothing after (serve checks both and fails
// otherwise); the throughput is printed, not asserted (timing belongs to benchmarks).
func TestBothWaysAnswerAlike(t *testing.T) {
	for _, dev := range []string{"cpu", "sim-backed"} {
		var out bytes.Buffer
		require.NoError(t, run([]string{"-device", dev, "-workers", "3", "-requests", "50"}, &out), dev)
		assert.Contains(t, out.String(), "3 workers, 50 requests each of 4 rows", dev)
		assert.Contains(t, out.String(), "one device           1", dev)
		assert.Contains(t, out.String(), "a device each        3", dev)
		assert.Contains(t, out.String(), "27.04 KiB", dev) // (32·64 + 64 + 64·64 + 64 + 64·10 + 10) float32
		assert.Contains(t, out.String(), "the same logits both ways, bit for bit", dev)
	}
}

// serve itself: each worker's logits, the parameters each device held, every device
// drained.
func TestServe(t *testing.T) {
	c, err := parseFlags([]string{"-workers", "2", "-requests", "3", "-batch", "2", "-sizes", "3,5,2"}, io.Discard)
	require.NoError(t, err)
	inputs := [][]float32{{1, 2, 3, -1, -2, -3}, {0, 1, 0, 1, 0, 1}}
	one, err := serve(c, 1, inputs)
	require.NoError(t, err)
	each, err := serve(c, 2, inputs)
	require.NoError(t, err)
	require.Len(t, one.logits, 2)
	require.Len(t, one.logits[0], 4, "two rows of two classes")
	assert.Equal(t, one.logits, each.logits)
	assert.NotEqual(t, one.logits[0], one.logits[1], "different requests, different answers")
	const params = (3*5 + 5 + 5*2 + 2) * 4
	assert.Equal(t, []int64{params}, one.params)
	assert.Equal(t, []int64{params, params}, each.params)
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-workers", "0"}, {"-requests", "0"}, {"-batch", "0"}, {"-sizes", "3"}} {
		_, err := parseFlags(args, io.Discard)
		assert.Error(t, err, "%v", args)
	}
	require.ErrorContains(t, run([]string{"-device", "sim"}, io.Discard), "keeps no data")
}
