package hostmem

import (
	"fmt"

	"github.com/subletml/sublet/device"
)

// Copier is the device.Device copy methods of a host-memory device, over its Table: each
// checks the stream and its device ranges, and moves bytes only where the range has host
// memory. Zero bytes is a no-op that checks only the stream, like cudaMemcpy of 0 bytes.
// The device keeps a Copier and forwards its methods to it.
type Copier struct {
	// Table is the device's address table.
	Table *Table
	// Name prefixes error messages: "cpu", "sim".
	Name string
	// CheckStream reports why s is not a live stream of the device, naming op.
	CheckStream func(op string, s device.Stream) error
}

// CopyToDevice copies src to the device range at dst.
func (c Copier) CopyToDevice(dst device.Ptr, src []byte, s device.Stream) error {
	if err := c.CheckStream("CopyToDevice", s); err != nil {
		return err
	}
	if len(src) == 0 {
		return nil
	}
	b, err := c.Table.Resolve(dst, int64(len(src)))
	if err != nil {
		return fmt.Errorf("%s: CopyToDevice(%#x, %d bytes): destination: %w", c.Name, uintptr(dst), len(src), err)
	}
	copy(b, src)
	return nil
}

// CopyToHost copies the device range at src to dst.
func (c Copier) CopyToHost(dst []byte, src device.Ptr, s device.Stream) error {
	if err := c.CheckStream("CopyToHost", s); err != nil {
		return err
	}
	if len(dst) == 0 {
		return nil
	}
	b, err := c.Table.Resolve(src, int64(len(dst)))
	if err != nil {
		return fmt.Errorf("%s: CopyToHost(%d bytes, %#x): source: %w", c.Name, len(dst), uintptr(src), err)
	}
	copy(dst, b)
	return nil
}

// CopyOnDevice copies n bytes from src to dst, both device ranges; they may overlap.
func (c Copier) CopyOnDevice(dst, src device.Ptr, n int64, s device.Stream) error {
	if err := c.CheckStream("CopyOnDevice", s); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	d, err := c.Table.Resolve(dst, n)
	if err != nil {
		return fmt.Errorf("%s: CopyOnDevice(%#x, %#x, %d bytes): destination: %w", c.Name, uintptr(dst), uintptr(src), n, err)
	}
	b, err := c.Table.Resolve(src, n)
	if err != nil {
		return fmt.Errorf("%s: CopyOnDevice(%#x, %#x, %d bytes): source: %w", c.Name, uintptr(dst), uintptr(src), n, err)
	}
	copy(d, b)
	return nil
}

// Memset sets the n bytes at dst to v.
func (c Copier) Memset(dst device.Ptr, v byte, n int64, s device.Stream) error {
	if err := c.CheckStream("Memset", s); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	b, err := c.Table.Resolve(dst, n)
	if err != nil {
		return fmt.Errorf("%s: Memset(%#x, %d, %d bytes): %w", c.Name, uintptr(dst), v, n, err)
	}
	if len(b) == 0 {
		return nil
	}
	// Doubling copies run at memmove speed; a byte loop would not.
	b[0] = v
	for k := 1; k < len(b); k *= 2 {
		copy(b[k:], b[:k])
	}
	return nil
}
