package cuda

import (
	"fmt"
	"unsafe"

	"github.com/subletml/sublet/device"
)

// checkCopy checks op's stream and its device ranges (each [p, p+n) must lie inside one
// live allocation, or inside a reservation mapped throughout) before the driver sees
// them: past the end of an allocation the driver would not notice, and an unmapped page
// would fault the whole context.
func (d *Device) checkCopy(op string, s device.Stream, n int64, ptrs ...device.Ptr) error {
	if err := d.live(op, s, 0); err != nil {
		return err
	}
	if n < 0 {
		return fmt.Errorf("cuda: %s: %s: negative size %d", d.name, op, n)
	}
	if n == 0 {
		return nil
	}
	for _, p := range ptrs {
		if _, err := d.table.Resolve(p, n); err != nil {
			return fmt.Errorf("cuda: %s: %s(%#x, %d bytes): %w", d.name, op, uintptr(p), n, err)
		}
	}
	return nil
}

// CopyToDevice copies src to dst, ordered on s, and waits for stream s so that src may
// be reused on return, pinned or not (PyTorch's non_blocking=False). From pageable
// memory, a copy of stageMin bytes or more goes through the Device's pinned staging
// buffers (see stager), at the link's pinned speed.
func (d *Device) CopyToDevice(dst device.Ptr, src []byte, s device.Stream) error {
	if err := d.checkCopy("CopyToDevice", s, int64(len(src)), dst); err != nil || len(src) == 0 {
		return err
	}
	if len(src) >= stageMin && !d.pinned(src) {
		return d.stagedCopyToDevice(dst, src, s)
	}
	if r := d.callAndWait(s, d.drv.cuMemcpyHtoDAsync, uintptr(dst), uintptr(unsafe.Pointer(&src[0])), uintptr(len(src)), uintptr(s)); r != success {
		return d.drv.errorf(r, "cuMemcpyHtoD(%#x, %d bytes, stream %#x)", uintptr(dst), len(src), uintptr(s))
	}
	return nil
}

// CopyToHost copies into dst from src, ordered on s, and waits for stream s so that dst
// holds the data on return.
func (d *Device) CopyToHost(dst []byte, src device.Ptr, s device.Stream) error {
	if err := d.checkCopy("CopyToHost", s, int64(len(dst)), src); err != nil || len(dst) == 0 {
		return err
	}
	if r := d.callAndWait(s, d.drv.cuMemcpyDtoHAsync, uintptr(unsafe.Pointer(&dst[0])), uintptr(src), uintptr(len(dst)), uintptr(s)); r != success {
		return d.drv.errorf(r, "cuMemcpyDtoH(%#x, %d bytes, stream %#x)", uintptr(src), len(dst), uintptr(s))
	}
	return nil
}

// callAndWait is call followed by cuStreamSynchronize(s), under one context switch.
//
//go:uintptrescapes
func (d *Device) callAndWait(s device.Stream, fn uintptr, args ...uintptr) result {
	r := d.enter()
	if r == success {
		r = syscallN(fn, args...)
	}
	if r == success {
		r = syscallN(d.drv.cuStreamSynchronize, uintptr(s))
	}
	d.exit()
	return r
}

// CopyToDeviceAsync copies src to dst ordered on s without waiting; from pinned memory
// (HostAlloc) the copy overlaps with the host, and src must stay untouched until it has
// completed (device.PinnedHost).
func (d *Device) CopyToDeviceAsync(dst device.Ptr, src []byte, s device.Stream) error {
	if err := d.checkCopy("CopyToDeviceAsync", s, int64(len(src)), dst); err != nil || len(src) == 0 {
		return err
	}
	if r := d.call(d.drv.cuMemcpyHtoDAsync, uintptr(dst), uintptr(unsafe.Pointer(&src[0])), uintptr(len(src)), uintptr(s)); r != success {
		return d.drv.errorf(r, "cuMemcpyHtoDAsync(%#x, %d bytes, stream %#x)", uintptr(dst), len(src), uintptr(s))
	}
	return nil
}

// CopyToHostAsync copies into dst from src ordered on s without waiting; into pinned
// memory the copy overlaps with the host, and dst holds the data only once it has
// completed (device.PinnedHost).
func (d *Device) CopyToHostAsync(dst []byte, src device.Ptr, s device.Stream) error {
	if err := d.checkCopy("CopyToHostAsync", s, int64(len(dst)), src); err != nil || len(dst) == 0 {
		return err
	}
	if r := d.call(d.drv.cuMemcpyDtoHAsync, uintptr(unsafe.Pointer(&dst[0])), uintptr(src), uintptr(len(dst)), uintptr(s)); r != success {
		return d.drv.errorf(r, "cuMemcpyDtoHAsync(%#x, %d bytes, stream %#x)", uintptr(src), len(dst), uintptr(s))
	}
	return nil
}

// CopyOnDevice copies n bytes from src to dst, ordered on s.
func (d *Device) CopyOnDevice(dst, src device.Ptr, n int64, s device.Stream) error {
	if err := d.checkCopy("CopyOnDevice", s, n, dst, src); err != nil || n == 0 {
		return err
	}
	if r := d.call(d.drv.cuMemcpyDtoDAsync, uintptr(dst), uintptr(src), uintptr(n), uintptr(s)); r != success {
		return d.drv.errorf(r, "cuMemcpyDtoDAsync(%#x <- %#x, %d bytes, stream %#x)", uintptr(dst), uintptr(src), n, uintptr(s))
	}
	return nil
}

// Memset sets n bytes at dst to value, ordered on s (cuMemsetD8Async).
func (d *Device) Memset(dst device.Ptr, value byte, n int64, s device.Stream) error {
	if err := d.checkCopy("Memset", s, n, dst); err != nil || n == 0 {
		return err
	}
	if r := d.callInts(d.drv.cuMemsetD8Async, uintptr(dst), uintptr(value), uintptr(n), uintptr(s)); r != success {
		return d.drv.errorf(r, "cuMemsetD8Async(%#x, %#x, %d bytes, stream %#x)", uintptr(dst), value, n, uintptr(s))
	}
	return nil
}
