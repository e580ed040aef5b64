package memsnap_test

import (
	"bytes"
	"fmt"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/alloc/memsnap"
	"github.com/subletml/sublet/device/sim"
)

// Turn history on, run the workload, take the snapshot: WriteFile("snap.pickle", s)
// gives the file pytorch.org/memory_viz and `python -m torch.cuda._memory_viz` read
// (and `sublet viz` renders). Here it goes through JSON and back, and the segments,
// blocks (segments in address order) and the trace are printed.
func Example() {
	dev, _ := sim.New(sim.Options{Capacity: 1 << 30})
	a, _ := alloc.New(dev, alloc.Config{})
	_ = a.RecordHistory(alloc.HistoryOptions{Trace: true})
	x, _ := a.Alloc(3<<20, 0) // large pool: a 20 MiB segment
	y, _ := a.Alloc(1000, 0)  // small pool: a 2 MiB segment
	_ = a.Free(y)

	var buf bytes.Buffer
	_ = memsnap.WriteJSON(&buf, memsnap.From(a.MemorySnapshot()))
	s, err := memsnap.ReadJSON(&buf)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, seg := range s.Segments {
		fmt.Printf("%s segment of %d bytes:", seg.SegmentType, seg.TotalSize)
		for _, b := range seg.Blocks {
			fmt.Printf(" [%s %d]", b.State, b.Size)
		}
		fmt.Println()
	}
	for _, e := range s.DeviceTraces[0] {
		fmt.Print(e.Action, " ")
	}
	fmt.Println()

	_ = a.Free(x)
	_ = a.EmptyCache()
	// Output:
	// small segment of 2097152 bytes: [inactive 2097152]
	// large segment of 20971520 bytes: [active_allocated 3145728] [inactive 17825792]
	// segment_alloc alloc segment_alloc alloc free_requested free_completed snapshot
}
