package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc/memsnap"
)

// site is the label of the allocation site at the line of main.go that contains code
// (in train; the package is "memsnapshot" in the stacks of go test).
func site(t *testing.T, code string) string {
	src, err := os.ReadFile("main.go")
	require.NoError(t, err)
	for i, line := range strings.Split(string(src), "\n") {
		if strings.Contains(line, code) {
			return fmt.Sprintf("memsnapshot.train (main.go:%d)", i+1)
		}
	}
	t.Fatalf("no %q in main.go", code)
	return ""
}

func TestMemSnapshot(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	require.NoError(t, run([]string{"-out", dir}, &out))
	got := out.String()
	for _, want := range []string{
		"3 training steps of an MLP 512-1024-1024-10 (batch 256) on sim with memory history on\n",
		"history: 195 events kept, 0 dropped by the ring\n",
		"    18.1 MiB        0 B  MatMul @ " + site(t, "loss.Backward()") + "\n",                 // backward: gradients and its temporaries, none left
		"    12.1 MiB   12.1 MiB  Full @ " + site(t, "opt.Step()") + "\n",                        // Adam's state, made by its first Step
		"     6.0 MiB    6.0 MiB  Empty @ " + site(t, "model := nn.NewMLP") + "\n",               // the parameters
		"     6.0 MiB        0 B  LinearRelu @ " + site(t, "loss := nn.CrossEntropyLoss") + "\n", // the forward pass: inputs and activations, freed by the scope
		"after training: 19021944 bytes requested = parameters 6340648 + Adam state 12681296\n",
	} {
		assert.Contains(t, got, want)
	}
	// The per-op table: the step and, inside it, every tensor op (and backward rule) of
	// its scope, with their exact memory columns and calls.
	rows := map[string][]string{}
	for _, line := range strings.Split(got, "\n") {
		if f := strings.Fields(line); len(f) > 12 { // the name, 5 time columns, 3 sizes and the calls
			rows[strings.Join(f[:len(f)-12], " ")] = f[len(f)-7:]
		}
	}
	// Each hidden Linear and its ReLU are one op (tensor.LinearActivation): the
	// pre-activations of 1 MiB, 2 a step, are never allocated.
	assert.Equal(t, []string{"49.8", "MiB", "-25.6", "MiB", "18.1", "MiB", "3"}, rows["train_step"])
	assert.Equal(t, []string{"24.1", "MiB", "24.1", "MiB", "4.0", "MiB", "15"}, rows["MatMul"], "the forward's 9 and the backward's 6 products")
	assert.Equal(t, []string{"6.0", "MiB", "6.0", "MiB", "1.0", "MiB", "6"}, rows["relu backward"])
	s, err := memsnap.ReadFile(filepath.Join(dir, "snapshot.pickle"))
	require.NoError(t, err)
	require.Len(t, s.DeviceTraces[0], 195)
	assert.Equal(t, "snapshot", s.DeviceTraces[0][194].Action, "the snapshot marks its own moment last")
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
	assert.Contains(t, string(html), site(t, "loss.Backward()"))
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

// -steps 0 and -batch 0 "trained" nothing and wrote files of it; positional arguments
// were ignored.
func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-steps", "0"}, {"-batch", "0"}, {"-batch", "-1"}, {"extra"}, {"-nosuchflag"}} {
		dir := t.TempDir()
		var out bytes.Buffer
		assert.Error(t, run(append([]string{"-out", dir}, args...), &out), "%v", args)
		files, err := os.ReadDir(dir)
		require.NoError(t, err)
		assert.Empty(t, files, "%v: nothing written", args)
	}
}
