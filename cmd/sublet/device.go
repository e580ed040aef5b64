package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/cpu"
	"github.com/subletml/sublet/device/cuda"
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

// openDevice returns the device a name selects and the function that gives it back:
//
//	sim      simulated H200 without backing store (the default); shape applies
//	cpu      host memory
//	cuda:N   NVIDIA GPU N, through libcuda.so.1 loaded at run time
func openDevice(name string, shape simShape) (device.Device, func() error, error) {
	noop := func() error { return nil }
	if name != "sim" && !shape.isZero() {
		return nil, nil, fmt.Errorf("device %s: -capacity and -segments shape the simulated device only (use -device sim)", name)
	}
	switch {
	case name == "sim":
		o := sim.Options{Capacity: shape.capacity}
		if shape.segments != "" {
			segs, err := sim.LoadSegments(shape.segments)
			if err != nil {
				return nil, nil, err
			}
			o.Segments = segs
		}
		d, err := sim.New(o)
		return d, noop, err
	case name == "cpu":
		d, err := cpu.New(cpu.Options{})
		return d, noop, err
	case strings.HasPrefix(name, "cuda:"):
		n, err := strconv.Atoi(strings.TrimPrefix(name, "cuda:"))
		if err != nil || n < 0 {
			return nil, nil, fmt.Errorf("device %q: want cuda:N with N a GPU ordinal", name)
		}
		d, err := cuda.Open(n)
		if err != nil {
			return nil, nil, fmt.Errorf("device %s: %w (-device sim simulates an H200 without a GPU)", name, err)
		}
		return d, d.Close, nil
	}
	return nil, nil, fmt.Errorf("unknown device %q: want sim, cpu or cuda:N", name)
}
