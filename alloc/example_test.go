package alloc_test

import (
	"errors"
	"fmt"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device/sim"
)

// A first session with the caching allocator: a request is rounded up and served from
// a segment rented from the device; freed, it stays cached for the next request;
// EmptyCache gives the segment back. Programs usually take the device's shared
// allocator, alloc.For(dev), which reads SUBLET_ALLOC_CONF; New makes a private one
// with the configuration given.
func Example() {
	dev, _ := sim.New(sim.Options{Capacity: 1 << 30}) // a simulated 1 GiB GPU
	a, _ := alloc.New(dev, alloc.Config{})
	show := func(moment string) {
		st := a.Stats()
		fmt.Printf("%-22s requested %7d  allocated %7d  reserved %7d  device mallocs %d\n", moment,
			st.RequestedBytes[alloc.StatAll].Current, st.AllocatedBytes[alloc.StatAll].Current,
			st.ReservedBytes[alloc.StatAll].Current, st.NumDeviceAlloc)
	}

	p, _ := a.Alloc(1000, 0) // stream 0, the default stream
	show("after Alloc(1000):")
	_ = a.Free(p)
	show("after Free:")
	q, _ := a.Alloc(4000, 0)
	show("after Alloc(4000):")
	_ = a.Free(q)
	_ = a.EmptyCache()
	show("after EmptyCache:")
	// Output:
	// after Alloc(1000):     requested    1000  allocated    1024  reserved 2097152  device mallocs 1
	// after Free:            requested       0  allocated       0  reserved 2097152  device mallocs 1
	// after Alloc(4000):     requested    4000  allocated    4096  reserved 2097152  device mallocs 1
	// after EmptyCache:      requested       0  allocated       0  reserved       0  device mallocs 1
}

// An allocation that cannot be served is an *OOMError: the request, what the
// allocator holds and a hint chosen from those numbers.
func ExampleOOMError() {
	dev, _ := sim.New(sim.Options{Capacity: 64 << 20})
	a, _ := alloc.New(dev, alloc.Config{})
	_, err := a.Alloc(100<<20, 0)
	var oom *alloc.OOMError
	if errors.As(err, &oom) {
		fmt.Println("requested", oom.Requested, "segment", oom.SegmentSize, "device free", oom.DeviceFree)
		fmt.Println("hint:", oom.Hint)
	}
	// Output:
	// requested 104857600 segment 104857600 device free 67108864
	// hint: the request needs more memory than is free on the device (64.00 MiB free, 0 bytes cached): free tensors, reduce the batch size, or free memory held by other processes
}

// The knobs are PyTorch's PYTORCH_CUDA_ALLOC_CONF keys, in its syntax.
func ExampleParseConfig() {
	cfg, err := alloc.ParseConfig("max_split_size_mb:64,expandable_segments:True")
	fmt.Println(cfg.MaxSplitSize, cfg.ExpandableSegments, err)
	_, err = alloc.ParseConfig("max_split_size_mb:8")
	fmt.Println(err)
	// Output:
	// 67108864 true <nil>
	// alloc: config "max_split_size_mb:8": key max_split_size_mb at byte 18: 8 MiB is too small, must be >= 20
}
