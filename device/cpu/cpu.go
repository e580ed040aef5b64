// Package cpu is host memory acting as a device: every Malloc is its own anonymous
// mapping from internal/hostmem, outside the Go heap, so Free really returns it to the
// OS; VirtualMemory reserves address space and commits and decommits pages in it.
// Device pointers are the host addresses of the memory.
//
//	dev, err := cpu.New(cpu.Options{})                     // up to the machine's memory
//	small, err := cpu.New(cpu.Options{Capacity: 4 << 30}) // a 4 GiB budget
//
// Invariants:
//   - Held bytes (the sum of live allocations, each rounded up to whole pages, and of
//     mapped pieces) never exceed the capacity. MemInfo reports total = capacity and
//     free = capacity - held, lowered to what the OS reports available where it does
//     (Linux: MemAvailable; Windows: available physical memory).
//   - Work is synchronous: copies and memsets are done when the call returns, and an
//     event completes when it is recorded. Stream and event handles are still checked.
//   - Every method is safe for concurrent use. Lock order: mu, then the table's lock;
//     streamMu is never held with either.
package cpu

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/internal/hostmem"
)

// Options configures the CPU device.
type Options struct {
	// Capacity is the most bytes the device hands out; 0 means the machine's physical
	// memory.
	Capacity int64
}

// Device is host memory as a device. It implements device.Device,
// device.VirtualMemory and device.HostMemory.
type Device struct {
	// capacity is set by New, never changed.
	capacity int64

	// table records live ranges; it has its own lock, taken after mu.
	table hostmem.Table
	// copier implements the copies over table; set by New.
	copier hostmem.Copier

	// mu guards held and serializes changes to the table.
	mu   sync.Mutex
	held int64

	// streamMu guards the fields below it: the live handles and the last ones made.
	streamMu   sync.Mutex
	streams    map[device.Stream]bool
	events     map[device.Event]bool
	lastStream device.Stream
	lastEvent  device.Event
}

var (
	_ device.Device        = (*Device)(nil)
	_ device.VirtualMemory = (*Device)(nil)
	_ device.HostMemory    = (*Device)(nil)
)

// New creates a CPU device.
func New(o Options) (*Device, error) {
	if o.Capacity < 0 {
		return nil, fmt.Errorf("cpu.New: Capacity is %d; want 0 (physical memory) or a positive byte count", o.Capacity)
	}
	if o.Capacity == 0 {
		total, _, err := hostmem.Physical()
		if err != nil {
			return nil, fmt.Errorf("cpu.New: %w", err)
		}
		o.Capacity = total
	}
	d := &Device{
		capacity: o.Capacity,
		streams:  map[device.Stream]bool{0: true},
		events:   map[device.Event]bool{},
	}
	d.copier = hostmem.Copier{Table: &d.table, Name: "cpu", CheckStream: d.checkStream}
	return d, nil
}

// Name is "cpu".
func (d *Device) Name() string { return "cpu" }

// Kind is device.CPU.
func (d *Device) Kind() device.Kind { return device.CPU }

// MemInfo reports the capacity as total, and as free what is left of it, lowered to what
// the OS reports available.
func (d *Device) MemInfo() (free, total int64, err error) {
	_, avail, err := hostmem.Physical()
	if err != nil {
		avail = -1
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	free = d.capacity - d.held
	if avail >= 0 {
		free = min(free, avail)
	}
	return free, d.capacity, nil
}

// hold counts size more bytes held, refusing to exceed the capacity. Caller holds mu.
func (d *Device) hold(op string, size int64) error {
	if size > d.capacity-d.held {
		return fmt.Errorf("cpu: %s(%d): %d of %d bytes held: %w", op, size, d.held, d.capacity, device.ErrOutOfMemory)
	}
	d.held += size
	return nil
}

// Malloc maps size bytes, page-aligned (at least 512 bytes).
func (d *Device) Malloc(size int64) (device.Ptr, error) {
	if size <= 0 {
		return 0, fmt.Errorf("cpu: Malloc(%d): size must be positive", size)
	}
	pages := hostmem.RoundUp(size, hostmem.PageSize())
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.hold("Malloc", pages); err != nil {
		return 0, err
	}
	mem, err := hostmem.Alloc(size)
	if err != nil {
		d.held -= pages
		return 0, fmt.Errorf("cpu: Malloc(%d): %w: %w", size, device.ErrOutOfMemory, err)
	}
	p := device.Ptr(uintptr(unsafe.Pointer(unsafe.SliceData(mem))))
	if err := d.table.AddAllocation(p, size, mem); err != nil {
		d.held -= pages
		return 0, fmt.Errorf("cpu: Malloc(%d): %w", size, errors.Join(err, hostmem.Free(mem)))
	}
	return p, nil
}

// Free unmaps an allocation from Malloc.
func (d *Device) Free(p device.Ptr) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, mem, err := d.table.RemoveAllocation(p)
	if err != nil {
		return fmt.Errorf("cpu: Free(%#x): %w", uintptr(p), err)
	}
	d.held -= int64(len(mem))
	if err := hostmem.Free(mem); err != nil {
		return fmt.Errorf("cpu: Free(%#x): %w", uintptr(p), err)
	}
	return nil
}

// Residency is device.Host: the memory is the process's own.
func (d *Device) Residency() device.Residency { return device.Host }

// Bytes returns the memory at [p, p+n); see device.HostMemory.
func (d *Device) Bytes(p device.Ptr, n int64) ([]byte, bool) { return d.table.Bytes(p, n) }
