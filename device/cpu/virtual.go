package cpu

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/internal/hostmem"
)

// VirtualMemory: Reserve maps inaccessible address space (nothing committed, nothing
// held), Map commits pages and holds them against the capacity, Unmap decommits them
// (the OS takes the pages back at once), Unreserve unmaps the range.

// Granularity is the OS page size.
func (d *Device) Granularity() int64 { return hostmem.PageSize() }

// Reserve reserves size bytes of address space, a positive multiple of Granularity.
func (d *Device) Reserve(size int64) (device.Ptr, error) {
	if size <= 0 || size%hostmem.PageSize() != 0 {
		return 0, fmt.Errorf("cpu: Reserve(%d): size must be a positive multiple of the page size %d", size, hostmem.PageSize())
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	mem, err := hostmem.Reserve(size)
	if err != nil {
		return 0, fmt.Errorf("cpu: Reserve(%d): %w", size, err)
	}
	p := device.Ptr(uintptr(unsafe.Pointer(unsafe.SliceData(mem))))
	if err := d.table.AddReservation(p, size, mem); err != nil {
		return 0, fmt.Errorf("cpu: Reserve(%d): %w", size, errors.Join(err, hostmem.Release(mem)))
	}
	return p, nil
}

// Map commits [addr, addr+size) inside a reservation.
func (d *Device) Map(addr device.Ptr, size int64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.table.CheckMap(addr, size, hostmem.PageSize()); err != nil {
		return fmt.Errorf("cpu: Map(%#x, %d): %w", uintptr(addr), size, err)
	}
	if err := d.hold("Map", size); err != nil {
		return err
	}
	if err := d.table.Map(addr, size, hostmem.PageSize()); err != nil {
		d.held -= size
		return fmt.Errorf("cpu: Map(%#x, %d): %w", uintptr(addr), size, err)
	}
	return nil
}

// Unmap decommits a piece given to Map.
func (d *Device) Unmap(addr device.Ptr, size int64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.table.Unmap(addr, size); err != nil {
		return fmt.Errorf("cpu: Unmap(%#x, %d): %w", uintptr(addr), size, err)
	}
	d.held -= size
	return nil
}

// Unreserve unmaps a reservation with nothing mapped in it.
func (d *Device) Unreserve(addr device.Ptr, size int64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	mem, err := d.table.RemoveReservation(addr, size)
	if err != nil {
		return fmt.Errorf("cpu: Unreserve(%#x, %d): %w", uintptr(addr), size, err)
	}
	if err := hostmem.Release(mem); err != nil {
		return fmt.Errorf("cpu: Unreserve(%#x, %d): %w", uintptr(addr), size, err)
	}
	return nil
}
