package cuda

import (
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

// reservation is a range from Reserve. Guarded by Device.mu.
type reservation struct {
	size   int64
	mapped int // live Map calls inside the range
}

// mapping is one Map call: the physical allocation behind [addr, addr+size) and the
// reservation holding it. Guarded by Device.mu.
type mapping struct {
	size   int64
	handle uint64 // CUmemGenericAllocationHandle
	in     *reservation
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
	var p device.Ptr
	if r := d.call(d.drv.cuMemAddressReserve, uintptr(unsafe.Pointer(&p)), uintptr(size), 0, 0, 0); r != success {
		return 0, d.drv.errorf(r, "cuMemAddressReserve(%d bytes)", size)
	}
	d.mu.Lock()
	d.reserved[p] = &reservation{size: size}
	d.mu.Unlock()
	return p, nil
}

// Unreserve frees a whole range from Reserve (cuMemAddressFree) once nothing in it is
// mapped.
func (d *Device) Unreserve(addr device.Ptr, size int64) error {
	d.mu.Lock()
	res, ok := d.reserved[addr]
	switch {
	case !ok || res.size != size:
		d.mu.Unlock()
		return fmt.Errorf("cuda: %s: Unreserve(%#x, %d bytes): not a whole live Reserve range of this device", d.name, uintptr(addr), size)
	case res.mapped > 0:
		d.mu.Unlock()
		return fmt.Errorf("cuda: %s: Unreserve(%#x, %d bytes): %d mapping(s) still inside; Unmap them first", d.name, uintptr(addr), size, res.mapped)
	}
	delete(d.reserved, addr)
	d.mu.Unlock()
	if r := d.call(d.drv.cuMemAddressFree, uintptr(addr), uintptr(size)); r != success {
		d.mu.Lock()
		d.reserved[addr] = res
		d.mu.Unlock()
		return d.drv.errorf(r, "cuMemAddressFree(%#x, %d bytes)", uintptr(addr), size)
	}
	return nil
}

// Map backs [addr, addr+size), inside one reservation, with one new physical allocation
// (cuMemCreate, cuMemMap, cuMemSetAccess read/write for this GPU). On any failure what
// the call created is released, so nothing stays mapped; CUDA_ERROR_OUT_OF_MEMORY wraps
// device.ErrOutOfMemory.
func (d *Device) Map(addr device.Ptr, size int64) error {
	if err := d.checkGranules("Map", addr, size); err != nil {
		return err
	}
	d.mu.Lock()
	res := d.reservationOf(addr, size)
	_, taken := d.mapped[addr]
	d.mu.Unlock()
	switch {
	case res == nil:
		return fmt.Errorf("cuda: %s: Map(%#x, %d bytes): not inside one live Reserve range", d.name, uintptr(addr), size)
	case taken:
		return fmt.Errorf("cuda: %s: Map(%#x, %d bytes): already mapped", d.name, uintptr(addr), size)
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
	d.mu.Lock()
	d.mapped[addr] = mapping{size: size, handle: h, in: res}
	res.mapped++
	d.mu.Unlock()
	return nil
}

// reservationOf returns the live reservation holding [addr, addr+size), or nil.
// Reservations are few (one per expandable segment), so a scan is cheap. d.mu is held.
func (d *Device) reservationOf(addr device.Ptr, size int64) *reservation {
	for base, res := range d.reserved {
		if addr >= base && int64(addr-base)+size <= res.size {
			return res
		}
	}
	return nil
}

// Unmap unmaps [addr, addr+size), exactly one earlier Map, and releases its physical
// memory (cuMemUnmap, cuMemRelease). It does not wait for the GPU: the caller makes sure
// no work still uses the range.
func (d *Device) Unmap(addr device.Ptr, size int64) error {
	d.mu.Lock()
	m, ok := d.mapped[addr]
	if ok && m.size == size {
		delete(d.mapped, addr)
	}
	d.mu.Unlock()
	if !ok || m.size != size {
		return fmt.Errorf("cuda: %s: Unmap(%#x, %d bytes): not one whole live Map of this device", d.name, uintptr(addr), size)
	}
	r := d.enter()
	op := "cuCtxSetCurrent"
	if r == success {
		op = "cuMemUnmap"
		r = syscallN(d.drv.cuMemUnmap, uintptr(addr), uintptr(size))
	}
	unmapped := r == success
	if unmapped {
		op = "cuMemRelease"
		r = syscallN(d.drv.cuMemRelease, uintptr(m.handle))
	}
	d.exit()
	d.mu.Lock()
	if unmapped {
		m.in.mapped--
	} else {
		d.mapped[addr] = m
	}
	d.mu.Unlock()
	if r != success {
		return d.drv.errorf(r, "%s(%#x, %d bytes) in Unmap", op, uintptr(addr), size)
	}
	return nil
}
