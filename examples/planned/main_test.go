package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc"
)

// Trained for 1,000 steps on the CPU and on the simulated GPU with data, each model
// under the planned policy ends with parameters bit for bit those of PyTorch's policy;
// within a few steps its plan serves every step with reserved memory flat and no device
// allocation or free to the end; nothing stays allocated.
func TestPlannedTrainsAsPyTorchWithFlatMemory(t *testing.T) {
	for _, dev := range []string{"cpu", "sim-backed"} {
		t.Run(dev, func(t *testing.T) {
			t.Parallel()
			for _, name := range models {
				py, err := train(dev, name, 1, alloc.PolicyPyTorch, raceSteps)
				require.NoError(t, err)
				pl, err := train(dev, name, 1, alloc.PolicyPlanned, raceSteps)
				require.NoError(t, err)
				require.True(t, pl.hasData)
				require.Equal(t, py.params, pl.params, "%s: the same parameters, bit for bit", name)
				require.Equal(t, py.lastLoss, pl.lastLoss, name)
				requirePlanned(t, pl, py)
			}
		})
	}
}

// At 32 times the width on the simulated H200 (memory only), the blocks are those of a
// real model (MiB-sized activations and weights): the same holds, and the planned
// policy reserves no more than PyTorch's.
func TestPlannedAtScaleOnSim(t *testing.T) {
	for _, name := range models {
		py, err := train("sim", name, 32, alloc.PolicyPyTorch, raceSteps)
		require.NoError(t, err)
		pl, err := train("sim", name, 32, alloc.PolicyPlanned, raceSteps)
		require.NoError(t, err)
		requirePlanned(t, pl, py)
		require.LessOrEqual(t, pl.peakReserved, py.peakReserved, name)
		require.Greater(t, pl.peakAllocated, int64(16<<20), "%s: a model of real size", name)
	}
}

// requirePlanned checks the planned run pl against PyTorch's policy's run py of the
// same model.
func requirePlanned(t *testing.T, pl, py result) {
	t.Helper()
	require.GreaterOrEqual(t, pl.flatFrom, 0, "%s: flat to the end", pl.model)
	require.LessOrEqual(t, pl.flatFrom, 5, "%s: the plan serves the steps from the first few on", pl.model)
	require.Greater(t, float64(pl.served), 0.95*float64(pl.allocs), "%s: the plans serve nearly every allocation", pl.model)
	require.Zero(t, pl.leftover, pl.model)
	require.Zero(t, py.leftover, py.model)
	require.Equal(t, py.peakAllocated, pl.peakAllocated, "%s: the same blocks at the peak", pl.model)
}

func TestRunPrintsTheTable(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run([]string{"-steps", "20"}, &out))
	s := out.String()
	require.Contains(t, s, "20 steps of each model at scale 1 on cpu")
	require.Regexp(t, `mlp +planned +\d+ .* bit-identical\n`, s)
	require.Regexp(t, `transformer +planned +\d+ .* bit-identical\n`, s)
	require.Error(t, run([]string{"-steps", "1"}, &out))
	require.Error(t, run([]string{"-device", "cuda"}, &out))
}
