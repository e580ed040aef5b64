package sim

import "github.com/subletml/sublet/device"

// The copies are hostmem.Copier's, over the device's table.

// CopyToDevice copies src to dst.
func (d *Device) CopyToDevice(dst device.Ptr, src []byte, s device.Stream) error {
	return d.copier.CopyToDevice(dst, src, s)
}

// CopyToHost copies len(dst) bytes from src to dst.
func (d *Device) CopyToHost(dst []byte, src device.Ptr, s device.Stream) error {
	return d.copier.CopyToHost(dst, src, s)
}

// CopyOnDevice copies n bytes from src to dst.
func (d *Device) CopyOnDevice(dst, src device.Ptr, n int64, s device.Stream) error {
	return d.copier.CopyOnDevice(dst, src, n, s)
}

// Memset sets n bytes at dst to value.
func (d *Device) Memset(dst device.Ptr, value byte, n int64, s device.Stream) error {
	return d.copier.Memset(dst, value, n, s)
}

// Residency is device.Host with a backing store (Options.Backing), device.Meta without.
func (d *Device) Residency() device.Residency {
	if d.backing {
		return device.Host
	}
	return device.Meta
}

// Bytes returns the bytes at [p, p+n) when the device has a backing store; see
// device.HostMemory.
func (d *Device) Bytes(p device.Ptr, n int64) ([]byte, bool) { return d.table.Bytes(p, n) }
