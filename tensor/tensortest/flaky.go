package tensortest

import (
	"fmt"
	"testing"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/tensor"
)

// Flaky is a device whose tensors take their memory from the caching allocator of
// the device it wraps through an allocator of the program's own
// (tensor.AllocatorSource) that can refuse any one allocation as out of memory: an
// op's or a step's every allocation can be made to fail in turn. Its memory is
// asserted on the wrapped device (Requested(t, f.Device)). One goroutine uses it.
type Flaky struct {
	device.Device
	al *flakyAllocator
}

// NewFlaky wraps base.
func NewFlaky(t testing.TB, base device.Device) *Flaky {
	return &Flaky{Device: base, al: &flakyAllocator{inner: Allocator(t, base), sizes: map[device.Ptr]int64{}}}
}

// Refuse makes the nth allocation from now fail (1-based; 0: none) and restarts the
// count Allocs reports.
func (f *Flaky) Refuse(n int) { f.al.n, f.al.calls = n, 0 }

// Allocs is the number of allocations asked for since Refuse, the refused one
// included.
func (f *Flaky) Allocs() int { return f.al.calls }

// Record starts (or stops) recording allocations and frees, and clears what was
// recorded when it starts.
func (f *Flaky) Record(on bool) {
	f.al.log = on
	if on {
		f.al.events = nil
	}
}

// Events is what was recorded: each allocation's size, each free's as a negative
// size, in order.
func (f *Flaky) Events() []int64 { return f.al.events }

// TensorAllocator is the refusing allocator.
func (f *Flaky) TensorAllocator() tensor.Allocator { return f.al }

// Bytes forwards to the wrapped device's host memory.
func (f *Flaky) Bytes(p device.Ptr, n int64) ([]byte, bool) {
	return f.Device.(device.HostMemory).Bytes(p, n)
}

// flakyAllocator is the allocator of a Flaky.
type flakyAllocator struct {
	inner    *alloc.Allocator
	n, calls int
	log      bool
	events   []int64
	sizes    map[device.Ptr]int64 // of the live blocks
}

func (f *flakyAllocator) Alloc(size int64, s device.Stream) (device.Ptr, error) {
	f.calls++
	if f.calls == f.n {
		return 0, fmt.Errorf("tensortest: allocation %d refused: %w", f.calls, device.ErrOutOfMemory)
	}
	p, err := f.inner.Alloc(size, s)
	if err != nil {
		return 0, err
	}
	f.sizes[p] = size
	if f.log {
		f.events = append(f.events, size)
	}
	return p, nil
}

func (f *flakyAllocator) Free(p device.Ptr) error {
	if f.log {
		f.events = append(f.events, -f.sizes[p])
	}
	delete(f.sizes, p)
	return f.inner.Free(p)
}
