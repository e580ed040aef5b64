package memprof_test

import (
	"fmt"
	"strings"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/alloc/memprof"
	"github.com/subletml/sublet/device/sim"
)

// Record history, then profile: memprof.Write(f, a) writes the file `go tool pprof
// -top FILE` reads, and Handler serves it over HTTP. Here the profile is read in Go:
// one sample per allocation stack, its in-use bytes last.
func Example() {
	dev, _ := sim.New(sim.Options{Capacity: 1 << 30})
	a, _ := alloc.New(dev, alloc.Config{})
	_ = a.RecordHistory(alloc.HistoryOptions{}) // stacks are recorded from here on
	p, _ := a.Alloc(3<<20, 0)

	prof := memprof.Profile(a)
	var types []string
	for _, st := range prof.SampleType {
		types = append(types, st.Type)
	}
	fmt.Println(strings.Join(types, " "))
	for _, s := range prof.Sample {
		fmt.Println(s.Value, "allocated in", s.Location[0].Line[0].Function.Name)
	}
	_ = a.Free(p)
	_ = a.EmptyCache()
	// Output:
	// alloc_objects alloc_space inuse_objects inuse_space
	// [1 3145728 1 3145728] allocated in github.com/subletml/sublet/alloc/memprof_test.Example
}
