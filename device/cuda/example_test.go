package cuda_test

import (
	"errors"
	"fmt"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device/cuda"
)

// Open the first GPU and let the caching allocator manage its memory. Without a
// driver or a GPU, Open says so with an error wrapping ErrNoDriver or ErrNoDevice, and
// the program can fall back to the CPU (device/named's Default does). The output
// depends on the machine, so this example is compiled, not run, by go test.
func Example() {
	d, err := cuda.Open(0)
	if errors.Is(err, cuda.ErrNoDriver) || errors.Is(err, cuda.ErrNoDevice) {
		fmt.Println("no GPU here:", err)
		return
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close() // refuses while anything is still allocated
	free, total, _ := d.MemInfo()
	fmt.Printf("%s: %d MiB free of %d MiB\n", d.Name(), free>>20, total>>20)

	a, _ := alloc.New(d, alloc.Config{})
	p, _ := a.Alloc(1<<20, 0) // from a 2 MiB segment: one cuMemAlloc
	_ = a.Free(p)
	_ = a.EmptyCache() // the segment goes back: Close can succeed
	fmt.Println(a.Stats().NumDeviceAlloc, "device allocation")
}
