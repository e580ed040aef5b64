package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/subletml/sublet/alloc/memplot"
	"github.com/subletml/sublet/alloc/memsnap"
	"github.com/subletml/sublet/alloc/replay"
)

func runPlot(args []string, stdout, stderr io.Writer) (err error) {
	fs := newFlagSet("plot", "sublet plot [-o FILE.png] [-title TEXT] [-gpu N] [-conf STRING] [-fraction F] [-device NAME] [-capacity BYTES] SNAPSHOT|TRACE (or -trace TRACE)", stderr)
	out := fs.String("o", "memory.png", "the PNG to write")
	title := fs.String("title", "", "the plot's title (default: the input's name)")
	dev := fs.Int("gpu", 0, "snapshot only: the device index to plot")
	f := addReplayFlags(fs)
	path, err := parseInput(fs, args, &f.trace, "snapshot (pickle or JSON) or trace (JSONL, replayed with the flags given)", true)
	if err != nil {
		return err
	}
	if *title == "" {
		*title = path
	}
	isTrace, err := looksLikeTrace(path)
	if err != nil {
		return err
	}
	var s memplot.Series
	if isTrace {
		events, a, release, err := f.open(fs, stderr)
		if err != nil {
			return err
		}
		defer func() { err = joinErr(err, release()) }()
		p := newProgress(stderr, "replaying "+path, len(events))
		res, err := replay.ReplayWith(a, events, replay.Options{Series: true, Progress: p.update})
		if res != nil {
			defer func() { err = joinErr(err, giveBack(a, res.Live)) }()
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if s, err = memplot.FromReplay(res); err != nil {
			return err
		}
	} else {
		snap, err := memsnap.ReadFile(path)
		if err != nil {
			return err
		}
		tl, err := memsnap.TimelineOf(snap, *dev)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if len(tl.Points) == 0 {
			return fmt.Errorf("%s: device %d's trace is empty (record history with Trace on to plot a snapshot)", path, *dev)
		}
		s = memplot.FromTimeline(tl)
	}
	w, err := os.Create(*out)
	if err != nil {
		return err
	}
	if err := memplot.WritePNG(w, s, *title); err != nil {
		w.Close()
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: %d events, %d OOMs\n", *out, len(s.Allocated), len(s.OOMs))
	return nil
}

// looksLikeTrace tells a replay trace (JSONL of objects with an "op" key, in any order
// as replay reads them, or gzip) from a snapshot (a pickle, or one JSON object with
// "segments").
func looksLikeTrace(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadSlice('\n')
	if err != nil && err != io.EOF && err != bufio.ErrBufferFull {
		return false, err
	}
	switch {
	case len(line) >= 2 && line[0] == 0x1f && line[1] == 0x8b:
		return true, nil
	case len(line) >= 1 && line[0] == 0x80:
		return false, nil
	}
	var first map[string]json.RawMessage
	if json.Unmarshal(line, &first) != nil {
		return false, nil // a snapshot spread over lines, or longer than the buffer
	}
	_, op := first["op"]
	return op, nil
}
