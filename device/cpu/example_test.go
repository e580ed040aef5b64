package cpu_test

import (
	"fmt"

	"github.com/subletml/sublet/device/cpu"
)

// Host memory as a device: each Malloc is its own anonymous mapping outside the Go
// heap, and Free gives it back to the operating system. Copies are synchronous.
func Example() {
	d, _ := cpu.New(cpu.Options{Capacity: 64 << 20})
	_, total, _ := d.MemInfo()
	fmt.Println(d.Name(), d.Kind(), d.Residency(), "capacity", total>>20, "MiB")

	p, _ := d.Malloc(4096)
	_ = d.CopyToDevice(p, []byte("hello, device"), 0)
	out := make([]byte, 13)
	_ = d.CopyToHost(out, p, 0)
	fmt.Println(string(out))
	_ = d.Free(p)
	// Output:
	// cpu cpu host capacity 64 MiB
	// hello, device
}
