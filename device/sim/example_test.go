package sim_test

import (
	"errors"
	"fmt"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/sim"
)

// A simulated GPU: 1 GiB of which 256 MiB are held by others from the start. Without
// a backing store it keeps no data (Residency Meta): memory is accounted, copies only
// check their ranges. Driver calls are priced by the H200 cost model on a virtual
// clock, so nothing really waits.
func Example() {
	d, _ := sim.New(sim.Options{Capacity: 1 << 30, Occupied: 256 << 20})
	free, total, _ := d.MemInfo()
	fmt.Println("free", free>>20, "MiB of", total>>20, "MiB; residency", d.Residency())

	p, _ := d.Malloc(512 << 20)
	_, err := d.Malloc(512 << 20) // only 256 MiB left
	fmt.Println("second Malloc out of memory:", errors.Is(err, device.ErrOutOfMemory))
	_ = d.Free(p)
	fmt.Println("in use after Free:", d.Stats().InUse, "peak:", d.Stats().Peak>>20, "MiB, virtual time spent:", d.Elapsed())
	// Output:
	// free 768 MiB of 1024 MiB; residency meta
	// second Malloc out of memory: true
	// in use after Free: 0 peak: 512 MiB, virtual time spent: 658.585µs
}
