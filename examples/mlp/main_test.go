package main

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// small is a run that takes a fraction of a second: 600 points, MLP 2-32-32-3.
var small = []string{"-samples", "600", "-epochs", "8", "-hidden", "32,32", "-batch", "16"}

// smallParamBytes is the size of small's parameters: (2·32+32) + (32·32+32) + (32·3+3)
// floats.
const smallParamBytes = (2*32 + 32 + 32*32 + 32 + 32*3 + 3) * 4

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
	out := runOK(t, small...)
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
		out := runOK(t, append([]string{"-optimizer", name}, small...)...)
		requested, params, state := finalBytes(t, out)
		assert.Equal(t, perParam*params, state, name)
		assert.Equal(t, params+state, requested, name)
	}
	out := runOK(t, append([]string{"-optimizer", "sgd", "-momentum", "0"}, small...)...)
	_, _, state := finalBytes(t, out)
	assert.Zero(t, state, "SGD without momentum keeps no state")
}

// progress keeps the losses and accuracies of the epoch lines, without the memory
// figures.
func progress(out string) []string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "epoch") {
			lines = append(lines, l[:strings.Index(l, "allocated")])
		}
	}
	return lines
}

func TestSimulatedDevices(t *testing.T) {
	onCPU := runOK(t, small...)
	backed := runOK(t, append([]string{"-device", "sim-backed"}, small...)...)
	assert.Equal(t, progress(onCPU), progress(backed), "the simulated GPU with data computes what the CPU does, bit for bit")

	meta := runOK(t, append([]string{"-device", "sim"}, small...)...)
	assert.Contains(t, meta, "keeps no data")
	assert.NotContains(t, meta, "final test accuracy")
	requested, params, state := finalBytes(t, meta)
	assert.Equal(t, int64(smallParamBytes), params)
	assert.Equal(t, params+state, requested, "memory is the same without data")
	assert.Contains(t, meta, "0 bytes allocated, 0 reserved")
}

func TestCUDAIsReportedClearly(t *testing.T) {
	var out bytes.Buffer
	err := run(append([]string{"-device", "cuda"}, small...), &out)
	require.Error(t, err, "no CUDA kernels yet, with or without a GPU")
	assert.Contains(t, err.Error(), "use -device cpu, sim or sim-backed")
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
