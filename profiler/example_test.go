package profiler_test

import (
	"fmt"
	"time"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device/sim"
	"github.com/subletml/sublet/profiler"
)

// Profile named regions of a program (torch.profiler's record_function): each region
// gets its calls, its time and the memory allocated while it was open, nested regions
// apart. The fake clock (1 µs per reading) makes the times of this example exact.
func Example() {
	dev, _ := sim.New(sim.Options{Capacity: 1 << 30})
	a, _ := alloc.New(dev, alloc.Config{})
	var t time.Duration
	p, _ := profiler.Start(profiler.Options{Now: func() time.Duration { t += time.Microsecond; return t }}, a)

	for range 3 {
		step := p.OpBegin("step", dev)
		fwd := p.OpBegin("forward", dev)
		act, _ := a.Alloc(8<<20, 0) // an activation
		p.OpEnd(fwd)
		bwd := p.OpBegin("backward", dev)
		grad, _ := a.Alloc(4<<20, 0)
		_ = a.Free(act) // backward used it
		_ = a.Free(grad)
		p.OpEnd(bwd)
		p.OpEnd(step)
	}
	p.Stop()
	// p.Table(os.Stdout, profiler.SortSelfTime, 10, false) prints torch.profiler's
	// key_averages().table(); p.WriteChromeTrace(f) writes a trace for ui.perfetto.dev.
	for _, o := range p.KeyAverages(false) {
		fmt.Printf("%-8s calls %d  total %v  self %v  allocated %d MiB (self %d MiB)  peak %d MiB\n",
			o.Op, o.Calls, o.TotalTime, o.SelfTime, o.Allocated>>20, o.SelfAllocated>>20, o.Peak>>20)
	}
	_ = a.EmptyCache()
	// Output:
	// forward  calls 3  total 7µs  self 7µs  allocated 24 MiB (self 24 MiB)  peak 8 MiB
	// backward calls 3  total 12µs  self 12µs  allocated 12 MiB (self 12 MiB)  peak 4 MiB
	// step     calls 3  total 28µs  self 9µs  allocated 36 MiB (self 0 MiB)  peak 12 MiB
}
