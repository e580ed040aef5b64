package main

import (
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/alloc/memsnap"
	"github.com/subletml/sublet/alloc/replay"
)

func runSnapshot(args []string, stdout, stderr io.Writer) (err error) {
	fs := newFlagSet("snapshot", "sublet snapshot [-o FILE] [-at end|peak|EVENT] [-max-entries N] [-conf STRING] [-fraction F] [-device NAME] [-capacity BYTES] [-segments FILE] TRACE (or -trace TRACE)", stderr)
	f := addReplayFlags(fs)
	out := fs.String("o", "snapshot.pickle", `output: a pickle (PyTorch's tools read it), JSON when the name ends in ".json"`)
	maxEntries := fs.Int("max-entries", 0, "history ring size: the newest N events are kept (0: the whole trace)")
	at := fs.String("at", "end", "when to take the snapshot: at the end of the trace (often nothing is allocated then), at the peak of live bytes, or after event EVENT (0-based)")
	if _, err := parseInput(fs, args, &f.trace, traceWhat, true); err != nil {
		return err
	}
	events, a, release, err := f.open(fs, stderr)
	if err != nil {
		return err
	}
	defer func() { err = joinErr(err, release()) }()
	last, err := snapshotAt(*at, events)
	if err != nil {
		fmt.Fprintf(stderr, "snapshot: %v\n", err)
		fs.Usage()
		return errUsage
	}
	events = events[:last+1]
	n := *maxEntries
	if n == 0 {
		n = math.MaxInt // the ring only grows as events come
	}
	if err := a.RecordHistory(alloc.HistoryOptions{Trace: true, MaxEntries: n}); err != nil {
		return err
	}
	p := newProgress(stderr, "replaying "+f.trace, len(events))
	res, err := replay.ReplayWith(a, events, replay.Options{Progress: p.update})
	if res != nil {
		defer func() { err = joinErr(err, giveBack(a, res.Live)) }()
	}
	if err != nil {
		return fmt.Errorf("%s: %w", f.trace, err)
	}
	s := memsnap.From(a.MemorySnapshot())
	if err := memsnap.WriteFile(*out, s); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: %d segments, %d events (%d dropped), %d OOMs\n",
		*out, len(s.Segments), len(s.DeviceTraces[0]), s.Devices[0].Dropped, s.Devices[0].Stats["num_ooms"])
	return nil
}

// snapshotAt is the index of the last event to replay before the snapshot: the trace's
// last for "end", the first at the peak of live bytes for "peak", or the number given.
func snapshotAt(at string, events []replay.Event) (int, error) {
	switch at {
	case "end":
		return len(events) - 1, nil
	case "peak":
		return replay.Summarize(events).PeakLiveEvent, nil
	}
	i, err := strconv.Atoi(at)
	if err != nil || i < 0 || i >= len(events) {
		return 0, fmt.Errorf("-at %q: want end, peak or an event number from 0 to %d", at, len(events)-1)
	}
	return i, nil
}
