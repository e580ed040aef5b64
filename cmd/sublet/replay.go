package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/alloc/replay"
	"github.com/subletml/sublet/device"
)

// replayFlags are the flags of the commands that replay a trace through an allocator.
type replayFlags struct {
	trace, conf, dev, segments string
	fraction                   float64
	capacity                   int64
}

func addReplayFlags(fs *flag.FlagSet) *replayFlags {
	f := &replayFlags{}
	fs.StringVar(&f.trace, "trace", "", "trace file (JSONL, plain or gzip): generated, or recorded by package alloc/recorder")
	fs.StringVar(&f.conf, "conf", "", "allocator configuration, PYTORCH_CUDA_ALLOC_CONF syntax")
	fs.Float64Var(&f.fraction, "fraction", 0, "per-process memory fraction of the device's total memory; 0 sets none")
	fs.StringVar(&f.dev, "device", "sim", "device: sim (simulated H200, no backing store), cpu, cuda:N")
	fs.Int64Var(&f.capacity, "capacity", 0, "sim only: total memory in bytes (0: 150109880320, an H200)")
	fs.StringVar(&f.segments, "segments", "", "sim only: recorded driver segments to hand out in order: a JSON array of {\"size\",\"addr\"} or a torch_replay.py result")
	return f
}

// open reads the trace and makes the allocator it is replayed through; release gives
// the device back (call it once the allocator holds nothing).
func (f *replayFlags) open(fs *flag.FlagSet, stderr io.Writer) (events []replay.Event, a *alloc.Allocator, release func() error, err error) {
	if f.trace == "" {
		fmt.Fprintf(stderr, "%s: -trace is required\n", fs.Name())
		fs.Usage()
		return nil, nil, nil, errUsage
	}
	if events, err = replay.ReadFile(f.trace); err != nil {
		return nil, nil, nil, err
	}
	cfg, err := alloc.ParseConfig(f.conf)
	if err != nil {
		return nil, nil, nil, err
	}
	if w := gcThresholdWarning(cfg, f.fraction); w != "" {
		fmt.Fprintf(stderr, "%s: warning: %s (here: -fraction)\n", fs.Name(), w)
	}
	d, release, err := openDevice(f.dev, simShape{capacity: f.capacity, segments: f.segments})
	if err != nil {
		return nil, nil, nil, err
	}
	if a, err = alloc.New(d, cfg); err == nil && f.fraction != 0 {
		err = a.SetMemoryFraction(f.fraction)
	}
	if err != nil {
		return nil, nil, nil, joinErr(err, release())
	}
	return events, a, release, nil
}

// joinErr is err, or else rerr.
func joinErr(err, rerr error) error {
	if err != nil {
		return err
	}
	return rerr
}

func runReplay(args []string, stdout, stderr io.Writer) (err error) {
	fs := newFlagSet("replay", "sublet replay -trace FILE [-conf STRING] [-fraction F] [-device NAME] [-capacity BYTES] [-segments FILE] [-series]", stderr)
	f := addReplayFlags(fs)
	series := fs.Bool("series", false, "record the key statistics after every event")
	if err := parseFlags(fs, args); err != nil {
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
	return writeJSON(stdout, res)
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
