//go:build unix && !linux

package hostmem

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// decommit maps fresh inaccessible pages over the range (MAP_FIXED): outside Linux,
// MADV_DONTNEED may keep the pages resident, while replacing the mapping frees them at
// once and makes them read as zeros when committed again.
func decommit(b []byte) error {
	p := unsafe.Pointer(unsafe.SliceData(b))
	if _, err := unix.MmapPtr(-1, 0, p, uintptr(len(b)), unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANON|unix.MAP_FIXED); err != nil {
		return fmt.Errorf("hostmem.Decommit: mmap over %d bytes: %w", len(b), err)
	}
	return nil
}
