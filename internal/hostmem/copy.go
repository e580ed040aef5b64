package hostmem

import (
	"fmt"

	"github.com/subletml/sublet/device"
)

// The copies check their device ranges with Resolve and move bytes only where the range
// has host memory. Zero bytes is a no-op that checks nothing, like cudaMemcpy of 0 bytes.

// CopyIn copies src to the device range at dst.
func (t *Table) CopyIn(dst device.Ptr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	b, err := t.Resolve(dst, int64(len(src)))
	if err != nil {
		return fmt.Errorf("destination: %w", err)
	}
	copy(b, src)
	return nil
}

// CopyOut copies the device range at src to dst.
func (t *Table) CopyOut(dst []byte, src device.Ptr) error {
	if len(dst) == 0 {
		return nil
	}
	b, err := t.Resolve(src, int64(len(dst)))
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	copy(dst, b)
	return nil
}

// CopyWithin copies n bytes from src to dst, both device ranges; they may overlap.
func (t *Table) CopyWithin(dst, src device.Ptr, n int64) error {
	if n == 0 {
		return nil
	}
	d, err := t.Resolve(dst, n)
	if err != nil {
		return fmt.Errorf("destination: %w", err)
	}
	s, err := t.Resolve(src, n)
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	copy(d, s)
	return nil
}

// Fill sets the n bytes at dst to v.
func (t *Table) Fill(dst device.Ptr, v byte, n int64) error {
	if n == 0 {
		return nil
	}
	b, err := t.Resolve(dst, n)
	if err != nil {
		return err
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
