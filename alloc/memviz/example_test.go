package memviz_test

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/alloc/memsnap"
	"github.com/subletml/sublet/alloc/memviz"
	"github.com/subletml/sublet/device/sim"
)

// Render a snapshot as one HTML page (no network needed to view it): memory over time
// by allocation site, the segment map, the largest live allocations. `sublet viz
// snap.pickle > page.html` does it from the command line, for sublet's snapshots and
// PyTorch's.
func Example() {
	dev, _ := sim.New(sim.Options{Capacity: 1 << 30})
	a, _ := alloc.New(dev, alloc.Config{})
	_ = a.RecordHistory(alloc.HistoryOptions{Trace: true})
	p, _ := a.Alloc(3<<20, 0)
	s := memsnap.From(a.MemorySnapshot())

	var page bytes.Buffer // os.Stdout or a file in a real program
	err := memviz.WriteHTML(&page, s, memviz.Options{Title: "one block"})
	html := page.String()
	fmt.Println("error:", err, "page:", strings.HasPrefix(html, "<!DOCTYPE html>"), "device 0:", strings.Contains(html, `id="device-0"`), "segments drawn:", strings.Count(html, `class="segment"`))
	_ = a.Free(p)
	_ = a.EmptyCache()
	// Output:
	// error: <nil> page: true device 0: true segments drawn: 1
}
