package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc/replay"
)

// sublet runs the CLI with args and returns its exit status, stdout and stderr.
func sublet(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestUsage(t *testing.T) {
	code, out, errs := sublet()
	assert.Equal(t, 2, code)
	assert.Empty(t, out)
	assert.Contains(t, errs, "usage: sublet COMMAND")
	assert.Contains(t, errs, "trace")

	code, _, errs = sublet("-h")
	assert.Equal(t, 0, code)
	assert.Contains(t, errs, "usage: sublet COMMAND")

	code, _, errs = sublet("frobnicate")
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, `unknown command "frobnicate"`)
}

func TestTraceGenWritesTheGeneratorsTrace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "blog.jsonl.gz")
	code, _, errs := sublet("trace", "gen", "-kind", "blog", "-seed", "3", "-o", path)
	require.Equal(t, 0, code, errs)
	got, err := replay.ReadFile(path)
	require.NoError(t, err)
	want, err := replay.Generate("blog", 3)
	require.NoError(t, err)
	assert.Equal(t, want, got)

	code, out, errs := sublet("trace", "gen", "-kind", "blog", "-seed", "3")
	require.Equal(t, 0, code, errs)
	fromStdout, err := replay.Read(strings.NewReader(out))
	require.NoError(t, err)
	assert.Equal(t, want, fromStdout)
}

func TestTraceGenMatrixRegeneratesEveryTrace(t *testing.T) {
	dir := t.TempDir()
	matrix := filepath.Join(dir, "matrix.json")
	require.NoError(t, os.WriteFile(matrix, []byte(`{"traces":[{"name":"a","kind":"blog","seed":2},{"name":"b","kind":"over_capacity","seed":1}],"runs":[]}`), 0o644))
	code, _, errs := sublet("trace", "gen", "-matrix", matrix)
	require.Equal(t, 0, code, errs)
	for _, name := range []string{"a", "b"} {
		_, err := replay.ReadFile(filepath.Join(dir, name+".jsonl.gz"))
		require.NoError(t, err)
	}
}

func TestTraceGenBadUsage(t *testing.T) {
	code, _, errs := sublet("trace", "gen")
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, "give exactly one of -kind and -matrix")

	code, _, errs = sublet("trace", "gen", "-kind", "nope")
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, `unknown trace kind "nope"`)

	code, _, errs = sublet("trace", "gen", "-kind", "blog", "extra")
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, "unexpected arguments")

	code, _, errs = sublet("trace", "gen", "-bogus")
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, "flag provided but not defined: -bogus")

	code, _, errs = sublet("trace", "gen", "-h")
	assert.Equal(t, 0, code)
	assert.Contains(t, errs, "-kind")

	code, _, errs = sublet("trace")
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, "subcommands:")

	code, _, _ = sublet("trace", "-h")
	assert.Equal(t, 0, code)
}

func TestTraceInfo(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(`{"op":"alloc","id":1,"size":1000}
{"op":"alloc","id":2,"size":24}
{"op":"free","id":1}
{"op":"empty_cache"}
`), 0o644))
	code, out, errs := sublet("trace", "info", "-trace", path)
	require.Equal(t, 0, code, errs)
	var s replay.Summary
	require.NoError(t, json.Unmarshal([]byte(out), &s))
	assert.Equal(t, replay.Summary{Events: 4, Allocs: 2, Frees: 1, EmptyCaches: 1, PeakLive: 1024, PeakLiveEvent: 1,
		MinSize: 24, MaxSize: 1000, TotalAllocated: 1024}, s)

	require.NoError(t, os.WriteFile(path, []byte(`{"op":"free","id":1}`+"\n"), 0o644))
	code, _, errs = sublet("trace", "info", "-trace", path)
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, path+" line 1: free of id 1, which was never allocated")

	code, _, _ = sublet("trace", "info")
	assert.Equal(t, 2, code)
}

func TestTraceKinds(t *testing.T) {
	code, out, _ := sublet("trace", "kinds")
	require.Equal(t, 0, code)
	for _, k := range replay.Kinds() {
		assert.Contains(t, out, k+" ")
	}
}

func TestReplayCommittedTrace(t *testing.T) {
	code, out, errs := sublet("replay", "-trace", "../../testdata/traces/blog.jsonl.gz", "-series")
	require.Equal(t, 0, code, errs)
	var r replayOutput
	require.NoError(t, json.Unmarshal([]byte(out), &r))
	assert.Equal(t, append([]string{"event"}, replay.SeriesKeys()...), r.Keys, "the first column is the event's index")
	events, err := replay.ReadFile("../../testdata/traces/blog.jsonl.gz")
	require.NoError(t, err)
	require.Len(t, r.Series, len(events))
	assert.Equal(t, len(events), r.Events)
	assert.Equal(t, "sim", r.Device)
	for i, row := range r.Series {
		require.Equal(t, int64(i), row[0], "row %d", i)
	}
	// The trace opens with the blog's 8 x 16 MiB: eight 16 MiB segments.
	assert.Equal(t, []int64{7, 128 << 20, 128 << 20, 128 << 20, 0, 8, 0, 0, 8, 0, 128 << 20}, r.Series[7])
	// Then 4 x 32 MiB after freeing them: four more segments, 256 MiB reserved.
	assert.Equal(t, []int64{19, 128 << 20, 256 << 20, 128 << 20, 0, 12, 0, 0, 12, 0, 128 << 20}, r.Series[19])
	var peak int64
	for _, row := range r.Series {
		peak = max(peak, row[2])
	}
	assert.Equal(t, int64(0), r.Final["allocated_bytes.all.current"])
	assert.Equal(t, int64(0), r.Final["reserved_bytes.all.current"], "the trace ends with empty_cache")
	assert.Contains(t, r.Final, "oversize_segments.peak")

	code, out, errs = sublet("replay", "-trace", "../../testdata/traces/blog.jsonl.gz")
	require.Equal(t, 0, code, errs)
	r = replayOutput{}
	require.NoError(t, json.Unmarshal([]byte(out), &r))
	assert.Nil(t, r.Series, "no series without -series")
	assert.Equal(t, peak, r.Final["reserved_bytes.all.peak"])
}

func TestReplayConfFractionCapacity(t *testing.T) {
	trace := "../../testdata/traces/oom_fraction.jsonl.gz"
	// final replays with args and returns the final statistics; ooms says the replay
	// must exit 3 for its OOMs, reported on stderr.
	final := func(ooms bool, args ...string) map[string]int64 {
		t.Helper()
		code, out, errs := sublet(append([]string{"replay", "-trace", trace}, args...)...)
		var r replayOutput
		require.NoError(t, json.Unmarshal([]byte(out), &r), "the JSON is printed with or without OOMs")
		if ooms {
			require.Equal(t, exitOOMs, code, errs)
			assert.Contains(t, errs, fmt.Sprintf("replay: %d of ", r.Final["num_ooms"]))
		} else {
			require.Equal(t, 0, code, errs)
			assert.Empty(t, errs)
		}
		return r.Final
	}
	free := final(false)
	assert.Equal(t, int64(0), free["num_ooms"], "an H200 holds the whole trace")
	limited := final(true, "-fraction", "0.0143")
	assert.Greater(t, limited["num_ooms"], int64(0))
	assert.LessOrEqual(t, limited["reserved_bytes.all.peak"], int64(2146571289) /* 0.0143 x 150109880320 */)
	small := final(true, "-capacity", "2147483648")
	assert.Greater(t, small["num_ooms"], int64(0))
	assert.LessOrEqual(t, small["reserved_bytes.all.peak"], int64(2147483648))
	gc := final(true, "-fraction", "0.0143", "-conf", "garbage_collection_threshold:0.6")
	assert.NotEqual(t, limited["num_device_free"], gc["num_device_free"], "garbage collection frees segments early")
}

func TestReplaySegmentsFile(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(dir, "t.jsonl")
	require.NoError(t, os.WriteFile(trace, []byte(`{"op":"alloc","id":1,"size":512}
{"op":"alloc","id":2,"size":3000000}
`), 0o644))
	segs := filepath.Join(dir, "segs.json")
	require.NoError(t, os.WriteFile(segs, []byte(`[{"size":2097152,"addr":140737488355328},{"size":20971520,"addr":140737454800896}]`), 0o644))
	code, out, errs := sublet("replay", "-trace", trace, "-segments", segs)
	require.Equal(t, 0, code, errs)
	var r replayOutput
	require.NoError(t, json.Unmarshal([]byte(out), &r))
	assert.Equal(t, int64(22<<20), r.Final["reserved_bytes.all.current"])

	// The recording says 2 MiB where the allocator asks for 20: the decisions diverged.
	require.NoError(t, os.WriteFile(segs, []byte(`[{"size":2097152,"addr":140737488355328},{"size":2097152,"addr":140737454800896}]`), 0o644))
	code, out, errs = sublet("replay", "-trace", trace, "-segments", segs)
	assert.Equal(t, 1, code)
	assert.Empty(t, out)
	assert.Contains(t, errs, trace+": replay line 2 (alloc id 2 size 3000000)")
	assert.Contains(t, errs, "segment index 1")
}

func TestReplayErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.jsonl")
	require.NoError(t, os.WriteFile(bad, []byte(`{"op":"alloc","id":1,"size":512}`+"\n"+`{"op":"frees","id":1}`+"\n"), 0o644))
	good := "../../testdata/traces/blog.jsonl.gz"
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{}, 2, "replay: give one trace (JSONL, plain or gzip"},
		{[]string{good, good}, 2, "replay: give one trace (JSONL, plain or gzip: generated, or recorded by package alloc/recorder), not 2"},
		{[]string{"-trace", good, good}, 2, "not 2"},
		{[]string{"-trace", bad}, 1, bad + " line 2: unknown op \"frees\""},
		{[]string{"-trace", filepath.Join(dir, "none.jsonl")}, 1, "no such file"},
		{[]string{"-trace", good, "-conf", "max_split_size_mb:x"}, 1, "max_split_size_mb"},
		{[]string{"-trace", good, "-fraction", "1.5"}, 1, "fraction must be in [0, 1]"},
		{[]string{"-trace", good, "-device", "tpu"}, 1, `sublet replay: -device: unknown device "tpu": want "cpu", "sim", "sim-backed", "cuda" or "cuda:N"`},
		{[]string{"-trace", good, "-device", "cuda:x"}, 1, `unknown device "cuda:x"`},
		{[]string{"-trace", good, "-device", "cuda:-1"}, 1, `unknown device "cuda:-1"`},
		{[]string{"-trace", good, "-device", "cuda:999"}, 1, "device cuda:999: "},
		{[]string{"-trace", good, "-device", "cpu", "-segments", "x"}, 1, "simulated device only"},
		{[]string{"-trace", good, "-capacity", "-5"}, 1, "Capacity is -5"},
		{[]string{"-trace", good, "-segments", filepath.Join(dir, "none.json")}, 1, "no such file"},
	} {
		code, out, errs := sublet(append([]string{"replay"}, c.args...)...)
		assert.Equal(t, c.code, code, "%v: %s", c.args, errs)
		assert.Empty(t, out, "%v", c.args)
		assert.Contains(t, errs, c.msg, "%v", c.args)
	}
}

func TestReplayOnCPUDecidesAsOnSim(t *testing.T) {
	finals := map[string]map[string]int64{}
	for _, dev := range []string{"cpu", "sim", "sim-backed"} {
		code, out, errs := sublet("replay", "-trace", "../../testdata/traces/blog.jsonl.gz", "-device", dev)
		require.Equal(t, 0, code, errs)
		var r replayOutput
		require.NoError(t, json.Unmarshal([]byte(out), &r))
		finals[dev] = r.Final
	}
	assert.Equal(t, finals["sim"], finals["cpu"])
	assert.Equal(t, finals["sim"], finals["sim-backed"])
	assert.Equal(t, int64(0), finals["cpu"]["reserved_bytes.all.current"])
}

// -device takes device/named's names: "cuda" is "cuda:0", here as in SUBLET_DEVICE.
func TestReplayDeviceNamesAreNamed(t *testing.T) {
	trace := "../../testdata/traces/blog.jsonl.gz"
	code, out, errs := sublet("replay", "-trace", trace, "-device", "cuda")
	code0, out0, errs0 := sublet("replay", "-trace", trace, "-device", "cuda:0")
	assert.Equal(t, code0, code)
	assert.Equal(t, out0, out)
	assert.Equal(t, errs0, errs, "the same device, the same outcome")
	assert.NotContains(t, errs, "unknown device")
	if code != 0 {
		assert.Contains(t, errs, "device cuda:0: ", "without a GPU: the driver's reason, under the canonical name")
	}
	code, _, errs = sublet("replay", "-h")
	assert.Equal(t, 0, code)
	assert.Contains(t, errs, "sim-backed (a simulated H200 with data), cuda or cuda:N")
}

func TestDemo(t *testing.T) {
	code, out, errs := sublet("demo")
	require.Equal(t, 0, code, errs)
	assert.Contains(t, out, "8 x 16 MiB, freed, then 4 x 32 MiB   reserved  256 MiB (default)")
	assert.Contains(t, out, "4 x 32 MiB, freed, then 8 x 16 MiB   reserved  128 MiB (default)")
	for _, r := range demoRuns {
		assert.Contains(t, out, r.kind)
	}
	code, _, _ = sublet("demo", "extra")
	assert.Equal(t, 2, code)
}

// replay takes its settings from SUBLET_ALLOC_CONF, as the program's allocator would
// (and as sublet info reports), unless -conf is given; an invalid value is an error
// naming the variable, and -conf (even "") replaces it.
func TestReplayReadsSubletAllocConf(t *testing.T) {
	trace := "../../testdata/traces/blog.jsonl.gz"
	replayed := func(wantCode int, args ...string) (replayOutput, string) {
		t.Helper()
		code, out, errs := sublet(append([]string{"replay", "-trace", trace}, args...)...)
		require.Equal(t, wantCode, code, errs)
		var r replayOutput
		if wantCode == 0 {
			require.NoError(t, json.Unmarshal([]byte(out), &r))
		}
		return r, errs
	}
	t.Setenv("SUBLET_ALLOC_CONF", "")
	plain, errs := replayed(0)
	assert.Equal(t, "default", plain.ConfFrom)
	assert.Empty(t, errs)

	t.Setenv("SUBLET_ALLOC_CONF", "expandable_segments:True")
	env, errs := replayed(0)
	assert.Equal(t, "SUBLET_ALLOC_CONF", env.ConfFrom)
	assert.Equal(t, "expandable_segments:True", env.Conf)
	assert.Equal(t, `replay: allocator settings from SUBLET_ALLOC_CONF="expandable_segments:True" (-conf overrides)`+"\n", errs)
	assert.NotEqual(t, plain.Final["num_device_alloc"], env.Final["num_device_alloc"], "expandable segments were in force")
	asked, _ := replayed(0, "-conf", "expandable_segments:True")
	assert.Equal(t, env.Final, asked.Final)

	over, errs := replayed(0, "-conf", "")
	assert.Equal(t, "-conf", over.ConfFrom)
	assert.Empty(t, errs)
	assert.Equal(t, plain.Final, over.Final, `-conf "" replays with the defaults`)

	t.Setenv("SUBLET_ALLOC_CONF", "max_split_size_mb:x")
	_, errs = replayed(1)
	assert.Contains(t, errs, `sublet replay: SUBLET_ALLOC_CONF: alloc: config "max_split_size_mb:x"`)
	assert.Contains(t, errs, "(fix or unset it, or give -conf)")
	_, _ = replayed(0, "-conf", "")

	// sublet snapshot and sublet fit follow the same rule.
	code, _, errs := sublet("snapshot", "-trace", trace, "-o", filepath.Join(t.TempDir(), "s.json"))
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "SUBLET_ALLOC_CONF")
	code, _, errs = sublet("fit", "-sizes", "8,8", "-capacity", "64MiB", "-max-batch", "4")
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "SUBLET_ALLOC_CONF")
}

// Allocations that run out of memory are reported on stderr and give exit status 3,
// the JSON printed all the same; -allow-oom gives 0. An empty trace is an error.
func TestReplayReportsOOMsAndEmptyTraces(t *testing.T) {
	t.Setenv("SUBLET_ALLOC_CONF", "")
	dir := t.TempDir()
	trace := filepath.Join(dir, "t.jsonl")
	require.NoError(t, os.WriteFile(trace, []byte(`{"op":"alloc","id":1,"size":80000000}
{"op":"alloc","id":2,"size":40000000}
{"op":"alloc","id":3,"size":40000000}
{"op":"free","id":1}
`), 0o644))
	code, out, errs := sublet("replay", "-trace", trace, "-capacity", "104857600")
	assert.Equal(t, exitOOMs, code)
	var r replayOutput
	require.NoError(t, json.Unmarshal([]byte(out), &r))
	assert.Equal(t, 2, r.OOMs)
	assert.Equal(t, int64(2), r.Final["num_ooms"])
	assert.True(t, strings.HasPrefix(errs, "replay: 2 of 3 allocations ran out of memory; the first, replay line 2 (alloc id 2 size 40000000): alloc: out of memory on sim."), errs)
	assert.NotContains(t, errs, "sublet replay: allocations ran out of memory", "reported once")

	code, out2, errs2 := sublet("replay", "-trace", trace, "-capacity", "104857600", "-allow-oom")
	assert.Equal(t, 0, code)
	assert.Equal(t, out, out2)
	assert.Equal(t, errs, errs2, "still reported")

	empty := filepath.Join(dir, "empty.jsonl")
	require.NoError(t, os.WriteFile(empty, nil, 0o644))
	code, out, errs = sublet("replay", "-trace", empty)
	assert.Equal(t, 1, code)
	assert.Empty(t, out)
	assert.Equal(t, "sublet replay: "+empty+": the trace has no events: nothing to replay (an empty file, or a recording that saw no allocation)\n", errs)

	code, _, errs = sublet("replay", "-h")
	assert.Equal(t, 0, code)
	assert.Contains(t, errs, "Exit status: 0; 3 when allocations ran out of memory")
}
