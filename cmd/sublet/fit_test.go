package main

import (
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// largestFit parses fit's answer.
func largestFit(t *testing.T, out string) int {
	t.Helper()
	m := regexp.MustCompile(`largest batch that fits: (\d+) `).FindStringSubmatch(out)
	require.NotNil(t, m, out)
	n, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	return n
}

func specOf(t *testing.T, sizes, capacity string, segments int, autocast, conf string) fitSpec {
	t.Helper()
	s, err := fitFlags(sizes, capacity, "", segments, autocast, "adam", conf)
	require.NoError(t, err)
	return s
}

// The answer is the boundary: that batch trains on the device, one more does not.
func TestFitFindsTheBoundary(t *testing.T) {
	code, out, errs := sublet("fit", "-sizes", "64,512,512,10", "-capacity", "256MiB", "-v")
	require.Equal(t, 0, code, errs)
	best := largestFit(t, out)
	assert.Equal(t, 28672, best, "deterministic: the meta device allocates what a GPU would")
	for _, b := range []int{1, 2, 4, 8, 1024} {
		assert.Regexp(t, `(?m)^\s+`+strconv.Itoa(b)+`\s+fits\s`, out, "doubling from 1")
	}
	assert.Regexp(t, `(?m)^\s+`+strconv.Itoa(best+1)+`\s+OOM\s+.*segment did not fit`, out, "the first batch that does not fit was tried")

	s := specOf(t, "64,512,512,10", "256MiB", 0, "", "")
	fit, err := s.try(best)
	require.NoError(t, err)
	assert.True(t, fit.fits)
	assert.LessOrEqual(t, fit.peakReserved, int64(256<<20))
	over, err := s.try(best + 1)
	require.NoError(t, err)
	assert.False(t, over.fits)
	require.NotNil(t, over.oom)
	assert.Equal(t, "sim", over.oom.Device)
	assert.Positive(t, over.oom.SegmentSize)

	// The peaks grow with the batch.
	small, err := s.try(best / 2)
	require.NoError(t, err)
	assert.Less(t, small.peakAllocated, fit.peakAllocated)
}

// A 140 GiB device in well under a second: nothing is computed, only accounted.
func TestFitOnAnH200(t *testing.T) {
	code, out, errs := sublet("fit", "-sizes", "1024,4096,4096,10")
	require.Equal(t, 0, code, errs)
	assert.Contains(t, out, "on a simulated device of 139.80 GiB (150109880320 bytes)")
	best := largestFit(t, out)
	assert.Greater(t, best, 1<<20, "more than a million samples of 1024 floats")
	assert.Equal(t, 1742208, best)
	assert.Contains(t, out, "reserved of 139.80 GiB")
}

// Each memory saver lets a larger batch fit on a deeper model; together they do most.
func TestFitMemorySavers(t *testing.T) {
	sizes := "256,1024,1024,1024,1024,1024,1024,10"
	best := map[string]int{}
	for name, c := range map[string]struct {
		segments int
		amp      string
		conf     string
	}{"plain": {}, "checkpoint": {segments: 4}, "amp": {amp: "f16"}, "both": {segments: 4, amp: "bf16"}, "expandable": {conf: "expandable_segments:True"}} {
		s := specOf(t, sizes, "1GiB", c.segments, c.amp, c.conf)
		_, b, err := s.search(1 << 30)
		require.NoError(t, err, name)
		best[name] = b
	}
	// Outside checkpoint.Sequential a Linear and its ReLU are one op
	// (tensor.LinearActivation), which makes no pre-activation for the backward to find
	// cached: which batches fit depends on those blocks, not only on the peak allocated.
	assert.Equal(t, map[string]int{"plain": 26873, "checkpoint": 34816, "amp": 51200, "both": 65536, "expandable": 28560}, best)
	assert.Greater(t, best["checkpoint"], best["plain"])
	assert.Greater(t, best["amp"], best["plain"])
	assert.Greater(t, best["both"], best["amp"])
	assert.Greater(t, best["both"], best["checkpoint"])
	assert.GreaterOrEqual(t, best["expandable"], best["plain"], "no fragmentation to lose")
}

func TestFitLimitsAndFailures(t *testing.T) {
	code, out, errs := sublet("fit", "-sizes", "8,8", "-capacity", "1GiB", "-max-batch", "100")
	require.Equal(t, 0, code, errs)
	assert.Contains(t, out, "every batch up to -max-batch 100 fits")

	code, out, errs = sublet("fit", "-sizes", "4096,4096,4096", "-capacity", "64MiB", "-optimizer", "adamw")
	assert.Equal(t, 1, code)
	assert.Regexp(t, `(?m)^\s+1\s+OOM`, out)
	assert.Contains(t, errs, "not even a batch of 1 fits in 64.00 MiB")

	// The context's share counts: less free memory, a smaller batch.
	_, out, _ = sublet("fit", "-sizes", "64,512,512,10", "-capacity", "256MiB")
	_, occ, _ := sublet("fit", "-sizes", "64,512,512,10", "-capacity", "256MiB", "-occupied", "64MiB", "-optimizer", "adam")
	assert.Contains(t, occ, ", 64.00 MiB occupied")
	assert.Less(t, largestFit(t, occ), largestFit(t, out))
	assert.Equal(t, 20480, largestFit(t, occ))
}

func TestFitBadUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{}, `-sizes "": want positive integers`},
		{[]string{"-sizes", "8"}, "want the inputs and the outputs at least"},
		{[]string{"-sizes", "8,8", "-capacity", "lots"}, `-capacity "lots": want a positive byte count`},
		{[]string{"-sizes", "8,8", "-capacity", "1GiB", "-occupied", "1GiB"}, "want less than the capacity"},
		{[]string{"-sizes", "8,8,8", "-checkpoint", "1"}, "-checkpoint 1: want 0 (off) or 2 up to 3"},
		{[]string{"-sizes", "8,8,8", "-checkpoint", "4"}, "-checkpoint 4"},
		{[]string{"-sizes", "8,8", "-amp", "fp8"}, `-amp "fp8": want f16, bf16`},
		{[]string{"-sizes", "8,8", "-optimizer", "rmsprop"}, `-optimizer "rmsprop"`},
		{[]string{"-sizes", "8,8", "-conf", "max_split_size_mb:1"}, "max_split_size_mb"},
		{[]string{"-sizes", "8,8", "-max-batch", "0"}, "-max-batch 0: want at least 1"},
		{[]string{"-sizes", "8,8", "extra"}, "unexpected arguments"},
	} {
		code, _, errs := sublet(append([]string{"fit"}, c.args...)...)
		assert.Equal(t, 2, code, "%v", c.args)
		assert.Contains(t, errs, c.want, "%v", c.args)
	}
}
