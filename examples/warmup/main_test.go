package main

import (
	"bytes"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const mibs = 1 << 20

func runOK(t *testing.T, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	require.NoError(t, run(args, &out), "output:\n%s", out.String())
	return out.String()
}

// summary is one row as the table gives it: the preparation's device allocations, the
// training's, its small-pool segments, the steps that made any, the peak reserved.
type summary struct {
	prep, train, small int64
	steps              int
	peak               int64
}

// rowsOf runs every strategy of args as run does and returns what the warm-up pass
// measured on the meta device, the rows by name and the report run prints of them.
func rowsOf(t *testing.T, args ...string) (int64, map[string]summary, string) {
	t.Helper()
	c, err := parseFlags(args, io.Discard)
	require.NoError(t, err)
	measured, err := c.measureWarmUp()
	require.NoError(t, err)
	rows := map[string]summary{}
	var all []row
	for _, s := range c.strategies(measured) {
		r, err := c.train(s, c.batches())
		require.NoError(t, err, s.name)
		assert.Equal(t, r.peak, r.end, "%s: nothing is released during training", s.name)
		if r.checked {
			assert.True(t, r.unchanged, "%s changed the parameters", s.name)
		}
		rows[r.name] = summary{r.prepAllocs, r.trainAllocs(), r.small, countNonZero(r.perStep), r.peak}
		all = append(all, r)
	}
	var out bytes.Buffer
	report(&out, all)
	return measured, rows, out.String()
}

// The default run on the meta device: the allocator's decisions, exactly. The model
// (512-2048-2048-2048-10) and Adam's state take 36.10 MiB each time over, in segments of
// their own.
func TestWarmUpMakesTrainingAllocationFree(t *testing.T) {
	measured, rows, _ := rowsOf(t)
	require.Len(t, rows, 6)
	assert.Equal(t, int64(464*mibs), measured)
	assert.Equal(t, summary{0, 23, 0, 5, 1170 * mibs}, rows["none"], "new segments whenever a batch outgrows the cache")
	assert.Equal(t, summary{1, 0, 0, 0, 1062 * mibs}, rows["preallocate 1024 MiB (a guess)"], "a guess large enough: no allocation, twice the memory")
	// What a guess too small costs depends on every block the steps ask for: a Linear
	// and its ReLU are one op, which makes no pre-activation for later requests to
	// reuse, so the guess splits differently (11 allocations, 918 MiB).
	assert.Equal(t, summary{1, 11, 0, 4, 918 * mibs}, rows["preallocate 256 MiB (a guess)"], "a guess too small")
	assert.Equal(t, summary{6, 8, 0, 4, 782 * mibs}, rows["forward+backward only"], "Adam's state, made at the first step, takes the activations' blocks")
	assert.Equal(t, summary{8, 0, 0, 0, 502 * mibs}, rows["warm-up pass"])
	assert.Equal(t, summary{1, 0, 0, 0, 502 * mibs}, rows["reserve the measured 464.00 MiB"], "one block of the measured size does as well")
}

func TestRunPrintsTheTable(t *testing.T) {
	out := runOK(t)
	assert.Contains(t, out, "the warm-up pass on the meta device reserves 464.00 MiB beyond the parameters\n")
	assert.Contains(t, out, "\nnone                                      0               23           0               5       1.14 GiB        1.14 GiB\n")
	assert.Contains(t, out, "\nwarm-up pass                              8                0           0               0     502.00 MiB      502.00 MiB\n")
	assert.Contains(t, out, "  none                             1:6 3:2 5:5 12:5 20:5\n")
	assert.Contains(t, out, "  warm-up pass                     none: every step was served from the cache\n")
	assert.Contains(t, out, "without preparation: 23 device allocations in 5 of the 40 steps, 1.14 GiB reserved; after the warm-up pass: 0, 502.00 MiB reserved")
	assert.Contains(t, out, "every device: 0 bytes allocated, 0 reserved")
	assert.NotContains(t, out, "compared bit for bit", "the meta device keeps no values to compare")
}

// With data, the warm-up's throwaway optimizer (learning rate 0) moves no parameter.
func TestWarmUpLeavesTheParameters(t *testing.T) {
	args := []string{"-device", "sim-backed", "-sizes", "4,512,2", "-min-batch", "1024", "-max-batch", "2048", "-steps", "5", "-guess", "8"}
	_, rows, out := rowsOf(t, args...)
	require.Len(t, rows, 5)
	assert.Equal(t, int64(1), rows["none"].train)
	assert.Zero(t, rows["warm-up pass"].train)
	assert.Contains(t, out, "no preparation changed a parameter (compared bit for bit)")
}

// Batches whose activations fall under 1 MiB take small-pool blocks, which a warm-up at
// the largest batch (2 MiB activations) does not make: the example counts them apart
// and says so.
func TestWarmUpMissesTheSmallPool(t *testing.T) {
	args := []string{"-sizes", "8,256,4", "-min-batch", "256", "-max-batch", "2048", "-steps", "6", "-guess", "8"}
	_, rows, out := rowsOf(t, args...)
	assert.Equal(t, summary{1, 1, 1, 1, 24 * mibs}, rows["warm-up pass"])
	c, err := parseFlags(args, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, []int{1242, 583, 1131, 933, 1326, 681}, c.batches(), "583 × 256 × 4 bytes is under 1 MiB")
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
