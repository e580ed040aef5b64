package main

import (
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPlotOfATraceAndOfASnapshot(t *testing.T) {
	dir := t.TempDir()
	snap := filepath.Join(dir, "s.json")
	code, _, errs := sublet("snapshot", "-trace", "../../testdata/traces/blog.jsonl.gz", "-o", snap)
	require.Equal(t, 0, code, errs)
	for _, c := range []struct{ in, want string }{
		{"../../testdata/traces/blog.jsonl.gz", ": 370 events, 41 OOMs\n"},
		{snap, ": 782 events, 0 OOMs\n"},
	} {
		out := filepath.Join(dir, "m.png")
		args := []string{"plot", "-o", out}
		if c.in != snap {
			args = append(args, "-capacity", "209715200")
		}
		code, stdout, errs := sublet(append(args, c.in)...)
		require.Equal(t, 0, code, errs)
		assert.Equal(t, "wrote "+out+c.want, stdout)
		f, err := os.Open(out)
		require.NoError(t, err)
		img, err := png.Decode(f)
		f.Close()
		require.NoError(t, err)
		assert.Equal(t, 960, img.Bounds().Dx())
	}
	// A trace whose lines do not start with "op" (replay reads keys in any order).
	reordered := filepath.Join(dir, "reordered.jsonl")
	require.NoError(t, os.WriteFile(reordered, []byte("{\"id\": 0, \"op\": \"alloc\", \"size\": 1024}\n{\"id\": 0, \"op\": \"free\"}\n"), 0o644))
	code, stdout, errs := sublet("plot", "-o", filepath.Join(dir, "r.png"), reordered)
	require.Equal(t, 0, code, errs)
	assert.Equal(t, "wrote "+filepath.Join(dir, "r.png")+": 2 events, 0 OOMs\n", stdout)

	code, _, errs = sublet("plot")
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, "plot: give one snapshot")
	bad := filepath.Join(dir, "bad.jsonl")
	require.NoError(t, os.WriteFile(bad, []byte("{\"op\":\"alloc\",\"id\":1}\n"), 0o644))
	code, _, errs = sublet("plot", bad)
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "line 1: alloc event without \"size\"")
}
