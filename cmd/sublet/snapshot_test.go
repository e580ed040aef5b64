package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc/memsnap"
)

// countActions counts a trace's events by action.
func countActions(tr []memsnap.TraceEntry) map[string]int {
	n := map[string]int{}
	for _, e := range tr {
		n[e.Action]++
	}
	return n
}

func TestSnapshotOfAReplayedTrace(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"s.pickle", "s.json"} {
		out := filepath.Join(dir, name)
		code, stdout, errs := sublet("snapshot", "-trace", "../../testdata/traces/oom_fraction.jsonl.gz",
			"-conf", "expandable_segments:True", "-fraction", "0.0143", "-o", out)
		require.Equal(t, 0, code, errs)
		assert.Equal(t, "wrote "+out+": 2 segments, 13532 events (0 dropped), 49 OOMs\n", stdout)
		s, err := memsnap.ReadFile(out)
		require.NoError(t, err)
		n := countActions(s.DeviceTraces[0])
		assert.Equal(t, 49, n["oom"])
		assert.Equal(t, n["alloc"], n["free_requested"]+livecount(s), "every alloc but the live ones was freed")
		assert.Positive(t, n["segment_map"])
		assert.Equal(t, 1, n["snapshot"])
		assert.Equal(t, "sim", s.Devices[0].Name)
		assert.True(t, s.Settings.ExpandableSegments)
	}
}

// livecount counts the snapshot's allocated blocks.
func livecount(s *memsnap.Snapshot) int {
	n := 0
	for _, seg := range s.Segments {
		for _, b := range seg.Blocks {
			if b.State == "active_allocated" {
				n++
			}
		}
	}
	return n
}

func TestSnapshotMaxEntriesAndErrors(t *testing.T) {
	out := filepath.Join(t.TempDir(), "s.json")
	code, stdout, errs := sublet("snapshot", "-trace", "../../testdata/traces/blog.jsonl.gz", "-max-entries", "10", "-o", out)
	require.Equal(t, 0, code, errs)
	assert.Contains(t, stdout, "10 events (")
	code, _, errs = sublet("snapshot", "-o", out)
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, "-trace is required")
	code, _, errs = sublet("snapshot", "-trace", "../../testdata/traces/blog.jsonl.gz", "-max-entries", "-1", "-o", out)
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "MaxEntries -1 is negative")
	code, _, errs = sublet("snapshot", "-trace", "../../testdata/traces/blog.jsonl.gz", "-o", filepath.Join(t.TempDir(), "no", "s.json"))
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "write snapshot: open")
}

func TestVizOfASnapshot(t *testing.T) {
	snap := filepath.Join(t.TempDir(), "s.pickle")
	code, _, errs := sublet("snapshot", "-trace", "../../testdata/traces/oom_fraction.jsonl.gz", "-fraction", "0.0143", "-o", snap)
	require.Equal(t, 0, code, errs)
	code, page, errs := sublet("viz", "-title", "oom_fraction", snap)
	require.Equal(t, 0, code, errs)
	assert.Contains(t, page, "<title>oom_fraction</title>")
	assert.Contains(t, page, `class="oom-marker"`)
	assert.Contains(t, page, `id="largest-0"`)

	code, _, errs = sublet("viz")
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, "viz: give one snapshot file")
	bad := filepath.Join(t.TempDir(), "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte("{\"segments\": [{\"address\": 1}]}"), 0o644))
	code, _, errs = sublet("viz", bad)
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "read snapshot "+bad+": segments[0].total_size: missing")
}
