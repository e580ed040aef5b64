package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/device/cuda"
)

// settingsOf returns the allocator settings object that info printed last.
func settingsOf(t *testing.T, out string) map[string]any {
	t.Helper()
	i := strings.LastIndex(out, "\n{")
	require.GreaterOrEqual(t, i, 0, out)
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(out[i:]), &m), out[i:])
	return m
}

func TestInfo(t *testing.T) {
	t.Setenv("SUBLET_DEVICE", "sim")
	t.Setenv("SUBLET_ALLOC_CONF", "max_split_size_mb:64,expandable_segments:True,roundup_power2_divisions:[256:4,>:8]")
	code, out, errs := sublet("info")
	require.Equal(t, 0, code, errs)
	assert.Contains(t, out, "\ncpu     host memory: ")
	assert.Contains(t, out, "\nsim     simulated H200, no GPU needed: 143155.9 MiB (150109880320 bytes) total\n")
	assert.Contains(t, out, "\ndefault device: sim (SUBLET_DEVICE=\"sim\")\n")
	assert.Regexp(t, `\ncublas  (none: GPU matrix products run on sublet's fallback kernel|.+: GPU matrix products run there)`, out)
	if n, err := cuda.Count(); err != nil {
		assert.Contains(t, out, "cuda    none: "+oneLine(err)+"\n")
	} else if n > 0 { // a driver without a GPU lists none
		assert.Contains(t, out, "  cuda:0  ")
		assert.Contains(t, out, "compute capability ")
	}
	m := settingsOf(t, out)
	assert.Equal(t, "max_split_size_mb:64,expandable_segments:True,roundup_power2_divisions:[256:4,>:8]", m["SUBLET_ALLOC_CONF"])
	assert.Equal(t, float64(64<<20), m["max_split_size"])
	assert.Equal(t, true, m["expandable_segments"])
	assert.Equal(t, float64(20<<20), m["max_non_split_rounding"])
	assert.Equal(t, float64(1), m["pinned_num_register_threads"])
	r := m["roundup_power2_divisions"].(map[string]any)
	assert.Len(t, r, 16)
	assert.Equal(t, float64(4), r["1"])
	assert.Equal(t, float64(4), r["256"])
	assert.Equal(t, float64(8), r["512"])
	assert.Equal(t, float64(8), r["32768"])
	// PyTorch's keys first, in its order.
	assert.Less(t, strings.Index(out, `"roundup_power2_divisions"`), strings.Index(out, `"max_non_split_rounding"`))
	assert.Less(t, strings.Index(out, `"SUBLET_ALLOC_CONF"`), strings.Index(out, `"max_split_size"`))
}

func TestInfoDefaults(t *testing.T) {
	t.Setenv("SUBLET_DEVICE", "cpu")
	t.Setenv("SUBLET_ALLOC_CONF", "")
	code, out, errs := sublet("info")
	require.Equal(t, 0, code, errs)
	assert.Contains(t, out, "\ndefault device: cpu (SUBLET_DEVICE=\"cpu\")\n")
	m := settingsOf(t, out)
	assert.Equal(t, float64(-1), m["max_split_size"], "unlimited, as PyTorch shows SIZE_MAX")
	assert.Equal(t, false, m["expandable_segments"])
	assert.Equal(t, float64(0), m["garbage_collection_threshold"])
	assert.Equal(t, false, m["release_lock_on_cudamalloc"])
	for k, v := range m["roundup_power2_divisions"].(map[string]any) {
		assert.Equal(t, float64(0), v, k)
	}
}

func TestInfoBadEnvironment(t *testing.T) {
	t.Setenv("SUBLET_DEVICE", "tpu")
	t.Setenv("SUBLET_ALLOC_CONF", "max_split_size_mb:x")
	code, out, errs := sublet("info")
	assert.Equal(t, 1, code)
	assert.Contains(t, out, "default device: none: ")
	assert.Contains(t, out, `SUBLET_ALLOC_CONF="max_split_size_mb:x" is not valid`)
	assert.Contains(t, errs, `unknown device "tpu"`)
	assert.Contains(t, errs, "key max_split_size_mb")

	code, _, errs = sublet("info", "extra")
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, "unexpected arguments")
}

func TestParseDriverVersion(t *testing.T) {
	for in, want := range map[string]string{
		"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (dvs-builder@U22)  Thu Oct 30 2025\nGCC version:  gcc 12\n": "580.159.04",
		"NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n":                                                     "535.104.05",
		"NVRM version: something else\n": "",
	} {
		assert.Equal(t, want, parseDriverVersion([]byte(in)), in)
	}
}

// garbage_collection_threshold is a share of what a memory fraction allows: without one
// it does nothing, and info says so.
func TestInfoWarnsOfAGCThresholdWithoutAFraction(t *testing.T) {
	t.Setenv("SUBLET_DEVICE", "sim")
	for conf, warns := range map[string]bool{
		"garbage_collection_threshold:0.8":                                                  true,
		"max_split_size_mb:128,roundup_power2_divisions:4,garbage_collection_threshold:0.8": true,
		"garbage_collection_threshold:0.8,per_process_memory_fraction:0.5":                  false,
		"max_split_size_mb:64": false,
		"":                     false,
	} {
		t.Setenv("SUBLET_ALLOC_CONF", conf)
		code, out, errs := sublet("info")
		require.Equal(t, 0, code, errs)
		const w = "\nwarning: garbage_collection_threshold:0.8 does nothing without a memory fraction: the threshold is a share of the memory the fraction allows. Set per_process_memory_fraction in SUBLET_ALLOC_CONF as well (or call SetMemoryFraction in the program), or drop it\n"
		if warns {
			assert.Contains(t, out, w, conf)
		} else {
			assert.NotContains(t, out, "warning:", conf)
		}
	}
}

func TestReplayWarnsOfAGCThresholdWithoutAFraction(t *testing.T) {
	trace := "../../testdata/traces/blog.jsonl.gz"
	code, _, errs := sublet("replay", "-trace", trace, "-conf", "garbage_collection_threshold:0.6")
	require.Equal(t, 0, code, errs)
	assert.Contains(t, errs, "replay: warning: garbage_collection_threshold:0.6 does nothing without a memory fraction")
	code, _, errs = sublet("replay", "-trace", trace, "-conf", "garbage_collection_threshold:0.6", "-fraction", "0.5")
	require.Equal(t, 0, code, errs)
	assert.Empty(t, errs)
}
