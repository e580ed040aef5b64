package cuda

import (
	"fmt"
	"unsafe"

	"github.com/subletml/sublet/device"
)

// hostRegisterDefault is the cuMemHostRegister flags PyTorch passes
// (cudaHostRegisterDefault): page-locked, for this context.
const hostRegisterDefault = 0x0

var _ device.HostRegisterer = (*Device)(nil)

// HostRegister page-locks b, ordinary host memory, with cuMemHostRegister, so that
// asynchronous copies from and to it overlap with the host like those of HostAlloc
// memory. b must be whole pages outside the Go heap (anonymous mmap) and stay mapped
// until HostUnregister.
func (d *Device) HostRegister(b []byte) error {
	if len(b) == 0 {
		return fmt.Errorf("cuda: %s: HostRegister of an empty slice", d.name)
	}
	base, size := uintptr(unsafe.Pointer(unsafe.SliceData(b))), int64(len(b))
	if r := d.call(d.drv.cuMemHostRegister, uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(size), hostRegisterDefault); r != success {
		return d.drv.errorf(r, "cuMemHostRegister(%#x, %d bytes)", base, size)
	}
	d.mu.Lock()
	d.registered[base] = size
	d.mu.Unlock()
	d.count(&d.usage.HostRegistrations, &d.usage.RegisteredBytes, 1, size)
	return nil
}

// HostUnregister undoes HostRegister of the whole slice with cuMemHostUnregister.
func (d *Device) HostUnregister(b []byte) error {
	base, size := uintptr(unsafe.Pointer(unsafe.SliceData(b))), int64(len(b))
	// Taken out of the table first, so that a concurrent HostUnregister of the same
	// range fails instead of unregistering it twice.
	d.mu.Lock()
	live := size > 0 && d.registered[base] == size
	if live {
		delete(d.registered, base)
	}
	d.mu.Unlock()
	if !live {
		return fmt.Errorf("cuda: %s: HostUnregister(%#x, %d bytes): not a whole live HostRegister range of this device", d.name, base, size)
	}
	if r := d.call(d.drv.cuMemHostUnregister, uintptr(unsafe.Pointer(unsafe.SliceData(b)))); r != success {
		d.mu.Lock()
		d.registered[base] = size
		d.mu.Unlock()
		return d.drv.errorf(r, "cuMemHostUnregister(%#x, %d bytes)", base, size)
	}
	d.count(&d.usage.HostRegistrations, &d.usage.RegisteredBytes, -1, size)
	return nil
}
