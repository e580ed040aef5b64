package main

import (
	"errors"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every command that reads one file takes it as its argument, before or after the
// flags, and those that replay a trace take -trace FILE too: the same output each way.
func TestOneWayToGiveTheInputFile(t *testing.T) {
	const trace = "../../testdata/traces/blog.jsonl.gz"
	dir := t.TempDir()
	snap := filepath.Join(dir, "s.json")
	for _, c := range []struct {
		name string
		ways [][]string
	}{
		{"replay", [][]string{{"replay", "-trace", trace, "-allow-oom", "-capacity", "209715200"},
			{"replay", trace, "-allow-oom", "-capacity", "209715200"}, {"replay", "-allow-oom", "-capacity", "209715200", trace}}},
		{"trace info", [][]string{{"trace", "info", "-trace", trace}, {"trace", "info", trace}}},
		{"snapshot", [][]string{{"snapshot", "-trace", trace, "-o", snap}, {"snapshot", trace, "-o", snap}, {"snapshot", "-o", snap, trace}}},
		{"plot", [][]string{{"plot", "-o", filepath.Join(dir, "p.png"), "-trace", trace}, {"plot", trace, "-o", filepath.Join(dir, "p.png")}}},
		{"top", [][]string{{"top", "-n", "1", "-trace", trace}, {"top", trace, "-n", "1"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var outs []string
			for _, args := range c.ways {
				code, out, errs := sublet(args...)
				require.Equal(t, 0, code, "%q: %s", args, errs)
				outs = append(outs, regexp.MustCompile(`\d\d:\d\d:\d\d`).ReplaceAllString(out, "time"))
			}
			for _, o := range outs[1:] {
				assert.Equal(t, outs[0], o)
			}
		})
	}
	code, _, errs := sublet("viz", snap, "-title", "t")
	require.Equal(t, 0, code, errs)
	for _, args := range [][]string{{"trace", "info"}, {"snapshot"}, {"plot"}, {"viz"}} {
		code, _, errs := sublet(args...)
		assert.Equal(t, 2, code, "%q", args)
		assert.Contains(t, errs, ": give one ", "%q", args)
	}
	code, _, errs = sublet("viz", snap, snap)
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, "viz: give one snapshot file (pickle or JSON, sublet's or PyTorch's), not 2")
	assert.Contains(t, errs, "as the argument\n", "viz has no -trace")
}

// A replayed trace records no allocation sites: the snapshot, its page and top name
// the memory by the replay's tag, never by the sublet command's own functions.
func TestReplayedMemoryIsNotTheToolsOwn(t *testing.T) {
	const trace = "../../testdata/traces/blog.jsonl.gz"
	snap := filepath.Join(t.TempDir(), "s.json")
	code, _, errs := sublet("snapshot", trace, "-o", snap, "-capacity", "209715200")
	require.Equal(t, 0, code, errs)
	code, page, errs := sublet("viz", snap)
	require.Equal(t, 0, code, errs)
	code, top, errs := sublet("top", trace, "-n", "1", "-steps", "185")
	require.Equal(t, 0, code, errs)
	for name, out := range map[string]string{"viz": page, "top": top} {
		assert.Contains(t, out, "replayed trace (it records no sites)", name)
		assert.NotContains(t, out, "main.", "%s names the tool's functions", name)
		assert.NotContains(t, out, ".go:", name)
	}
}

// top in the sublet command has nothing of its own to watch: it says what to give.
func TestTopWithoutAnythingToWatch(t *testing.T) {
	code, out, errs := sublet("top")
	assert.Equal(t, 2, code)
	assert.Empty(t, out)
	assert.Contains(t, errs, "top: nothing to watch: give a running program's -metrics URL (package alloc/memmetrics), or a trace to replay")
}

// info's lines are whole: a library that does not load is said on one line with the
// loader's reasons, not cut after a colon.
func TestInfoLinesAreWhole(t *testing.T) {
	code, out, errs := sublet("info")
	require.Equal(t, 0, code, errs)
	for _, line := range strings.Split(out, "\n") {
		assert.False(t, strings.HasSuffix(strings.TrimSpace(line), ":") && !strings.HasPrefix(line, "allocator settings"), "a dangling line: %q", line)
	}
	assert.Equal(t, "cuda: none of 2 libraries loads: libx.so.1: not found; liby.so: not found",
		oneLine(errors.New("cuda: none of 2 libraries loads:\n  libx.so.1: not found\n  liby.so: not found")))
	assert.Equal(t, "plain", oneLine(errors.New("plain")))
}

// fit prints the boundary it found and how many batches it tried; -v lists them all.
func TestFitSummarizes(t *testing.T) {
	args := []string{"fit", "-sizes", "64,512,512,10", "-capacity", "256MiB"}
	code, out, errs := sublet(args...)
	require.Equal(t, 0, code, errs)
	code, all, errs := sublet(append(args, "-v")...)
	require.Equal(t, 0, code, errs)
	rows := regexp.MustCompile(`(?m)^\s+\d+\s+(fits|OOM)\s`)
	assert.Len(t, rows.FindAllString(out, -1), 2, "the largest batch that fits and the next:\n%s", out)
	n := len(rows.FindAllString(all, -1))
	assert.Greater(t, n, 20)
	assert.Regexp(t, `(?m)^\s+28672\s+fits\s`, out)
	assert.Regexp(t, `(?m)^\s+28673\s+OOM\s`, out)
	assert.Contains(t, out, "batch sizes tried; -v lists them)\n")
	assert.NotContains(t, all, "-v lists them")
}
