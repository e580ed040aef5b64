package main

import (
	"fmt"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/cpu"
	"github.com/subletml/sublet/device/cuda"
	"github.com/subletml/sublet/device/named"
	"github.com/subletml/sublet/device/sim"
)

// simShape is what the command line may say about a simulated device.
type simShape struct {
	// capacity in bytes; 0 is sim.DefaultCapacity (an H200).
	capacity int64
	// segments is a file of recorded driver addresses (sim.LoadSegments); "" for none.
	segments string
}

func (s simShape) isZero() bool { return s == simShape{} }

// deviceUsage is the help of the -device flag of the commands that open a device.
const deviceUsage = "device: " + named.Usage

// openDevice returns a new device of the kind a name (device/named's names) selects,
// and the function that gives it back: sim and sim-backed take shape; cuda and cuda:N
// open the GPU through libcuda.so.1, loaded at run time. The device is the command's
// own, not named's shared one: its allocator starts empty and its settings are the
// command's.
func openDevice(name string, shape simShape) (device.Device, func() error, error) {
	noop := func() error { return nil }
	n, err := named.Parse(name)
	if err != nil {
		return nil, nil, fmt.Errorf("-device: %w", err)
	}
	if n.Kind != device.Sim && !shape.isZero() {
		return nil, nil, fmt.Errorf("device %s: -capacity and -segments shape the simulated device only (use -device sim)", n)
	}
	switch n.Kind {
	case device.Sim:
		o := sim.Options{Capacity: shape.capacity, Backing: n.Backed}
		if shape.segments != "" {
			segs, err := sim.LoadSegments(shape.segments)
			if err != nil {
				return nil, nil, err
			}
			o.Segments = segs
		}
		d, err := sim.New(o)
		return d, noop, err
	case device.CPU:
		d, err := cpu.New(cpu.Options{})
		return d, noop, err
	}
	d, err := cuda.Open(n.Ordinal)
	if err != nil {
		return nil, nil, fmt.Errorf("device %s: %w (-device sim simulates an H200 without a GPU)", n, err)
	}
	return d, d.Close, nil
}
