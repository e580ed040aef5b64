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
	// The blog's trace on a 200 MiB device: it needs 256 MiB.
	for _, c := range []struct{ name, conf, want string }{
		{"s.pickle", "expandable_segments:True", "0 segments, 555 events (0 dropped), 41 OOMs"},
		{"s.json", "", "0 segments, 670 events (0 dropped), 41 OOMs"},
	} {
		out := filepath.Join(dir, c.name)
		code, stdout, errs := sublet("snapshot", "-trace", "../../testdata/traces/blog.jsonl.gz",
			"-conf", c.conf, "-capacity", "209715200", "-o", out)
		require.Equal(t, 0, code, errs)
		assert.Equal(t, "wrote "+out+": "+c.want+"\n", stdout)
		s, err := memsnap.ReadFile(out)
		require.NoError(t, err)
		n := countActions(s.DeviceTraces[0])
		assert.Equal(t, 41, n["oom"])
		assert.Equal(t, n["alloc"], n["free_requested"]+livecount(s), "every alloc but the live ones was freed")
		expandable := c.conf != ""
		assert.Equal(t, expandable, n["segment_map"] > 0)
		assert.Equal(t, !expandable, n["segment_alloc"] > 0)
		assert.Equal(t, 1, n["snapshot"])
		assert.Equal(t, "sim", s.Devices[0].Name)
		assert.Equal(t, expandable, s.Settings.ExpandableSegments)
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
	assert.Contains(t, errs, "snapshot: give one trace")
	code, _, errs = sublet("snapshot", "-trace", "../../testdata/traces/blog.jsonl.gz", "-max-entries", "-1", "-o", out)
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "MaxEntries -1 is negative")
	code, _, errs = sublet("snapshot", "-trace", "../../testdata/traces/blog.jsonl.gz", "-o", filepath.Join(t.TempDir(), "no", "s.json"))
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "write snapshot: open")
}

func TestVizOfASnapshot(t *testing.T) {
	snap := filepath.Join(t.TempDir(), "s.pickle")
	code, _, errs := sublet("snapshot", "-trace", "../../testdata/traces/blog.jsonl.gz", "-capacity", "209715200", "-o", snap)
	require.Equal(t, 0, code, errs)
	code, page, errs := sublet("viz", "-title", "blog", snap)
	require.Equal(t, 0, code, errs)
	assert.Contains(t, page, "<title>blog</title>")
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

// -at takes the snapshot at the peak of live bytes, after an event, or at the end
// (where a replayed trace has often freed everything and emptied the cache).
func TestSnapshotAt(t *testing.T) {
	const trace = "../../testdata/traces/blog.jsonl.gz"
	out := filepath.Join(t.TempDir(), "s.json")
	for at, want := range map[string]string{"end": "wrote " + out + ": 0 segments", "peak": "wrote " + out + ": 3 segments", "5": "wrote " + out + ": 6 segments, 13 events"} {
		code, stdout, errs := sublet("snapshot", trace, "-capacity", "209715200", "-at", at, "-o", out)
		require.Equal(t, 0, code, errs)
		assert.Contains(t, stdout, want, "-at %s", at)
	}
	code, _, errs := sublet("snapshot", trace, "-at", "soon", "-o", out)
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, `-at "soon": want end, peak or an event number from 0 to 369`)
}
