package main

import (
	"bytes"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	cudadev "github.com/subletml/sublet/device/cuda"
	"github.com/subletml/sublet/device/named"
	"github.com/subletml/sublet/internal/units"
	"github.com/subletml/sublet/kernels/cuda"
	"github.com/subletml/sublet/tensor/tensortest"
)

// small is a run that takes a fraction of a second: 600 points, MLP 2-32-32-3.
var small = []string{"-samples", "600", "-epochs", "8", "-hidden", "32,32", "-batch", "16"}

// smallParamBytes is the size of small's parameters: (2·32+32) + (32·32+32) + (32·3+3)
// floats.
const smallParamBytes = (2*32 + 32 + 32*32 + 32 + 32*3 + 3) * 4

// quick is a run of 2 epochs of 5 steps, MLP 2-16-16-3, for what does not need the
// model to learn; quickParamBytes its parameters' size.
var quick = []string{"-samples", "200", "-epochs", "2", "-hidden", "16,16", "-batch", "32"}

const quickParamBytes = (2*16 + 16 + 16*16 + 16 + 16*3 + 3) * 4

func runOK(t *testing.T, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	require.NoError(t, run(args, &out), "output:\n%s", out.String())
	return out.String()
}

// finalBytes parses the report's line on what is left after training.
func finalBytes(t *testing.T, out string) (requested, params, state int64) {
	t.Helper()
	m := regexp.MustCompile(`after training: (\d+) bytes requested = parameters (\d+) \+ \w+ state (\d+)`).FindStringSubmatch(out)
	require.NotNil(t, m, "no final bytes line in:\n%s", out)
	v := make([]int64, 3)
	for i := range v {
		n, err := strconv.ParseInt(m[i+1], 10, 64)
		require.NoError(t, err)
		v[i] = n
	}
	return v[0], v[1], v[2]
}

func TestRunLearnsAndReturnsMemory(t *testing.T) {
	out := runOK(t, append([]string{"-device", "cpu"}, small...)...) // not the GPU a GPU machine defaults to
	m := regexp.MustCompile(`final test accuracy ([0-9.]+) \(chance 0\.333\)`).FindStringSubmatch(out)
	require.NotNil(t, m, out)
	acc, err := strconv.ParseFloat(m[1], 64)
	require.NoError(t, err)
	assert.Greater(t, acc, 0.85, "well above chance (1/3)")
	assert.Equal(t, 8, strings.Count(out, "\nepoch "), "one progress line per epoch")

	requested, params, state := finalBytes(t, out)
	assert.Equal(t, int64(smallParamBytes), params)
	assert.Equal(t, 2*params, state, "Adam keeps two moments per parameter")
	assert.Equal(t, params+state, requested, "after training only the parameters and the optimizer state are left")
	assert.Contains(t, out, "sublet memory summary, device cpu")
	assert.Contains(t, out, "leak check: every tensor handle was released")
	assert.Contains(t, out, "0 bytes allocated, 0 reserved")
}

func TestRunWithEachOptimizer(t *testing.T) {
	for name, perParam := range map[string]int64{"sgd": 1, "adamw": 2} {
		out := runOK(t, append([]string{"-optimizer", name}, quick...)...)
		requested, params, state := finalBytes(t, out)
		assert.Equal(t, int64(quickParamBytes), params, name)
		assert.Equal(t, perParam*params, state, name)
		assert.Equal(t, params+state, requested, name)
	}
	out := runOK(t, append([]string{"-optimizer", "sgd", "-momentum", "0"}, quick...)...)
	_, _, state := finalBytes(t, out)
	assert.Zero(t, state, "SGD without momentum keeps no state")
}

// progress keeps the losses and accuracies of the epoch lines, without the memory
// figures; memory keeps the memory figures.
func progress(out string) []string { return epochLines(out, true) }

func memory(out string) []string { return epochLines(out, false) }

func epochLines(out string, losses bool) []string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "epoch") {
			i := strings.Index(l, "allocated")
			if losses {
				lines = append(lines, l[:i])
			} else {
				lines = append(lines, l[i:])
			}
		}
	}
	return lines
}

func TestSimulatedDevices(t *testing.T) {
	onCPU := runOK(t, append([]string{"-device", "cpu"}, quick...)...)
	backed := runOK(t, append([]string{"-device", "sim-backed"}, quick...)...)
	assert.Len(t, progress(onCPU), 2)
	assert.Equal(t, progress(onCPU), progress(backed), "the simulated GPU with data computes what the CPU does, bit for bit")

	meta := runOK(t, append([]string{"-device", "sim"}, quick...)...)
	assert.Contains(t, meta, "keeps no data")
	assert.NotContains(t, meta, "final test accuracy")
	requested, params, state := finalBytes(t, meta)
	assert.Equal(t, int64(quickParamBytes), params)
	assert.Equal(t, params+state, requested, "memory is the same without data")
	// After each epoch the parameters and Adam's two moments, each block rounded up to
	// 512 bytes: 3 × (512 + 512 + 1024 + 512 + 512 + 512) bytes; the peak is a step's.
	assert.Equal(t, []string{"allocated 10.50 KiB (peak 21.50 KiB)  reserved 2.00 MiB", "allocated 10.50 KiB (peak 21.50 KiB)  reserved 2.00 MiB"}, memory(meta))
	assert.Equal(t, memory(meta), memory(onCPU), "the meta device allocates what the CPU does")
	assert.Equal(t, memory(meta), memory(backed))
	assert.Contains(t, meta, "0 bytes allocated, 0 reserved")
}

// TestCUDA trains on cuda:0 where there is a GPU, as well as on the CPU, with the
// memory at the end the parameters and the optimizer state (the cuBLAS workspace the
// kernels keep is named on a line of its own, and given back with the rest); elsewhere
// it is a clear error.
func TestCUDA(t *testing.T) {
	var out bytes.Buffer
	err := run(append([]string{"-device", "cuda"}, small...), &out)
	d, gpuErr := named.Open("cuda:0")
	if gpuErr != nil {
		require.Error(t, err)
		assert.Contains(t, err.Error(), "use -device cpu, sim or sim-backed")
		return
	}
	require.NoError(t, err, out.String())
	m := regexp.MustCompile(`final test accuracy ([0-9.]+)`).FindStringSubmatch(out.String())
	require.NotNil(t, m, out.String())
	acc, err := strconv.ParseFloat(m[1], 64)
	require.NoError(t, err)
	assert.Greater(t, acc, 0.85, "well above chance (1/3)")
	p := d.(*cudadev.Device).Properties()
	if ws := cuda.WorkspaceBytes(os.Getenv(cuda.WorkspaceEnv), p.ComputeMajor, p.ComputeMinor); ws > 0 {
		assert.Contains(t, out.String(), "the kernels keep "+units.Bytes(ws)+" of the allocator's memory for themselves (the cuBLAS workspace)")
	}
	requested, params, state := finalBytes(t, out.String())
	assert.Equal(t, params+state, requested)
	tensortest.RequireEmpty(t, d)
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-hidden", "32,x"}, {"-hidden", "0"}, {"-optimizer", "rmsprop"}, {"-epochs", "0"},
		{"-dropout", "1"}, {"-lr", "-1"}, {"-device", "tpu"}, {"extra"}, {"-nosuchflag"},
	} {
		var out bytes.Buffer
		assert.Error(t, run(args, &out), "%v", args)
	}
}
