package demo

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/cpu"
	"github.com/subletml/sublet/device/named"
	"github.com/subletml/sublet/device/sim"
	"github.com/subletml/sublet/tensor"
)

// Open returns the device a -device flag's name stands for, its caching allocator, and
// whether it keeps data (tensor values can be read back: false only on sim, the meta
// device). cpu, sim (a simulated H200 without data) and sim-backed (the same with data)
// are new devices, each with an allocator of its own, so that every run, and every row
// of an example's table, starts from an empty cache and its figures are exact; cuda and
// cuda:N come from device/named. A name device/named does not know is an error listing
// those it knows; a GPU that is not there, one saying which devices need none.
func Open(name string) (dev device.Device, a *alloc.Allocator, hasData bool, err error) {
	return OpenWith(name, sim.Options{})
}

// OpenWith is Open with the options of a simulated device (its capacity, the memory
// others occupy): o.Backing is the name's (sim-backed), and o is not used for cpu and
// cuda.
func OpenWith(name string, o sim.Options) (dev device.Device, a *alloc.Allocator, hasData bool, err error) {
	if dev, hasData, err = open(name, o); err != nil {
		return nil, nil, false, err
	}
	if a, err = alloc.For(dev); err != nil {
		return nil, nil, false, err
	}
	return dev, a, hasData, nil
}

// Fresh reports whether Open makes a new device, with an allocator of its own, each
// time it opens name: true for cpu, sim and sim-backed; false for a GPU, which is one
// device with one allocator (as PyTorch's) however often it is opened. A name Open
// refuses is Open's error.
func Fresh(name string) (bool, error) {
	n, err := parse(name)
	return err == nil && n.Kind != device.CUDA, err
}

// parse is the device a -device flag's name stands for, "" the machine's default
// (SUBLET_DEVICE, else cuda:0 where usable, else cpu).
func parse(name string) (named.Name, error) {
	n, err := named.Parse(name)
	if name == "" {
		n, err = named.DefaultName()
	}
	if err != nil {
		return n, fmt.Errorf("-device: %w", err)
	}
	return n, nil
}

func open(name string, o sim.Options) (device.Device, bool, error) {
	n, err := parse(name)
	if err != nil {
		return nil, false, err
	}
	switch n.Kind {
	case device.Sim:
		o.Backing = n.Backed
		d, err := sim.New(o)
		return d, n.Backed, err
	case device.CPU:
		d, err := cpu.New(cpu.Options{})
		return d, true, err
	}
	d, err := named.Open(n.String())
	if err != nil {
		return nil, false, fmt.Errorf("%w (no usable NVIDIA GPU here: use -device cpu, sim or sim-backed)", err)
	}
	return d, true, nil
}

// DriverTime is the time a simulated device has charged for its driver calls so far
// (cuMemAlloc, cuMemFree, at the H200's measured costs), 0 on a device whose driver
// calls take real time.
func DriverTime(dev device.Device) time.Duration {
	if d, ok := dev.(*sim.Device); ok {
		return d.Elapsed()
	}
	return 0
}

// DriverTimeText writes a DriverTime to the microsecond, "-" for none (a device whose
// driver calls take real time).
func DriverTimeText(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return d.Round(time.Microsecond).String()
}

// Try runs f, which may panic with a tensor error (out of memory, no kernels), and
// returns that error, or f's own. An error that says dev has no tensor kernels gets
// what to do instead.
func Try(dev device.Device, f func() error) error {
	var ferr error
	err := tensor.Try(func() { ferr = f() })
	if err == nil {
		err = ferr
	}
	if errors.Is(err, tensor.ErrNoKernels) {
		return fmt.Errorf("%s: sublet has no tensor kernels for this device yet (the caching allocator runs there, tensor ops do not); use -device cpu, sim or sim-backed: %w", dev.Name(), err)
	}
	return err
}

// FirstLine is the first line of err's message: an out-of-memory error's headline
// without its report.
func FirstLine(err error) string {
	line, _, _ := strings.Cut(err.Error(), "\n")
	return line
}
