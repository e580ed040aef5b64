package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/pprof/profile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc/memsnap"
)

// pkg is how the example's package is named in its stacks under go test.
const pkg = "memsnapshot"

func TestMemSnapshot(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	require.NoError(t, run([]string{"-out", dir}, &out))
	got := out.String()
	for _, want := range []string{
		"3 training steps of an MLP 512-1024-1024-10 (batch 256) on sim with memory history on\n",
		"history: 213 events kept, 0 dropped by the ring\n",
		"    18.1 MiB        0 B  " + pkg + ".train (main.go:93)\n", // activations: all freed by the step's scope
		"    12.1 MiB   12.1 MiB  " + pkg + ".train (main.go:95)\n", // Adam's state, made by its first Step
		"     6.0 MiB    6.0 MiB  " + pkg + ".train (main.go:76)\n", // the parameters
		"     6.0 MiB        0 B  " + pkg + ".train (main.go:92)\n", // the inputs
		"              train_step       100.00%",
		"after training: 19021944 bytes requested = parameters 6340648 + Adam state 12681296\n",
	} {
		assert.Contains(t, got, want)
	}
	s, err := memsnap.ReadFile(filepath.Join(dir, "snapshot.pickle"))
	require.NoError(t, err)
	require.Len(t, s.DeviceTraces[0], 213)
	assert.Equal(t, "snapshot", s.DeviceTraces[0][212].Action, "the snapshot marks its own moment last")
	live := 0
	for _, seg := range s.Segments {
		for _, b := range seg.Blocks {
			if b.State == "active_allocated" {
				live++
				require.NotEmpty(t, b.Frames)
			}
		}
	}
	assert.Equal(t, 18, live, "6 parameters, 12 Adam moments")
	html, err := os.ReadFile(filepath.Join(dir, "snapshot.html"))
	require.NoError(t, err)
	assert.Contains(t, string(html), pkg+".train (main.go:93)")
	pb, err := os.ReadFile(filepath.Join(dir, "memory.pb.gz"))
	require.NoError(t, err)
	p, err := profile.ParseData(pb)
	require.NoError(t, err)
	assert.NotEmpty(t, p.Sample)
	tr, err := os.ReadFile(filepath.Join(dir, "trace.json"))
	require.NoError(t, err)
	var v struct{ TraceEvents []map[string]any }
	require.NoError(t, json.Unmarshal(tr, &v))
	assert.NotEmpty(t, v.TraceEvents)
}
