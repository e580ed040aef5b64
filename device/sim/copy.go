package sim

import (
	"fmt"

	"github.com/subletml/sublet/device"
)

// Copies and memsets take effect at once (the simulated device runs nothing
// asynchronously); without a backing store they only check their ranges and stream.

// CopyToDevice copies src to dst.
func (d *Device) CopyToDevice(dst device.Ptr, src []byte, s device.Stream) error {
	if err := d.checkStream("CopyToDevice", s); err != nil {
		return err
	}
	if err := d.table.CopyIn(dst, src); err != nil {
		return fmt.Errorf("sim: CopyToDevice(%#x, %d bytes): %w", uintptr(dst), len(src), err)
	}
	return nil
}

// CopyToHost copies len(dst) bytes from src to dst.
func (d *Device) CopyToHost(dst []byte, src device.Ptr, s device.Stream) error {
	if err := d.checkStream("CopyToHost", s); err != nil {
		return err
	}
	if err := d.table.CopyOut(dst, src); err != nil {
		return fmt.Errorf("sim: CopyToHost(%d bytes, %#x): %w", len(dst), uintptr(src), err)
	}
	return nil
}

// CopyOnDevice copies n bytes from src to dst.
func (d *Device) CopyOnDevice(dst, src device.Ptr, n int64, s device.Stream) error {
	if err := d.checkStream("CopyOnDevice", s); err != nil {
		return err
	}
	if err := d.table.CopyWithin(dst, src, n); err != nil {
		return fmt.Errorf("sim: CopyOnDevice(%#x, %#x, %d bytes): %w", uintptr(dst), uintptr(src), n, err)
	}
	return nil
}

// Memset sets n bytes at dst to value.
func (d *Device) Memset(dst device.Ptr, value byte, n int64, s device.Stream) error {
	if err := d.checkStream("Memset", s); err != nil {
		return err
	}
	if err := d.table.Fill(dst, value, n); err != nil {
		return fmt.Errorf("sim: Memset(%#x, %d, %d bytes): %w", uintptr(dst), value, n, err)
	}
	return nil
}

// Bytes returns the bytes at [p, p+n) when the device has a backing store; see
// device.HostMemory.
func (d *Device) Bytes(p device.Ptr, n int64) ([]byte, bool) { return d.table.Bytes(p, n) }
