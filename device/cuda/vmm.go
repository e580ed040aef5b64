package cuda

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/subletml/sublet/device"
)

// memAllocationProp is CUmemAllocationProp (cuda.h), 32 bytes.
type memAllocationProp struct {
	typ                  uint32 // CUmemAllocationType
	requestedHandleTypes uint32 // CUmemAllocationHandleType: none
	locationType         uint32 // CUmemLocation.type
	locationID           int32  // CUmemLocation.id: the device ordinal
	win32HandleMetaData  uintptr
	compressionType      uint8
	gpuDirectRDMACapable uint8
	usage                uint16
	reserved             [4]uint8
}

// memAccessDesc is CUmemAccessDesc (cuda.h), 12 bytes.
type memAccessDesc struct {
	locationType uint32
	locationID   int32
	flags        uint32 // CUmemAccess_flags
}

// mapping is the physical allocation behind one Map call. Guarded by Device.mu.
type mapping struct {
	size   int64
	handle uint64 // CUmemGenericAllocationHandle
}

// initVirtualMemory prepares the VMM descriptions for this GPU: pinned device memory
// located on it, readable and writable from it.
func (d *Device) initVirtualMemory() error {
	if !d.props.VirtualMemory {
		return nil
	}
	d.allocProp = memAllocationProp{typ: memAllocationPinned, locationType: memLocationDevice, locationID: int32(d.props.Ordinal)}
	d.access = memAccessDesc{locationType: memLocationDevice, locationID: int32(d.props.Ordinal), flags: memAccessReadWrite}
	var g uintptr
	if r := d.call(d.drv.cuMemGetAllocationGranularity, uintptr(unsafe.Pointer(&g)), uintptr(unsafe.Pointer(&d.allocProp)), granularityMinimum); r != success {
		return d.drv.errorf(r, "cuMemGetAllocationGranularity(%s)", d.name)
	}
	d.granularity = int64(g)
	return nil
}

// Granularity is the VMM allocation granularity (2 MiB on the H200), or 0 when the GPU
// has no VMM support, in which case Reserve fails.
func (d *Device) Granularity() int64 { return d.granularity }

func (d *Device) checkGranules(op string, addr device.Ptr, size int64) error {
	if d.granularity == 0 {
		return fmt.Errorf("cuda: %s: %s: the GPU does not support virtual memory management (expandable segments need it)", d.name, op)
	}
	if size <= 0 || size%d.granularity != 0 || int64(addr)%d.granularity != 0 {
		return fmt.Errorf("cuda: %s: %s(%#x, %d bytes): address and size must be positive multiples of the granularity %d", d.name, op, uintptr(addr), size, d.granularity)
	}
	return nil
}

// Reserve reserves size bytes of GPU address space (cuMemAddressReserve).
func (d *Device) Reserve(size int64) (device.Ptr, error) {
	if err := d.checkGranules("Reserve", 0, size); err != nil {
		return 0, err
	}
	d.vmMu.Lock()
	defer d.vmMu.Unlock()
	var p device.Ptr
	if r := d.call(d.drv.cuMemAddressReserve, uintptr(unsafe.Pointer(&p)), uintptr(size), 0, 0, 0); r != success {
		return 0, d.drv.errorf(r, "cuMemAddressReserve(%d bytes)", size)
	}
	if err := d.table.AddReservation(p, size, nil); err != nil {
		d.call(d.drv.cuMemAddressFree, uintptr(p), uintptr(size))
		return 0, fmt.Errorf("cuda: %s: cuMemAddressReserve(%d bytes) returned %#x: %w", d.name, size, uintptr(p), err)
	}
	d.count(&d.usage.Reservations, &d.usage.ReservedBytes, 1, size)
	return p, nil
}

// Unreserve frees a whole range from Reserve (cuMemAddressFree) once nothing in it is
// mapped.
func (d *Device) Unreserve(addr device.Ptr, size int64) error {
	d.vmMu.Lock()
	defer d.vmMu.Unlock()
	if _, err := d.table.RemoveReservation(addr, size); err != nil {
		return fmt.Errorf("cuda: %s: Unreserve: %w", d.name, err)
	}
	if r := d.call(d.drv.cuMemAddressFree, uintptr(addr), uintptr(size)); r != success {
		if err := d.table.AddReservation(addr, size, nil); err != nil {
			return fmt.Errorf("cuda: %s: Unreserve(%#x): %w, then %w", d.name, uintptr(addr), d.drv.errorf(r, "cuMemAddressFree"), err)
		}
		return d.drv.errorf(r, "cuMemAddressFree(%#x, %d bytes)", uintptr(addr), size)
	}
	d.count(&d.usage.Reservations, &d.usage.ReservedBytes, -1, size)
	return nil
}

// Map backs [addr, addr+size), inside one reservation and overlapping no mapped piece,
// with one new physical allocation (cuMemCreate, cuMemMap, cuMemSetAccess read/write for
// this GPU). On any failure what the call created is released, so nothing stays mapped;
// CUDA_ERROR_OUT_OF_MEMORY wraps device.ErrOutOfMemory.
func (d *Device) Map(addr device.Ptr, size int64) error {
	if err := d.checkGranules("Map", addr, size); err != nil {
		return err
	}
	d.vmMu.Lock()
	defer d.vmMu.Unlock()
	if err := d.table.CheckMap(addr, size, d.granularity); err != nil {
		return fmt.Errorf("cuda: %s: Map: %w", d.name, err)
	}
	var h uint64
	r := d.enter()
	op := "cuCtxSetCurrent"
	if r == success {
		op = "cuMemCreate"
		r = syscallN(d.drv.cuMemCreate, uintptr(unsafe.Pointer(&h)), uintptr(size), uintptr(unsafe.Pointer(&d.allocProp)), 0)
	}
	if r == success {
		op = "cuMemMap"
		if r = syscallN(d.drv.cuMemMap, uintptr(addr), uintptr(size), 0, uintptr(h), 0); r != success {
			syscallN(d.drv.cuMemRelease, uintptr(h))
		}
	}
	if r == success {
		op = "cuMemSetAccess"
		if r = syscallN(d.drv.cuMemSetAccess, uintptr(addr), uintptr(size), uintptr(unsafe.Pointer(&d.access)), 1); r != success {
			syscallN(d.drv.cuMemUnmap, uintptr(addr), uintptr(size))
			syscallN(d.drv.cuMemRelease, uintptr(h))
		}
	}
	d.exit()
	if r != success {
		return d.drv.errorf(r, "%s(%#x, %d bytes) in Map", op, uintptr(addr), size)
	}
	if err := d.table.Map(addr, size, d.granularity); err != nil {
		// CheckMap passed under vmMu, so only a bug gets here.
		return fmt.Errorf("cuda: %s: Map(%#x, %d bytes) mapped but not recorded: %w", d.name, uintptr(addr), size, err)
	}
	d.mu.Lock()
	d.handles[addr] = mapping{size: size, handle: h}
	d.usage.Mappings++
	d.usage.MappedBytes += size
	d.mu.Unlock()
	return nil
}

// piece returns the mapping of [addr, addr+size), exactly one earlier Map or Remap, for
// op. The caller holds vmMu.
func (d *Device) piece(op string, addr device.Ptr, size int64) (mapping, error) {
	d.mu.Lock()
	m, ok := d.handles[addr]
	d.mu.Unlock()
	if !ok || m.size != size {
		return m, fmt.Errorf("cuda: %s: %s(%#x, %d bytes): not one whole live Map of this device", d.name, op, uintptr(addr), size)
	}
	return m, nil
}

// Unmap unmaps [addr, addr+size), exactly one earlier Map or Remap, and releases its
// physical memory (cuMemUnmap, cuMemRelease). It does not wait for the GPU: the caller
// makes sure no work still uses the range.
func (d *Device) Unmap(addr device.Ptr, size int64) error {
	d.vmMu.Lock()
	defer d.vmMu.Unlock()
	m, err := d.piece("Unmap", addr, size)
	if err != nil {
		return err
	}
	r := d.enter()
	op := "cuCtxSetCurrent"
	if r == success {
		op = "cuMemUnmap"
		r = syscallN(d.drv.cuMemUnmap, uintptr(addr), uintptr(size))
	}
	if r != success {
		d.exit()
		return d.drv.errorf(r, "%s(%#x, %d bytes) in Unmap", op, uintptr(addr), size)
	}
	// Unmapped: the range is gone whatever cuMemRelease says.
	rel := syscallN(d.drv.cuMemRelease, uintptr(m.handle))
	d.exit()
	err = d.table.Unmap(addr, size)
	d.mu.Lock()
	delete(d.handles, addr)
	d.usage.Mappings--
	d.usage.MappedBytes -= size
	d.mu.Unlock()
	switch {
	case rel != success:
		return d.drv.errorf(rel, "cuMemRelease(%#x, %d bytes) in Unmap", uintptr(addr), size)
	case err != nil:
		return fmt.Errorf("cuda: %s: Unmap(%#x, %d bytes) unmapped but not recorded: %w", d.name, uintptr(addr), size, err)
	}
	return nil
}

// Remap moves the physical allocation behind [from, from+size), exactly one earlier Map
// or Remap, to [to, to+size) inside a reservation: cuMemMap of its handle at to,
// cuMemSetAccess, then cuMemUnmap of from; no cuMemRelease and cuMemCreate. On any
// failure what the call mapped at to is unmapped again and from stays mapped. It does
// not wait for the GPU: the caller makes sure no work still uses from.
func (d *Device) Remap(from, to device.Ptr, size int64) error {
	if err := d.checkGranules("Remap", to, size); err != nil {
		return err
	}
	d.vmMu.Lock()
	defer d.vmMu.Unlock()
	m, err := d.piece("Remap", from, size)
	if err != nil {
		return err
	}
	if err := d.table.CheckMap(to, size, d.granularity); err != nil {
		return fmt.Errorf("cuda: %s: Remap: %w", d.name, err)
	}
	r := d.enter()
	op := "cuCtxSetCurrent"
	if r == success {
		op = "cuMemMap"
		r = syscallN(d.drv.cuMemMap, uintptr(to), uintptr(size), 0, uintptr(m.handle), 0)
	}
	if r == success {
		op = "cuMemSetAccess"
		if r = syscallN(d.drv.cuMemSetAccess, uintptr(to), uintptr(size), uintptr(unsafe.Pointer(&d.access)), 1); r != success {
			syscallN(d.drv.cuMemUnmap, uintptr(to), uintptr(size))
		}
	}
	if r == success {
		op = "cuMemUnmap"
		if r = syscallN(d.drv.cuMemUnmap, uintptr(from), uintptr(size)); r != success {
			syscallN(d.drv.cuMemUnmap, uintptr(to), uintptr(size))
		}
	}
	d.exit()
	if r != success {
		return d.drv.errorf(r, "%s(%#x to %#x, %d bytes) in Remap", op, uintptr(from), uintptr(to), size)
	}
	uerr := d.table.Unmap(from, size)
	merr := d.table.Map(to, size, d.granularity)
	d.mu.Lock()
	delete(d.handles, from)
	d.handles[to] = m
	d.mu.Unlock()
	if err := errors.Join(uerr, merr); err != nil {
		// The checks above passed under vmMu, so only a bug gets here.
		return fmt.Errorf("cuda: %s: Remap(%#x to %#x, %d bytes) moved but not recorded: %w", d.name, uintptr(from), uintptr(to), size, err)
	}
	return nil
}
