package cuda

import (
	"fmt"
	"unsafe"
)

// HostAlloc returns size bytes of page-locked host memory from cuMemHostAlloc, which the
// GPU reads and writes by DMA, so asynchronous copies from and to it overlap with the
// host. The memory is outside the Go heap and lives until HostFree.
func (d *Device) HostAlloc(size int64) ([]byte, error) {
	if size <= 0 {
		return nil, fmt.Errorf("cuda: %s: HostAlloc(%d): size must be positive", d.name, size)
	}
	var p *byte
	if r := d.call(d.drv.cuMemHostAlloc, uintptr(unsafe.Pointer(&p)), uintptr(size), hostAllocDefault); r != success {
		return nil, d.drv.errorf(r, "cuMemHostAlloc(%d bytes)", size)
	}
	d.mu.Lock()
	d.host[uintptr(unsafe.Pointer(p))] = size
	d.usage.HostAllocs++
	d.usage.HostBytes += size
	d.mu.Unlock()
	return unsafe.Slice(p, size), nil
}

// HostFree returns a whole slice from HostAlloc with cuMemFreeHost.
func (d *Device) HostFree(b []byte) error {
	if len(b) == 0 {
		return fmt.Errorf("cuda: %s: HostFree of an empty slice", d.name)
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	d.mu.Lock()
	size, ok := d.host[base]
	if ok && size == int64(len(b)) {
		delete(d.host, base)
		d.usage.HostAllocs--
		d.usage.HostBytes -= size
	}
	d.mu.Unlock()
	if !ok || size != int64(len(b)) {
		return fmt.Errorf("cuda: %s: HostFree(%#x, %d bytes): not a whole live HostAlloc allocation of this device", d.name, base, len(b))
	}
	if r := d.call(d.drv.cuMemFreeHost, uintptr(unsafe.Pointer(unsafe.SliceData(b)))); r != success {
		d.mu.Lock()
		d.host[base] = size
		d.usage.HostAllocs++
		d.usage.HostBytes += size
		d.mu.Unlock()
		return d.drv.errorf(r, "cuMemFreeHost(%#x, %d bytes)", base, size)
	}
	return nil
}
