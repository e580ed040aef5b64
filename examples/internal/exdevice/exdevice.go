// Package exdevice opens the devices sublet's examples train on, by the names of their
// -device flag, and checks what a run leaves behind.
//
// Every device Fresh returns is new, with a caching allocator of its own created on first
// use, so that one row of an example's table never finds the cache another row filled.
package exdevice

import (
	"fmt"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/cpu"
	"github.com/subletml/sublet/device/named"
	"github.com/subletml/sublet/device/sim"
)

// Usage is the help of a -device flag that Fresh reads.
const Usage = "sim (a simulated H200 without data: exact memory, no compute), sim-backed (a simulated H200 with data), cpu or cuda[:N]"

// Fresh opens a new device of a name device/named reads: "sim" is a simulated H200
// without backing store (data is false: ops allocate and compute nothing),
// "sim-backed" one with data, "cpu" host memory; a cuda name is the process's one
// device of that name (device/named), whose allocator the program shares.
func Fresh(name string) (dev device.Device, data bool, err error) {
	n, err := named.Parse(name)
	if err != nil {
		return nil, false, fmt.Errorf("-device: %w", err)
	}
	switch n.Kind {
	case device.Sim:
		d, err := sim.New(sim.Options{Backing: n.Backed})
		return d, n.Backed, err
	case device.CPU:
		d, err := cpu.New(cpu.Options{})
		return d, true, err
	}
	d, err := named.Open(n.String())
	return d, err == nil, err
}

// Drained empties a's cache and returns an error unless it then holds nothing, neither
// allocated nor reserved: what an example checks once it released everything it made.
func Drained(a *alloc.Allocator) error {
	if err := a.EmptyCache(); err != nil {
		return err
	}
	st := a.Stats()
	if n, r := st.AllocatedBytes[alloc.StatAll].Current, st.ReservedBytes[alloc.StatAll].Current; n != 0 || r != 0 {
		return fmt.Errorf("after releasing everything and emptying the cache the allocator on %s holds %d bytes allocated and %d reserved: something leaked", a.Device().Name(), n, r)
	}
	return nil
}
