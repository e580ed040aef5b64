package main

import (
	"bytes"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func runOK(t *testing.T, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	require.NoError(t, run(args, &out), "output:\n%s", out.String())
	return out.String()
}

// tableRow is one printed row: the preparation's device allocations, the training's,
// its small-pool segments, the steps that made any, the peak reserved.
type tableRow struct {
	prep, train, small, steps int
	peak                      string
}

func parseTable(t *testing.T, out string) map[string]tableRow {
	t.Helper()
	re := regexp.MustCompile(`(?m)^(\S.*?)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+([0-9.]+ (?:[KMG]iB|B))\s+[0-9.]+ (?:[KMG]iB|B)$`)
	rows := map[string]tableRow{}
	for _, m := range re.FindAllStringSubmatch(out, -1) {
		n := func(i int) int {
			v, err := strconv.Atoi(m[i])
			require.NoError(t, err)
			return v
		}
		rows[m[1]] = tableRow{n(2), n(3), n(4), n(5), m[6]}
	}
	return rows
}

// The default run on the meta device: the allocator's decisions, exactly.
func TestWarmUpMakesTrainingAllocationFree(t *testing.T) {
	out := runOK(t)
	rows := parseTable(t, out)
	require.Len(t, rows, 6, out)
	assert.Contains(t, out, "the warm-up pass on the meta device reserves 464.0 MiB beyond the parameters")

	assert.Equal(t, tableRow{0, 23, 0, 5, "1.1 GiB"}, rows["none"], "new segments whenever a batch outgrows the cache")
	assert.Equal(t, tableRow{1, 0, 0, 0, "1.0 GiB"}, rows["preallocate 1024 MiB (a guess)"], "a guess large enough: no allocation, twice the memory")
	assert.Equal(t, tableRow{1, 9, 0, 4, "786.0 MiB"}, rows["preallocate 256 MiB (a guess)"], "a guess too small")
	assert.Equal(t, tableRow{6, 8, 0, 4, "782.0 MiB"}, rows["forward+backward only"], "Adam's state, made at the first step, takes the activations' blocks")
	assert.Equal(t, tableRow{8, 0, 0, 0, "502.0 MiB"}, rows["warm-up pass"])
	assert.Equal(t, tableRow{1, 0, 0, 0, "502.0 MiB"}, rows["reserve the measured 464.0 MiB"], "one block of the measured size does as well")

	assert.Contains(t, out, "  none                             1:6 3:2 5:5 12:5 20:5\n")
	assert.Contains(t, out, "  warm-up pass                     none: every step was served from the cache\n")
	assert.Contains(t, out, "without preparation: 23 device allocations in 5 of the 40 steps, 1.1 GiB reserved; after the warm-up pass: 0, 502.0 MiB reserved")
	assert.Contains(t, out, "every device: 0 bytes allocated, 0 reserved")
	assert.NotContains(t, out, "compared bit for bit", "the meta device keeps no values to compare")
}

// With data, the warm-up's throwaway optimizer (learning rate 0) moves no parameter.
func TestWarmUpLeavesTheParameters(t *testing.T) {
	out := runOK(t, "-device", "sim-backed", "-sizes", "4,512,2", "-min-batch", "1024", "-max-batch", "2048", "-steps", "5", "-guess", "8")
	rows := parseTable(t, out)
	require.Len(t, rows, 5, out)
	assert.Equal(t, 1, rows["none"].train)
	assert.Zero(t, rows["warm-up pass"].train)
	assert.Contains(t, out, "no preparation changed a parameter (compared bit for bit)")
}

// Batches whose activations fall under 1 MiB take small-pool blocks, which a warm-up at
// the largest batch (2 MiB activations) does not make: the example counts them apart
// and says so.
func TestWarmUpMissesTheSmallPool(t *testing.T) {
	out := runOK(t, "-sizes", "8,256,4", "-min-batch", "256", "-max-batch", "2048", "-steps", "6", "-guess", "8")
	rows := parseTable(t, out)
	assert.Equal(t, tableRow{1, 1, 1, 1, "24.0 MiB"}, rows["warm-up pass"])
	assert.Contains(t, out, "batch sizes: 1242 583 1131 933 1326 681\n", "583 × 256 × 4 bytes is under 1 MiB")
	assert.Contains(t, out, "the warm-up pass left 1 small-pool segment(s) to training")
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-sizes", "8"}, {"-sizes", "8,0"}, {"-guess", "x"}, {"-min-batch", "0"}, {"-min-batch", "9", "-max-batch", "8"},
		{"-steps", "0"}, {"-device", "tpu"}, {"-device", "cuda:0"}, {"extra"},
	} {
		var out bytes.Buffer
		assert.Error(t, run(args, &out), "%v", args)
	}
}
