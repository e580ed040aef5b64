package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"golang.org/x/term"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/alloc/memmetrics"
	"github.com/subletml/sublet/alloc/memsnap"
	"github.com/subletml/sublet/alloc/replay"
)

func runTop(args []string, stdout, stderr io.Writer) (err error) {
	fs := newFlagSet("top", "sublet top [-interval D] [-n N] (-metrics URL | [-steps N] [replay flags] TRACE)", stderr)
	metrics := fs.String("metrics", "", "a running program's /metrics (package alloc/memmetrics) to watch")
	interval := fs.Duration("interval", time.Second, "time between refreshes")
	frames := fs.Int("n", 0, "stop after N refreshes (0: until q or Ctrl-C; 1 when stdout is not a terminal)")
	steps := fs.Int("steps", 0, "a trace only: events replayed per refresh (0: a hundredth of the trace)")
	f := addReplayFlags(fs)
	if _, err := parseInput(fs, args, &f.trace, traceWhat, false); err != nil {
		return err
	}
	interactive := isTerminal(stdout)
	if *frames == 0 && !interactive {
		*frames = 1
	}
	var src func(ctx context.Context) ([]deviceView, error)
	var status func() string
	switch {
	case *metrics != "" && f.trace != "":
		fmt.Fprintln(stderr, "top: give -metrics or -trace, not both")
		return errUsage
	case *metrics != "":
		timeout := max(2*time.Second, 2**interval)
		src = func(ctx context.Context) ([]deviceView, error) { return scrape(ctx, *metrics, timeout) }
		status = func() string { return "watching " + *metrics }
	case f.trace != "":
		events, a, release, err := f.open(fs, stderr)
		if err != nil {
			return err
		}
		defer func() { err = joinErr(err, release()) }()
		if err := a.RecordHistory(alloc.HistoryOptions{}); err != nil {
			return err
		}
		pl := replay.NewPlayer(a)
		defer func() { err = joinErr(err, giveBack(a, pl.Live())) }()
		per := *steps
		if per <= 0 {
			per = max(1, len(events)/100)
		}
		done := 0
		src = func(context.Context) ([]deviceView, error) {
			for end := min(done+per, len(events)); done < end; done++ {
				if err := pl.Apply(events[done]); err != nil {
					return nil, fmt.Errorf("%s line %d: %w", f.trace, done+1, err)
				}
			}
			return []deviceView{localView(a)}, nil
		}
		status = func() string { return fmt.Sprintf("replaying %s: event %d of %d", f.trace, done, len(events)) }
	case len(alloc.Registered()) == 0:
		fmt.Fprintln(stderr, "top: nothing to watch: give a running program's -metrics URL (package alloc/memmetrics), or a trace to replay")
		fs.Usage()
		return errUsage
	default: // a program that calls runTop itself watches its own devices
		src = func(context.Context) ([]deviceView, error) {
			var vs []deviceView
			for _, a := range alloc.Registered() {
				vs = append(vs, localView(a))
			}
			return vs, nil
		}
		status = func() string { return "this process's devices (use -metrics URL to watch a running program)" }
	}
	return topLoop(stdout, interactive, *interval, *frames, src, status)
}

// topLoop draws a frame every interval until frames are drawn (0: no limit), q or
// Ctrl-C, which also end a src call under way. Interactive output redraws the screen in
// place.
func topLoop(w io.Writer, interactive bool, interval time.Duration, frames int, src func(context.Context) ([]deviceView, error), status func() string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if interactive {
		if fd := int(os.Stdin.Fd()); term.IsTerminal(fd) {
			if old, err := term.MakeRaw(fd); err == nil {
				defer term.Restore(fd, old)
				go func() {
					b := make([]byte, 1)
					for {
						if n, err := os.Stdin.Read(b); err != nil || n == 1 && (b[0] == 'q' || b[0] == 3) {
							stop()
							return
						}
					}
				}()
			}
		}
		fmt.Fprint(w, "\x1b[?25l")
		defer fmt.Fprint(w, "\x1b[?25h\r\n")
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for n := 0; frames == 0 || n < frames; n++ {
		views, err := src(ctx)
		if ctx.Err() != nil {
			return nil // q or Ctrl-C
		}
		if err != nil {
			return err
		}
		frame := renderTop(views, status(), time.Now())
		if interactive {
			frame = "\x1b[H\x1b[2J" + crlf(frame)
		}
		fmt.Fprint(w, frame)
		if frames != 0 && n == frames-1 {
			break
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
	return nil
}

// crlf ends lines with CR LF, which a terminal in raw mode needs.
func crlf(s string) string {
	out := make([]byte, 0, len(s)+64)
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			out = append(out, '\r')
		}
		out = append(out, s[i])
	}
	return string(out)
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// maxTopSites is how many sites top lists per device.
const maxTopSites = 5

// localView reads an allocator of this process.
func localView(a *alloc.Allocator) deviceView {
	st := a.Stats()
	v := deviceView{Name: a.Device().Name(), Free: -1, Total: -1,
		Allocated: st.AllocatedBytes[alloc.StatAll].Current, Reserved: st.ReservedBytes[alloc.StatAll].Current,
		Active: st.ActiveBytes[alloc.StatAll].Current, InactiveSplit: st.InactiveSplitBytes[alloc.StatAll].Current, OOMs: st.NumOOMs}
	if free, total, err := a.Device().MemInfo(); err == nil {
		v.Free, v.Total = free, total
	}
	for _, s := range a.HistorySites() {
		if s.LiveBytes > 0 {
			v.Sites = append(v.Sites, siteRow{Label: memsnap.SiteLabel(s.Frames, s.Tag.Op), Bytes: s.LiveBytes, Blocks: s.LiveBlocks})
		}
	}
	v.Sites = topSites(v.Sites)
	return v
}

// topSites merges rows of one label, sorts them largest first and keeps maxTopSites.
func topSites(rows []siteRow) []siteRow {
	merged := map[string]siteRow{}
	for _, r := range rows {
		m := merged[r.Label]
		m.Label, m.Bytes, m.Blocks = r.Label, m.Bytes+r.Bytes, m.Blocks+r.Blocks
		merged[r.Label] = m
	}
	out := make([]siteRow, 0, len(merged))
	for _, r := range merged {
		out = append(out, r)
	}
	slices.SortFunc(out, func(x, y siteRow) int { return cmp.Or(cmp.Compare(y.Bytes, x.Bytes), cmp.Compare(x.Label, y.Label)) })
	return out[:min(len(out), maxTopSites)]
}

// scrape reads a memmetrics endpoint, giving up after timeout or when ctx ends.
func scrape(ctx context.Context, url string, timeout time.Duration) ([]deviceView, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("top: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if errors.Is(err, context.DeadlineExceeded) {
		return nil, fmt.Errorf("top: %s did not answer within %s (is the program running, or stopped in a debugger?)", url, timeout)
	}
	if err != nil {
		return nil, fmt.Errorf("top: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("top: %s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("top: %s: %w", url, err)
	}
	byDev := map[string]*deviceView{}
	var names []string
	get := func(metric string, set func(v *deviceView, x int64)) {
		fam, ok := fams[metric]
		if !ok {
			return
		}
		for _, m := range fam.Metric {
			dev := label(m, "device")
			v, ok := byDev[dev]
			if !ok {
				v = &deviceView{Name: dev, Free: -1, Total: -1}
				byDev[dev] = v
				names = append(names, dev)
			}
			set(v, int64(value(m)))
		}
	}
	get(memmetrics.MetricName("allocated_bytes.all.current"), func(v *deviceView, x int64) { v.Allocated = x })
	get(memmetrics.MetricName("reserved_bytes.all.current"), func(v *deviceView, x int64) { v.Reserved = x })
	get(memmetrics.MetricName("active_bytes.all.current"), func(v *deviceView, x int64) { v.Active = x })
	get(memmetrics.MetricName("inactive_split_bytes.all.current"), func(v *deviceView, x int64) { v.InactiveSplit = x })
	get(memmetrics.MetricName("num_ooms"), func(v *deviceView, x int64) { v.OOMs = x })
	get("sublet_device_free_bytes", func(v *deviceView, x int64) { v.Free = x })
	get("sublet_device_total_bytes", func(v *deviceView, x int64) { v.Total = x })
	if len(names) == 0 {
		return nil, fmt.Errorf("top: %s has no sublet_ metrics (is it served by package alloc/memmetrics?)", url)
	}
	slices.Sort(names)
	out := make([]deviceView, len(names))
	for i, n := range names {
		out[i] = *byDev[n]
	}
	return out, nil
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.Label {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Counter != nil:
		return m.Counter.GetValue()
	}
	return 0
}
