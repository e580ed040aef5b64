package alloc

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/cpu"
)

// summaryGolden was compared line by line with torch.cuda.memory_summary() run (as
// Python) on the same StatsMap: only the title line differs. It is the summary of a
// CUDA device; TestSummaryNamesTheDeviceKind checks the other kinds.
const summaryGolden = `
|===========================================================================|
|                  sublet memory summary, device sim                        |
|---------------------------------------------------------------------------|
|            CUDA OOMs: 0            |        cudaMalloc retries: 0         |
|===========================================================================|
|        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  |
|---------------------------------------------------------------------------|
| Allocated memory      |    800 MiB |    803 MiB |    803 MiB |   3072 KiB |
|       from large pool |    800 MiB |    803 MiB |    803 MiB |   3072 KiB |
|       from small pool |      0 MiB |      0 MiB |      0 MiB |      0 KiB |
|---------------------------------------------------------------------------|
| Active memory         |    800 MiB |    803 MiB |    803 MiB |   3072 KiB |
|       from large pool |    800 MiB |    803 MiB |    803 MiB |   3072 KiB |
|       from small pool |      0 MiB |      0 MiB |      0 MiB |      0 KiB |
|---------------------------------------------------------------------------|
| Requested memory      |    800 MiB |    803 MiB |    803 MiB |   3072 KiB |
|       from large pool |    800 MiB |    803 MiB |    803 MiB |   3072 KiB |
|       from small pool |      0 MiB |      0 MiB |      0 MiB |      0 KiB |
|---------------------------------------------------------------------------|
| GPU reserved memory   |    822 MiB |    822 MiB |    822 MiB |      0 B   |
|       from large pool |    820 MiB |    820 MiB |    820 MiB |      0 B   |
|       from small pool |      2 MiB |      2 MiB |      2 MiB |      0 B   |
|---------------------------------------------------------------------------|
| Non-releasable memory |   2047 KiB |  19455 KiB |  19455 KiB |  17408 KiB |
|       from large pool |      0 KiB |  17408 KiB |  17408 KiB |  17408 KiB |
|       from small pool |   2047 KiB |   2047 KiB |   2047 KiB |      0 KiB |
|---------------------------------------------------------------------------|
| Allocations           |       2    |       3    |       3    |       1    |
|       from large pool |       1    |       2    |       2    |       1    |
|       from small pool |       1    |       1    |       1    |       0    |
|---------------------------------------------------------------------------|
| Active allocs         |       2    |       3    |       3    |       1    |
|       from large pool |       1    |       2    |       2    |       1    |
|       from small pool |       1    |       1    |       1    |       0    |
|---------------------------------------------------------------------------|
| GPU reserved segments |       3    |       3    |       3    |       0    |
|       from large pool |       2    |       2    |       2    |       0    |
|       from small pool |       1    |       1    |       1    |       0    |
|---------------------------------------------------------------------------|
| Non-releasable allocs |       1    |       2    |       2    |       1    |
|       from large pool |       0    |       1    |       1    |       1    |
|       from small pool |       1    |       1    |       1    |       0    |
|---------------------------------------------------------------------------|
| Oversize allocations  |       1    |       1    |       1    |       0    |
|---------------------------------------------------------------------------|
| Oversize GPU segments |       1    |       1    |       1    |       0    |
|===========================================================================|
`

func TestSummaryLayout(t *testing.T) {
	a, d := newAlloc(t, 0, Config{MaxSplitSize: 100 * MiB})
	p := mustAlloc(t, a, 1000, 0)
	q := mustAlloc(t, a, 3*MiB, 0)
	r := mustAlloc(t, a, 800*MiB, 0)
	mustFree(t, a, q)
	st := a.Stats()
	got := formatSummary(&st, "sim", device.CUDA, false)
	assert.Equal(t, strings.TrimPrefix(summaryGolden, "\n"), got)
	for _, line := range strings.Split(strings.TrimSuffix(got, "\n"), "\n") {
		assert.Len(t, line, 77, "every line is 75 wide inside its bars: %q", line)
	}
	abbr := formatSummary(&st, "sim", device.CUDA, true)
	assert.NotContains(t, abbr, "from large pool")
	assert.Equal(t, strings.Count(got, "\n")-2*9, strings.Count(abbr, "\n"))
	mustFree(t, a, p, r)
	requireDrained(t, a, d)
}

func TestSummaryNumberFormats(t *testing.T) {
	assert.Equal(t, "     0 B  ", formatSize(0, 0))
	assert.Equal(t, "786431 B  ", formatSize(786431, 786431), "just below 768 KiB stays in bytes")
	assert.Equal(t, "   768 KiB", formatSize(786432, 786432))
	assert.Equal(t, "     0 MiB", formatSize(1023, 1<<30), "the unit follows the row's all value")
	assert.Equal(t, "  1024 GiB", formatSize(1<<40, 1<<40), "a unit is used from 768 × 1024 of the one below")
	assert.Equal(t, "   768 TiB", formatSize(768<<40, 768<<40))
	assert.Equal(t, "      5   ", formatCount(5, 5))
	assert.Equal(t, " 749999   ", formatCount(749999, 749999))
	assert.Equal(t, "    750 K ", formatCount(750000, 750000))
	assert.Equal(t, "   1000 M ", formatCount(1_000_000_000, 1_000_000_000))
	assert.Equal(t, "     12 K ", formatCount(12345, 800000))
}

func TestSummaryLongDeviceName(t *testing.T) {
	st := Stats{}
	s := formatSummary(&st, strings.Repeat("x", 40), device.CUDA, true)
	require.Contains(t, s, "device "+strings.Repeat("x", 40)+" |")
}

// On cpu and sim the rows PyTorch names after the GPU name the device's kind, in the
// same widths; on CUDA they are PyTorch's.
func TestSummaryNamesTheDeviceKind(t *testing.T) {
	st := Stats{NumOOMs: 3, NumAllocRetries: 2}
	for _, c := range []struct {
		kind                 device.Kind
		oomLine, reservedRow string
		others               []string
	}{
		{device.CUDA, "|            CUDA OOMs: 3            |        cudaMalloc retries: 2         |", "| GPU reserved memory   |", []string{"GPU reserved segments", "Oversize GPU segments"}},
		{device.CPU, "|             CPU OOMs: 3            |              mmap retries: 2         |", "| CPU reserved memory   |", []string{"CPU reserved segments", "Oversize CPU segments"}},
		{device.Sim, "|             Sim OOMs: 3            |        sim Malloc retries: 2         |", "| Sim reserved memory   |", []string{"Sim reserved segments", "Oversize Sim segments"}},
	} {
		got := formatSummary(&st, "d", c.kind, false)
		assert.Contains(t, got, c.oomLine, c.kind)
		assert.Contains(t, got, c.reservedRow, c.kind)
		for _, o := range c.others {
			assert.Contains(t, got, o, c.kind)
		}
		if c.kind != device.CUDA {
			assert.NotContains(t, got, "CUDA", c.kind)
			assert.NotContains(t, got, "GPU", c.kind)
		}
		for _, line := range strings.Split(strings.TrimSuffix(got, "\n"), "\n") {
			assert.Len(t, line, 77, "%v: %q", c.kind, line)
		}
	}

	// Through Summary, the kind is the device's.
	d, err := cpu.New(cpu.Options{Capacity: 64 * MiB})
	require.NoError(t, err)
	a, err := New(d, Config{})
	require.NoError(t, err)
	p := mustAlloc(t, a, 1000, 0)
	got := a.Summary(true)
	assert.Contains(t, got, "CPU OOMs")
	assert.Contains(t, got, "| CPU reserved memory   |   2048 KiB |")
	mustFree(t, a, p)
	require.NoError(t, a.EmptyCache())
	assert.Zero(t, a.Stats().ReservedBytes[StatAll].Current)
}
