package memplot_test

import (
	"bytes"
	"fmt"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/alloc/memplot"
	"github.com/subletml/sublet/alloc/replay"
	"github.com/subletml/sublet/device/sim"
)

// Replay a trace with its series on and draw it: allocated, reserved and active
// memory after each event, OOMs marked. `sublet plot FILE` does the same from the
// command line, for a trace or a snapshot.
func Example() {
	events, _ := replay.Generate("blog", 1)
	dev, _ := sim.New(sim.Options{})
	a, _ := alloc.New(dev, alloc.Config{})
	res, _ := replay.Replay(a, events, true)
	s, _ := memplot.FromReplay(res)
	fmt.Println(len(events), "events,", len(s.Reserved), "points, peak reserved", res.Final["reserved_bytes.all.peak"]>>20, "MiB")

	var png bytes.Buffer // a file in a real program
	err := memplot.WritePNG(&png, s, "the blog's pattern")
	fmt.Println(err, bytes.HasPrefix(png.Bytes(), []byte("\x89PNG")))

	for _, p := range res.Live { // what the trace left allocated
		_ = a.Free(p)
	}
	_ = a.EmptyCache()
	fmt.Println("reserved at the end:", a.Stats().ReservedBytes[alloc.StatAll].Current)
	// Output:
	// 370 events, 370 points, peak reserved 560 MiB
	// <nil> true
	// reserved at the end: 0
}
