package memviz

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/alloc/memsnap"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/sim"
)

// recording returns an allocator over a 256 MiB simulated device with the trace on.
func recording(t *testing.T) *alloc.Allocator {
	t.Helper()
	d, err := sim.New(sim.Options{Capacity: 256 << 20, Cost: &sim.CostModel{}})
	require.NoError(t, err)
	a, err := alloc.New(d, alloc.Config{})
	require.NoError(t, err)
	require.NoError(t, a.RecordHistory(alloc.HistoryOptions{Trace: true}))
	return a
}

// recorded runs a small workload with history on: weights, then activations from two
// call sites, a free, and an allocation too large for the device.
func recorded(t *testing.T) *memsnap.Snapshot {
	t.Helper()
	a := recording(t)
	var live []device.Ptr
	get := func(size int64, op string) {
		p, err := a.AllocTagged(size, 0, alloc.Tag{Op: op})
		require.NoError(t, err)
		live = append(live, p)
	}
	for range 4 {
		get(16<<20, "Weight")
	}
	for i := range 6 {
		get(int64(i+1)<<20, "Relu")
		get(512<<10, "Add")
	}
	require.NoError(t, a.Free(live[5]))
	_, err := a.Alloc(300<<20, 0)
	var oom *alloc.OOMError
	require.ErrorAs(t, err, &oom)
	s := memsnap.From(a.MemorySnapshot())
	for i, p := range live {
		if i != 5 {
			require.NoError(t, a.Free(p))
		}
	}
	require.NoError(t, a.EmptyCache())
	require.Zero(t, a.Stats().ReservedBytes[alloc.StatAll].Current)
	return s
}

func TestPageContents(t *testing.T) {
	var b bytes.Buffer
	var progress []int
	require.NoError(t, WriteHTML(&b, recorded(t), Options{Progress: func(done, total int) { progress = append(progress, done, total) }}))
	html := b.String()
	assert.Equal(t, []int{1, 1}, progress)
	for _, want := range []string{"<title>sublet memory snapshot</title>", `id="device-0"`, `class="timeline"`,
		`class="oom-marker"`, "Out of memory (1)", "300.0 MiB", "Weight", "Relu", "Add", `id="largest-0"`} {
		assert.Contains(t, html, want)
	}
	for _, banned := range []string{"http://", "https://", "<link", "src="} {
		assert.NotContains(t, html, banned, "the page is self-contained")
	}
}

// chromium returns the browser to test with; CI installs Debian's (see .ci/run).
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no chromium installed (.ci/run installs Debian's chromium)")
	return ""
}

// The page in a real headless Chromium: no console errors or exceptions, the expected
// elements there, the cursor readout working, and a screenshot (MEMVIZ_SCREENSHOT
// names where to keep it, a PNG).
func TestPageInChromium(t *testing.T) {
	bin := chromium(t)
	dir := t.TempDir()
	page := filepath.Join(dir, "page.html")
	var b bytes.Buffer
	snap := recorded(t)
	require.Len(t, snap.Segments, 7, "four 20 MiB segments for the weights, one more for the Relus, two of 2 MiB for the Adds")
	require.NoError(t, WriteHTML(&b, snap, Options{}))
	require.NoError(t, os.WriteFile(page, b.Bytes(), 0o644))

	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(filepath.Join(dir, "profile")), chromedp.WindowSize(1100, 1300),
	}
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 60*time.Second)
	defer cancel()

	messages := chromedp.Console(ctx)
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate("file://"+page), chromedp.WaitVisible(chromedp.CSS("svg.timeline"))))
	count := func(sel string) int {
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll(`+"`"+sel+"`"+`).length`))
		require.NoError(t, err, sel)
		return n
	}
	ready, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS("body"), "data-ready"))
	require.NoError(t, err)
	markers, segs, rows, areas := count(".oom-marker"), count("g.segment"), count("#largest-0 tr.alloc-row"), count("svg.timeline path.site")
	// The event axis: its numbers and title are drawn inside the chart, not cut off.
	clipped, err := chromedp.Run(ctx, chromedp.Evaluate[int](`(() => { const s = document.querySelector("svg.timeline").getBoundingClientRect();
		let n = 0; for (const t of document.querySelectorAll("svg.timeline text.xtick, svg.timeline text.xlabel")) {
			const r = t.getBoundingClientRect(); if (r.bottom > s.bottom + 0.5 || r.top < s.top || r.height === 0) n++; } return n; })()`))
	require.NoError(t, err)
	assert.Zero(t, clipped, "event axis labels outside the chart")
	assert.GreaterOrEqual(t, count("svg.timeline text.xtick"), 3, "event numbers along the x axis")
	assert.Equal(t, 1, count("svg.timeline text.xlabel"))
	readout, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => { const s = document.querySelector("svg.timeline"), r = s.getBoundingClientRect();
		s.dispatchEvent(new MouseEvent("mousemove", {clientX: r.left + r.width * 0.7, clientY: r.top + 50, bubbles: true}));
		return document.getElementById("readout-0").textContent; })()`))
	require.NoError(t, err)
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	// The page's own last message marks the end of what it wrote.
	require.NoError(t, chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`console.info("memviz test: end")`)))
	var problems []string
	for m, err := range messages {
		require.NoError(t, err)
		if m.Text == "memviz test: end" {
			break
		}
		if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleWarning || m.IsException() {
			problems = append(problems, m.String())
		}
	}
	assert.Empty(t, problems)
	assert.Equal(t, "1", ready.Value, "the page's script ran to its end")
	assert.Equal(t, 1, markers, "one OOM marked")
	assert.Equal(t, 7, segs, "every segment drawn")
	assert.Equal(t, 15, rows, "4 weights and 12 activations, one freed: 15 live allocations, all listed")
	assert.Equal(t, 3, areas, "Weight, Relu, Add")
	assert.True(t, strings.HasPrefix(readout, "event "), "readout %q", readout)
	assert.Contains(t, readout, "allocated ")
	require.NotEmpty(t, shot)
	if p := os.Getenv("MEMVIZ_SCREENSHOT"); p != "" {
		require.NoError(t, os.WriteFile(p, shot, 0o644))
	}

	// A trace longer than the chart's columns: the readout names the column's events.
	b.Reset()
	require.NoError(t, WriteHTML(&b, churned(t, maxColumns), Options{}))
	require.NoError(t, os.WriteFile(page, b.Bytes(), 0o644))
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate("file://"+page), chromedp.WaitVisible(chromedp.CSS("svg.timeline"))))
	readout, err = chromedp.Run(ctx, chromedp.Evaluate[string](`(() => { const s = document.querySelector("svg.timeline"), r = s.getBoundingClientRect();
		s.dispatchEvent(new MouseEvent("mousemove", {clientX: r.left + r.width * 0.5, clientY: r.top + 50, bubbles: true}));
		return document.getElementById("readout-0").textContent; })()`))
	require.NoError(t, err)
	assert.Regexp(t, `^events \d+ to \d+: highest allocated \d+\.\d KiB \(event \d+, (alloc|free_requested|free_completed)\), reserved 2\.0 MiB, active `, readout)
	require.NoError(t, chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`console.info("memviz test: end 2")`)))
	for m, err := range messages {
		require.NoError(t, err)
		if m.Text == "memviz test: end 2" {
			break
		}
		assert.False(t, m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleWarning || m.IsException(), "%s", m)
	}
}

// churned records n allocations and frees of 4 KiB in one small segment: 3n+2 events.
func churned(t *testing.T, n int) *memsnap.Snapshot {
	t.Helper()
	a := recording(t)
	keep, err := a.Alloc(4096, 0)
	require.NoError(t, err)
	for range n {
		p, err := a.Alloc(4096, 0)
		require.NoError(t, err)
		require.NoError(t, a.Free(p))
	}
	s := memsnap.From(a.MemorySnapshot())
	require.NoError(t, a.Free(keep))
	require.NoError(t, a.EmptyCache())
	require.Zero(t, a.Stats().ReservedBytes[alloc.StatAll].Current)
	return s
}

// A snapshot taken when nothing is allocated (a replayed trace at its end) says so, and
// where the most was, instead of showing an empty map a reader takes for no memory at
// all; one whose blocks are all free says the memory is cached.
func TestPageOfAnEmptyEnd(t *testing.T) {
	a := recording(t)
	p, err := a.Alloc(3<<20, 0)
	require.NoError(t, err)
	q, err := a.Alloc(1<<20, 0)
	require.NoError(t, err)
	require.NoError(t, a.Free(p))
	require.NoError(t, a.Free(q))
	cached := memsnap.From(a.MemorySnapshot())
	require.NoError(t, a.EmptyCache())
	empty := memsnap.From(a.MemorySnapshot())
	for _, c := range []struct {
		s    *memsnap.Snapshot
		want []string
	}{
		{cached, []string{"Every block is free: the memory is cached by the allocator, not allocated",
			"nothing was allocated then (the most, 4.0 MiB, was at event 3)", "the most allocated at any event was 4.0 MiB, at event 3."}},
		{empty, []string{"None: the allocator held no memory of the device then (its cache was emptied)",
			"nothing was allocated then (the most, 4.0 MiB, was at event 3)"}},
	} {
		var b bytes.Buffer
		require.NoError(t, WriteHTML(&b, c.s, Options{}))
		for _, w := range c.want {
			assert.True(t, strings.Contains(b.String(), w), "the page says %q", w)
		}
		assert.Contains(t, b.String(), `class="xtick"`)
	}
}
