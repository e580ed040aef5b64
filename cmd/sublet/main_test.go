package main

import (
	"bytes"
	"encoding/json"
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
