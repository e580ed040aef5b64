package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/alloc/memmetrics"
	"github.com/subletml/sublet/device/sim"
)

// TestMain lets the tests run this binary as the sublet command (under tmux), or as a
// rank that `sublet run` started (rankHelper).
func TestMain(m *testing.M) {
	rankHelper()
	if os.Getenv("SUBLET_TEST_MAIN") == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

func TestRenderTop(t *testing.T) {
	views := []deviceView{
		{Name: "cuda:0", Free: 100 << 30, Total: 140 << 30, Allocated: 30 << 30, Reserved: 36 << 30, Active: 30 << 30, InactiveSplit: 1 << 30, OOMs: 2,
			Sites: []siteRow{{Label: "MatMul @ main.step (train.go:42)", Bytes: 20 << 30, Blocks: 12}}},
		{Name: "sim", Free: -1, Total: -1},
	}
	got := renderTop(views, "watching x", time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC))
	want := `sublet top - 09:30:00 - watching x   (q quits)

DEVICE             USED      TOTAL  ALLOCATED   RESERVED     CACHED    FRAG  NONRELEAS  OOMS
cuda:0         40.0 GiB  140.0 GiB   30.0 GiB   36.0 GiB    6.0 GiB   16.7%    1.0 GiB     2
  [############+++--                                           ]
sim                   ?          ?        0 B        0 B        0 B       -        0 B     0

largest sites on cuda:0:
    20.0 GiB     12 blocks  MatMul @ main.step (train.go:42)
`
	assert.Equal(t, want, got)
}

func TestTopScrapesAProgramsMetrics(t *testing.T) {
	d, err := sim.New(sim.Options{Capacity: 1 << 30})
	require.NoError(t, err)
	a, err := alloc.New(d, alloc.Config{})
	require.NoError(t, err)
	p, err := a.Alloc(100<<20, 0)
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	reg.MustRegister(memmetrics.NewCollector(func() []*alloc.Allocator { return []*alloc.Allocator{a} }))
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	code, out, errs := sublet("top", "-metrics", srv.URL, "-n", "1")
	require.Equal(t, 0, code, errs)
	assert.Contains(t, out, "sim           100.0 MiB    1.0 GiB  100.0 MiB  100.0 MiB        0 B    0.0%        0 B     0\n")
	require.NoError(t, a.Free(p))
	require.NoError(t, a.EmptyCache())
	assert.Zero(t, a.Stats().ReservedBytes[alloc.StatAll].Current)

	code, _, errs = sublet("top", "-metrics", srv.URL+"/nothing-here", "-trace", "x")
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, "give -metrics or -trace, not both")
	bad := httptest.NewServer(http.NotFoundHandler())
	defer bad.Close()
	code, _, errs = sublet("top", "-metrics", bad.URL, "-n", "1")
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "404 Not Found")
}

// tmux runs tmux with args.
func tmux(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("tmux", args...).CombinedOutput()
	require.NoError(t, err, "tmux %v: %s", args, out)
	return string(out)
}

// sublet top in a real terminal (a tmux pane): it redraws in place as the trace
// replays, and q quits.
func TestTopUnderTmux(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux not installed (.ci/run installs it)")
	}
	self, err := os.Executable()
	require.NoError(t, err)
	session := "sublet-top-test"
	exec.Command("tmux", "kill-session", "-t", session).Run()
	t.Setenv("SUBLET_TEST_MAIN", "1")
	tmux(t, "new-session", "-d", "-s", session, "-x", "120", "-y", "30", "-e", "SUBLET_TEST_MAIN=1",
		self+" top -trace ../../testdata/traces/blog.jsonl.gz -steps 1 -interval 20ms; sleep 30")
	defer exec.Command("tmux", "kill-session", "-t", session).Run()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Wait (bounded) for the replay to pass its first eight 16 MiB blocks.
	progress := regexp.MustCompile(`event (\d+) of`)
	var pane string
	for ctx.Err() == nil {
		pane = tmux(t, "capture-pane", "-p", "-t", session)
		if m := progress.FindStringSubmatch(pane); m != nil {
			if n, _ := strconv.Atoi(m[1]); n >= 8 {
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.Contains(t, pane, "sublet top - ", pane)
	assert.Contains(t, pane, "DEVICE             USED      TOTAL  ALLOCATED   RESERVED")
	assert.Equal(t, 1, strings.Count(pane, "DEVICE"), "the screen is redrawn in place, not scrolled:\n%s", pane)
	assert.Contains(t, pane, "largest sites on sim:")
	assert.Regexp(t, `sim\s+\d+\.\d MiB\s+139\.8 GiB`, pane)
	tmux(t, "send-keys", "-t", session, "q")
	cmd := ""
	for ctx.Err() == nil && cmd != "sleep" {
		cmd = strings.TrimSpace(tmux(t, "list-panes", "-t", session, "-F", "#{pane_current_command}"))
		time.Sleep(20 * time.Millisecond)
	}
	assert.Equal(t, "sleep", cmd, "q ended sublet top; the shell went on to sleep")
}

// A program that takes the connection and never answers (stopped in a debugger, wedged)
// cannot hang top: the scrape gives up after its timeout and says so.
func TestTopGivesUpOnASilentEndpoint(t *testing.T) {
	silent := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-silent }))
	defer srv.Close()
	defer close(silent)
	done := make(chan struct{})
	var code int
	var errs string
	go func() {
		defer close(done)
		code, _, errs = sublet("top", "-metrics", srv.URL, "-n", "1", "-interval", "10ms")
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("sublet top still waiting for the endpoint after 20 s")
	}
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "top: "+srv.URL+" did not answer within 2s")
}
