package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// On the CPU the capture is refused with the reason, the eager run trains, and
// nothing is left; on cuda:0 (scripts/gpu/suite.sh's examples step) the replays must
// give the eager run's losses and parameters bit for bit, or run fails.
func TestRunOnCPU(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run([]string{"-steps", "20"}, &out))
	s := out.String()
	assert.Contains(t, s, "graphs on cpu: MLP 784-256-256-10, batch 64, SGD with momentum, 20 steps after 3 warm-up steps\n")
	assert.Regexp(t, `eager: loss \d\.\d{4} -> \d\.\d{4}, \d+ steps/s, 0\.0 device allocations per step\n`, s)
	assert.Contains(t, s, "graph: tensor: CaptureGraph: cpu cannot record graphs (CUDA devices can); run the step eagerly there: graph capture\n")
	assert.Contains(t, s, "after both runs: tensors hold 0 bytes\n")
}

func TestRunRefusesBadFlags(t *testing.T) {
	var out bytes.Buffer
	require.ErrorContains(t, run([]string{"-steps", "0"}, &out), "-steps 0: want at least 1")
	require.ErrorContains(t, run([]string{"-device", "sim"}, &out), "keeps no data")
}
