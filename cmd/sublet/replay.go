package main

import (
	"fmt"
	"io"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/alloc/replay"
	"github.com/subletml/sublet/device"
)

func runReplay(args []string, stdout, stderr io.Writer) (err error) {
	fs := newFlagSet("replay", "sublet replay -trace FILE [-conf STRING] [-fraction F] [-device NAME] [-capacity BYTES] [-segments FILE] [-series]", stderr)
	trace := fs.String("trace", "", "trace file (JSONL, plain or gzip)")
	conf := fs.String("conf", "", "allocator configuration, PYTORCH_CUDA_ALLOC_CONF syntax")
	fraction := fs.Float64("fraction", 0, "per-process memory fraction of the device's total memory; 0 sets none")
	dev := fs.String("device", "sim", "device: sim (simulated H200, no backing store), cpu, cuda:N")
	capacity := fs.Int64("capacity", 0, "sim only: total memory in bytes (0: 150109880320, an H200)")
	segments := fs.String("segments", "", "sim only: recorded driver segments to hand out in order: a JSON array of {\"size\",\"addr\"} or a torch_replay.py result")
	series := fs.Bool("series", false, "record the key statistics after every event")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *trace == "" {
		fmt.Fprintln(stderr, "replay: -trace is required")
		fs.Usage()
		return errUsage
	}
	events, err := replay.ReadFile(*trace)
	if err != nil {
		return err
	}
	cfg, err := alloc.ParseConfig(*conf)
	if err != nil {
		return err
	}
	if w := gcThresholdWarning(cfg, *fraction); w != "" {
		fmt.Fprintf(stderr, "replay: warning: %s (here: -fraction)\n", w)
	}
	d, release, err := openDevice(*dev, simShape{capacity: *capacity, segments: *segments})
	if err != nil {
		return err
	}
	defer func() {
		if rerr := release(); err == nil {
			err = rerr
		}
	}()
	a, err := alloc.New(d, cfg)
	if err != nil {
		return err
	}
	if *fraction != 0 {
		if err := a.SetMemoryFraction(*fraction); err != nil {
			return err
		}
	}
	res, err := replay.Replay(a, events, *series)
	if res != nil {
		// A real device is closed only with nothing allocated.
		defer func() {
			if rerr := giveBack(a, res.Live); err == nil {
				err = rerr
			}
		}()
	}
	if err != nil {
		return fmt.Errorf("%s: %w", *trace, err)
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
