package main

import (
	"fmt"
	"io"
	"math"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/alloc/memsnap"
	"github.com/subletml/sublet/alloc/replay"
)

func runSnapshot(args []string, stdout, stderr io.Writer) (err error) {
	fs := newFlagSet("snapshot", "sublet snapshot [-o FILE] [-max-entries N] [-conf STRING] [-fraction F] [-device NAME] [-capacity BYTES] [-segments FILE] TRACE (or -trace TRACE)", stderr)
	f := addReplayFlags(fs)
	out := fs.String("o", "snapshot.pickle", `output: a pickle (PyTorch's tools read it), JSON when the name ends in ".json"`)
	maxEntries := fs.Int("max-entries", 0, "history ring size: the newest N events are kept (0: the whole trace)")
	if _, err := parseInput(fs, args, &f.trace, traceWhat, true); err != nil {
		return err
	}
	events, a, release, err := f.open(fs, stderr)
	if err != nil {
		return err
	}
	defer func() { err = joinErr(err, release()) }()
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
