package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/alloc/replay"
	"github.com/subletml/sublet/device"
)

// replayFlags are the flags of the commands that replay a trace through an allocator.
type replayFlags struct {
	trace, conf, dev, segments string
	fraction                   float64
	capacity                   int64

	// confInForce and confFrom are set by open: the settings the allocator got and
	// where they came from ("-conf", SUBLET_ALLOC_CONF or "default").
	confInForce, confFrom string
}

func addReplayFlags(fs *flag.FlagSet) *replayFlags {
	f := &replayFlags{}
	fs.StringVar(&f.trace, "trace", "", "the "+traceWhat+", when the argument does not give it")
	fs.StringVar(&f.conf, "conf", "", confUsage)
	fs.Float64Var(&f.fraction, "fraction", 0, "per-process memory fraction of the device's total memory; 0 sets none")
	fs.StringVar(&f.dev, "device", "sim", deviceUsage)
	fs.Int64Var(&f.capacity, "capacity", 0, "sim only: total memory in bytes (0: 150109880320, an H200)")
	fs.StringVar(&f.segments, "segments", "", "sim only: recorded driver segments to hand out in order: a JSON array of {\"size\",\"addr\"} or a torch_replay.py result")
	return f
}

// traceWhat says what a trace file is, in usage messages.
const traceWhat = "trace (JSONL, plain or gzip: generated, or recorded by package alloc/recorder)"

// confUsage is the help of a -conf flag that confInForce reads.
const confUsage = "allocator settings, PYTORCH_CUDA_ALLOC_CONF syntax (default: " + alloc.ConfigEnv + `, as the program's own allocator reads it; -conf "" for PyTorch's defaults)`

// confInForce returns the allocator settings a command runs with, parsed, and where they
// came from: -conf when it is given (even empty: the defaults), else SUBLET_ALLOC_CONF,
// which a program's allocator would read (what `sublet info` reports in force).
func confInForce(fs *flag.FlagSet, conf string) (cfg alloc.Config, s, from string, err error) {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "conf" })
	s, from = conf, "-conf"
	if !given {
		s, from = os.Getenv(alloc.ConfigEnv), alloc.ConfigEnv
		if s == "" {
			from = "default"
		}
	}
	cfg, err = alloc.ParseConfig(s)
	if err != nil && from == alloc.ConfigEnv {
		err = fmt.Errorf("%s: %w (fix or unset it, or give -conf)", alloc.ConfigEnv, err)
	}
	return cfg, s, from, err
}

// open reads the trace and makes the allocator it is replayed through; release gives
// the device back (call it once the allocator holds nothing). Settings taken from
// SUBLET_ALLOC_CONF are said on stderr; an empty trace is an error.
func (f *replayFlags) open(fs *flag.FlagSet, stderr io.Writer) (events []replay.Event, a *alloc.Allocator, release func() error, err error) {
	events, cfg, err := f.read(fs, stderr)
	if err != nil {
		return nil, nil, nil, err
	}
	a, release, err = f.allocator(cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	return events, a, release, nil
}

// read reads the trace and the settings in force (open's first half).
func (f *replayFlags) read(fs *flag.FlagSet, stderr io.Writer) ([]replay.Event, alloc.Config, error) {
	events, err := replay.ReadFile(f.trace)
	if err != nil {
		return nil, alloc.Config{}, err
	}
	if len(events) == 0 {
		return nil, alloc.Config{}, fmt.Errorf("%s: the trace has no events: nothing to replay (an empty file, or a recording that saw no allocation)", f.trace)
	}
	cfg, conf, from, err := confInForce(fs, f.conf)
	if err != nil {
		return nil, alloc.Config{}, err
	}
	f.confInForce, f.confFrom = conf, from
	if from == alloc.ConfigEnv {
		fmt.Fprintf(stderr, "%s: allocator settings from %s=%q (-conf overrides)\n", fs.Name(), alloc.ConfigEnv, conf)
	}
	if w := gcThresholdWarning(cfg, f.fraction); w != "" {
		fmt.Fprintf(stderr, "%s: warning: %s (here: -fraction)\n", fs.Name(), w)
	}
	return events, cfg, nil
}

// allocator makes an allocator with cfg (and -fraction) over a new device of the flags'
// kind; release gives the device back once the allocator holds nothing.
func (f *replayFlags) allocator(cfg alloc.Config) (a *alloc.Allocator, release func() error, err error) {
	d, release, err := openDevice(f.dev, simShape{capacity: f.capacity, segments: f.segments})
	if err != nil {
		return nil, nil, err
	}
	if a, err = alloc.New(d, cfg); err == nil && f.fraction != 0 {
		err = a.SetMemoryFraction(f.fraction)
	}
	if err != nil {
		return nil, nil, joinErr(err, release())
	}
	return a, release, nil
}

// header is the runHeader of a replay of events on the device named dev.
func (f *replayFlags) header(dev string, events int) runHeader {
	return runHeader{Trace: f.trace, Device: dev, Conf: f.confInForce, ConfFrom: f.confFrom, Fraction: f.fraction, Events: events}
}

// joinErr is err, or else rerr.
func joinErr(err, rerr error) error {
	if err != nil {
		return err
	}
	return rerr
}

// errOOMs is returned by replay after it printed its result when allocations ran out
// of memory and -allow-oom was not given; the exit status is then exitOOMs.
var errOOMs = errors.New("allocations ran out of memory")

// exitOOMs is the exit status of a replay whose allocations ran out of memory.
const exitOOMs = 3

const replaySynopsis = `sublet replay [-conf STRING] [-fraction F] [-device NAME] [-capacity BYTES] [-segments FILE] [-series] [-allow-oom] TRACE (or -trace TRACE)

Replays the trace through a new caching allocator and prints one JSON object on stdout:
the trace, the device, the settings (conf, and conf_from: -conf, SUBLET_ALLOC_CONF or
default), the fraction, the event and OOM counts, the final memory_stats() (final) and,
with -series, a row of the keys after every event, its first column the event's index.
Allocations that run out of memory are replayed as PyTorch's torch_replay.py does (the
trace's later free of them is skipped) and reported on stderr.

Exit status: 0; 3 when allocations ran out of memory (the JSON is printed all the same;
-allow-oom makes it 0); 1 on error (an empty trace is one); 2 on bad usage.`

// replayOutput is what sublet replay prints: the keys of torch_replay.py's result
// (trace, conf, fraction, keys, series, final) and sublet's own, all snake_case.
type replayOutput struct {
	runHeader
	// TotalCapacity is the device's memory, as torch_replay.py records it: runs that
	// depend on it (a memory fraction, running out) match only on a card of that size.
	TotalCapacity int64            `json:"total_capacity"`
	OOMs          int              `json:"ooms"`
	Keys          []string         `json:"keys"`
	Series        [][]int64        `json:"series,omitempty"`
	Final         map[string]int64 `json:"final"`
}

// runHeader is what replay and compare print first: the trace, the device, the settings
// and where they came from, the fraction and the number of events.
type runHeader struct {
	Trace    string  `json:"trace"`
	Device   string  `json:"device"`
	Conf     string  `json:"conf"`
	ConfFrom string  `json:"conf_from"`
	Fraction float64 `json:"fraction"`
	Events   int     `json:"events"`
}

// eventKey names the first column of the series rows: the event's 0-based index.
const eventKey = "event"

func runReplay(args []string, stdout, stderr io.Writer) (err error) {
	fs := newFlagSet("replay", replaySynopsis, stderr)
	f := addReplayFlags(fs)
	series := fs.Bool("series", false, "record the key statistics after every event, each row led by the event's index")
	allowOOM := fs.Bool("allow-oom", false, "exit 0 even when allocations ran out of memory (they are still reported on stderr)")
	if _, err := parseInput(fs, args, &f.trace, traceWhat, true); err != nil {
		return err
	}
	events, a, release, err := f.open(fs, stderr)
	if err != nil {
		return err
	}
	defer func() { err = joinErr(err, release()) }()
	res, err := replay.Replay(a, events, *series)
	if res != nil {
		// A real device is closed only with nothing allocated.
		defer func() { err = joinErr(err, giveBack(a, res.Live)) }()
	}
	if err != nil {
		return fmt.Errorf("%s: %w", f.trace, err)
	}
	_, total, err := a.Device().MemInfo()
	if err != nil {
		return err
	}
	out := replayOutput{runHeader: f.header(a.Device().Name(), len(events)), TotalCapacity: total, OOMs: res.OOMs,
		Keys: append([]string{eventKey}, res.Keys...), Final: res.Final}
	for i, row := range res.Series {
		out.Series = append(out.Series, append([]int64{int64(i)}, row...))
	}
	if err := writeJSON(stdout, out); err != nil {
		return err
	}
	if res.OOMs == 0 {
		return nil
	}
	allocs := 0
	for _, e := range events {
		if e.Op == replay.OpAlloc {
			allocs++
		}
	}
	fmt.Fprintf(stderr, "replay: %d of %d allocations ran out of memory; the first, %v\n", res.OOMs, allocs, res.FirstOOM)
	if *allowOOM {
		return nil
	}
	return errOOMs
}

// giveBack frees the blocks a replay left live and releases the allocator's cache.
func giveBack(a *alloc.Allocator, live []device.Ptr) error {
	for _, p := range live {
		if err := a.Free(p); err != nil {
			return err
		}
	}
	return a.EmptyCache()
}
