package hostmem

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// decommit drops the pages with MADV_DONTNEED, which on Linux frees private anonymous
// pages at once (RSS falls) and makes them read as zeros when committed again.
func decommit(b []byte) error {
	if err := unix.Mprotect(b, unix.PROT_NONE); err != nil {
		return fmt.Errorf("hostmem.Decommit: mprotect of %d bytes: %w", len(b), err)
	}
	if err := unix.Madvise(b, unix.MADV_DONTNEED); err != nil {
		return fmt.Errorf("hostmem.Decommit: madvise of %d bytes: %w", len(b), err)
	}
	return nil
}
