package main

import (
	"sync/atomic"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/tensor"
)

// direct is an allocator of the program's own for a device's tensors (tensor.Allocator):
// every Alloc is a Malloc of the device and every Free its Free, nothing cached, as a
// PyTorch pluggable allocator (CUDAPluggableAllocator) that calls cudaMalloc and
// cudaFree does. It counts the tensor allocations it served.
type direct struct {
	dev device.Device
	// allocs counts the Allocs served; changed atomically.
	allocs atomic.Int64
}

// Alloc asks the device for size bytes. The device's refusal wraps
// device.ErrOutOfMemory, which the tensor package reports as the op's out of memory.
func (d *direct) Alloc(size int64, _ device.Stream) (device.Ptr, error) {
	p, err := d.dev.Malloc(size)
	if err == nil {
		d.allocs.Add(1)
	}
	return p, err
}

// Free gives p back to the device at once.
func (d *direct) Free(p device.Ptr) error { return d.dev.Free(p) }

// own is meter whose tensors take their memory from direct instead of the device's
// caching allocator: tensor.AllocatorSource, the hook a device type of the program's own
// implements to choose its tensors' allocator.
type own struct {
	*meter
	al *direct
}

// TensorAllocator is asked at every tensor allocation on the device.
func (o own) TensorAllocator() tensor.Allocator { return o.al }

// Check at compile time that own is a device whose tensors use its allocator.
var (
	_ device.Device          = own{}
	_ tensor.AllocatorSource = own{}
)
