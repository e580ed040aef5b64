package sim

import (
	"errors"
	"fmt"
	"time"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/internal/hostmem"
)

// VirtualMemory: reservations come from their own region of the address space (lowest
// free address first), so they never collide with Malloc addresses. A Map counts as a raw
// allocation like Malloc (capacity, faults, half a pair's cost for the piece's size, in
// Stats().InUse); an Unmap like Free. Reserve and Unreserve cost nothing and take no
// capacity.

// Granularity is 2 MiB, as on the H200.
func (d *Device) Granularity() int64 { return Granularity }

// Reserve reserves size bytes of address space, a positive multiple of Granularity.
func (d *Device) Reserve(size int64) (device.Ptr, error) {
	if size <= 0 || size%Granularity != 0 {
		return 0, fmt.Errorf("sim: Reserve(%d): size must be a positive multiple of the granularity %d", size, Granularity)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	addr, ok := d.reserved.takeLow(uint64(size), uint64(Granularity))
	if !ok {
		return 0, fmt.Errorf("sim: Reserve(%d): address space for reservations exhausted (%d bytes free in pieces): unreserve ranges first", size, d.reserved.bytes())
	}
	var mem []byte
	if d.backing {
		var err error
		if mem, err = hostmem.Reserve(size); err != nil {
			d.reserved.give(addr, uint64(size))
			return 0, fmt.Errorf("sim: Reserve(%d): backing store: %w", size, err)
		}
	}
	p := device.Ptr(addr)
	if err := d.table.AddReservation(p, size, mem); err != nil {
		d.reserved.give(addr, uint64(size))
		if mem != nil {
			err = errors.Join(err, hostmem.Release(mem))
		}
		return 0, fmt.Errorf("sim: Reserve(%d): %w", size, err)
	}
	d.stats.Reserves++
	return p, nil
}

// Map backs [addr, addr+size) inside a reservation with memory.
func (d *Device) Map(addr device.Ptr, size int64) error {
	sleep, err := d.mapPiece(addr, size)
	time.Sleep(sleep)
	return err
}

func (d *Device) mapPiece(addr device.Ptr, size int64) (time.Duration, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.table.CheckMap(addr, size, Granularity); err != nil {
		return 0, fmt.Errorf("sim: Map(%#x, %d): %w", uintptr(addr), size, err)
	}
	if err := d.admit("Map", size); err != nil {
		return 0, err
	}
	if err := d.table.Map(addr, size, Granularity); err != nil {
		d.stats.InUse -= size
		return 0, fmt.Errorf("sim: Map(%#x, %d): %w", uintptr(addr), size, err)
	}
	d.stats.Maps++
	d.stats.Peak = max(d.stats.Peak, d.stats.InUse)
	return d.charge(d.cost.acquire(size)), nil
}

// Unmap releases the memory behind a piece given to Map.
func (d *Device) Unmap(addr device.Ptr, size int64) error {
	sleep, err := d.unmapPiece(addr, size)
	time.Sleep(sleep)
	return err
}

func (d *Device) unmapPiece(addr device.Ptr, size int64) (time.Duration, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.table.Unmap(addr, size); err != nil {
		return 0, fmt.Errorf("sim: Unmap(%#x, %d): %w", uintptr(addr), size, err)
	}
	d.stats.InUse -= size
	d.stats.Unmaps++
	return d.charge(d.cost.release(size)), nil
}

// Remap moves the memory of piece [from, from+size) to [to, to+size), charged as an
// Unmap (its cost on a GPU is not measured yet). It takes no capacity and is not a raw
// allocation for fault injection.
func (d *Device) Remap(from, to device.Ptr, size int64) error {
	sleep, err := d.remapPiece(from, to, size)
	time.Sleep(sleep)
	return err
}

func (d *Device) remapPiece(from, to device.Ptr, size int64) (time.Duration, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.table.CheckMap(to, size, Granularity); err != nil {
		return 0, fmt.Errorf("sim: Remap(%#x to %#x, %d): %w", uintptr(from), uintptr(to), size, err)
	}
	if err := d.table.Unmap(from, size); err != nil {
		return 0, fmt.Errorf("sim: Remap(%#x to %#x, %d): %w", uintptr(from), uintptr(to), size, err)
	}
	if err := d.table.Map(to, size, Granularity); err != nil {
		// CheckMap passed under mu, so only a bug gets here.
		return 0, fmt.Errorf("sim: Remap(%#x to %#x, %d): unmapped but not mapped again: %w", uintptr(from), uintptr(to), size, err)
	}
	d.stats.Remaps++
	return d.charge(d.cost.release(size)), nil
}

// Unreserve gives back a reservation with nothing mapped in it.
func (d *Device) Unreserve(addr device.Ptr, size int64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	mem, err := d.table.RemoveReservation(addr, size)
	if err != nil {
		return fmt.Errorf("sim: Unreserve(%#x, %d): %w", uintptr(addr), size, err)
	}
	d.reserved.give(uint64(addr), uint64(size))
	d.stats.Unreserves++
	if mem != nil {
		if err := hostmem.Release(mem); err != nil {
			return fmt.Errorf("sim: Unreserve(%#x, %d): backing store: %w", uintptr(addr), size, err)
		}
	}
	return nil
}
