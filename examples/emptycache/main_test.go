package main

import (
	"bytes"
	"io"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/device/named"
)

// quick is the default model (1024-4096×5-1000, batch 256) over 2 epochs of 30 batches:
// under a second on the meta device.
var quick = []string{"-steps", "30", "-every", "10"}

func runOK(t *testing.T, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	require.NoError(t, run(args, &out), "output:\n%s", out.String())
	return out.String()
}

// tableRow is one printed row of the table.
type tableRow struct {
	rate, ratio, allocs, driverMS float64
	peak, low                     string
}

func parseTable(t *testing.T, out string) map[string]tableRow {
	t.Helper()
	re := regexp.MustCompile(`(?m)^(never|every epoch \(\d+ batches\)|every \d+ batches|every batch)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+[0-9.]+\s+([0-9.]+ [KMG]iB)\s+([0-9.]+ [KMG]iB)$`)
	rows := map[string]tableRow{}
	for _, m := range re.FindAllStringSubmatch(out, -1) {
		f := func(i int) float64 {
			v, err := strconv.ParseFloat(m[i], 64)
			require.NoError(t, err)
			return v
		}
		rows[m[1]] = tableRow{f(2), f(3), f(4), f(5), m[6], m[7]}
	}
	require.Len(t, rows, 4, out)
	return rows
}

// On the meta device the figures are the cost model's, exactly: the step's compute and
// the driver calls the cadence causes.
func TestTheSeedsTable(t *testing.T) {
	out := runOK(t, quick...)
	rows := parseTable(t, out)
	assert.Contains(t, out, "first step (fills the cache, the same for every cadence): 19 device allocations")

	never, epoch, every10, every1 := rows["never"], rows["every epoch (30 batches)"], rows["every 10 batches"], rows["every batch"]
	assert.Equal(t, 1.0, never.ratio)
	assert.Zero(t, never.allocs, "a warm cache serves every later step")
	assert.Zero(t, never.driverMS)
	assert.Equal(t, never.peak, never.low, "reserved memory stays put")

	assert.Equal(t, 7.0, every1.allocs, "the 7 segments of a step, taken again after every EmptyCache")
	// Each cuMemAlloc+cuMemFree pair of the H200's cost model is 58 µs up to 20 MiB
	// (and more above): 7 pairs cost at least 0.406 ms.
	assert.Greater(t, every1.driverMS, 7*0.058)
	compute := 115.8e9 / 51.3e12 * 1e3 // ms
	assert.InDelta(t, compute/(compute+every1.driverMS), every1.ratio, 2e-4, "the ratio is compute over compute + driver time")
	assert.InDelta(t, 1000/(compute+every1.driverMS), every1.rate, 0.1)

	// Less often, less cost: the order of the seed's table.
	assert.Less(t, every1.ratio, every10.ratio)
	assert.Less(t, every10.ratio, epoch.ratio)
	assert.Less(t, epoch.ratio, 1.0)
	assert.Equal(t, 0.59, every10.allocs, "5 refills of 7 segments over the 59 steps after the first")
	assert.Equal(t, "872.00 MiB", every1.low, "after an EmptyCache only the parameters' and Adam's segments stay")
	assert.Equal(t, "872.00 MiB", epoch.low)

	assert.Regexp(t, `emptying the cache after every batch costs 7\.00 cuMemAlloc and 7\.00 cuMemFree calls a step`, out)
	assert.Contains(t, out, "after training, every cadence: 905047776 bytes requested = parameters 301682592 + Adam state 603365184")
	assert.Contains(t, out, "after releasing the model and the optimizer and emptying the cache: 0 bytes allocated, 0 reserved, on every cadence's device")
}

// Each cadence's memory and driver calls, to the byte and the call: the first step takes
// 19 segments; never emptied, the cache serves every later step at 1168 MiB reserved;
// each EmptyCache gives back the 7 segments a step's activations and gradients took
// (keeping the 872 MiB of the parameters' and Adam's), which the next step takes again,
// a little more at the peak (1184 MiB) for the new layout.
func TestEachCadenceExactly(t *testing.T) {
	c, err := parseFlags(quick, io.Discard)
	require.NoError(t, err)
	type counts struct{ first, allocs, frees, peak, low int64 }
	want := []counts{
		{19, 0, 0, 1168 << 20, 1168 << 20},
		{19, 7, 13, 1184 << 20, 872 << 20},
		{19, 35, 41, 1184 << 20, 872 << 20},
		{19, 7 * 59, 7 * 59, 1184 << 20, 872 << 20},
	}
	for i, cd := range c.cadences() {
		r, err := train(c, cd)
		require.NoError(t, err, cd.name)
		assert.Equal(t, 59, r.steps)
		assert.Equal(t, want[i], counts{r.firstAllocs, r.allocs, r.frees, r.peak, r.low}, cd.name)
		assert.Equal(t, 133196335*time.Nanosecond, r.compute, "59 steps of 115.85 GFLOP at 51.3 TFLOP/s")
		assert.Equal(t, r.params+r.state, r.left)
	}
}

// On the CPU the ops compute and the time is the wall clock's; a model this small lives
// in segments that also hold its parameters, and the example says EmptyCache has
// nothing to release.
func TestOnTheCPU(t *testing.T) {
	out := runOK(t, "-device", "cpu", "-sizes", "16,32,4", "-batch", "8", "-steps", "6", "-every", "3", "-epochs", "1")
	rows := parseTable(t, out)
	for name, r := range rows {
		assert.Zero(t, r.allocs, name)
		assert.Positive(t, r.rate, name)
	}
	assert.Contains(t, out, "the wall clock's")
	assert.Contains(t, out, "EmptyCache has nothing to release")
}

func TestComputeFlag(t *testing.T) {
	out := runOK(t, append([]string{"-compute", "1ms"}, quick...)...)
	assert.Contains(t, out, "simulated compute 1ms")
	c, err := parseFlags([]string{"-compute", "auto"}, &bytes.Buffer{})
	require.NoError(t, err)
	assert.True(t, c.auto)
	c, err = parseFlags([]string{"-compute", "0s"}, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, time.Duration(0), c.compute)
	assert.False(t, c.auto)
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-sizes", "8"}, {"-sizes", "8,x"}, {"-batch", "0"}, {"-epochs", "0"}, {"-every", "1"},
		{"-every", "100", "-steps", "100"}, {"-compute", "-1ms"}, {"-compute", "soon"},
		{"-device", "tpu"}, {"extra"},
	} {
		var out bytes.Buffer
		assert.Error(t, run(args, &out), "%v", args)
	}
}

// TestGPU: on a GPU each cadence runs on a fresh Device of cuda:0, closed after it;
// without one, -device cuda:0 fails before anything is printed.
func TestGPU(t *testing.T) {
	var out bytes.Buffer
	args := []string{"-device", "cuda:0", "-sizes", "16,32,4", "-batch", "8", "-steps", "6", "-every", "3", "-epochs", "1"}
	err := run(args, &out)
	if _, gpuErr := named.Open("cuda:0"); gpuErr != nil {
		require.Error(t, err)
		assert.Empty(t, out.String(), "nothing ran")
		return
	}
	require.NoError(t, err, out.String())
	assert.Contains(t, out.String(), "every batch")
}
