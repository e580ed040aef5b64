package recorder_test

import (
	"os"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/alloc/recorder"
	"github.com/subletml/sublet/alloc/replay"
	"github.com/subletml/sublet/device/sim"
)

// Record what a program allocates, then write the trace (r.WriteFile("run.jsonl.gz"))
// and replay it under other settings with `sublet replay -trace run.jsonl.gz -conf
// expandable_segments:True`. Here the trace is printed in its file format instead.
func Example() {
	dev, _ := sim.New(sim.Options{Capacity: 1 << 30})
	a, _ := alloc.New(dev, alloc.Config{})
	r, _ := recorder.Start(a)
	x, _ := a.Alloc(3<<20, 0)
	y, _ := a.Alloc(1000, 0)
	_ = a.Free(x)
	_ = a.EmptyCache()
	r.Stop()

	_ = replay.Write(os.Stdout, r.Events())
	_ = a.Free(y) // after Stop: not recorded
	_ = a.EmptyCache()
	// Output:
	// {"op":"alloc","id":0,"size":3145728}
	// {"op":"alloc","id":1,"size":1000}
	// {"op":"free","id":0}
	// {"op":"empty_cache"}
}
