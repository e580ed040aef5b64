package hostmem

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Physical reports the machine's physical memory (hw.memsize); available is -1 (unknown):
// macOS exposes no cheap equivalent of Linux's MemAvailable.
func Physical() (total, available int64, err error) {
	n, err := unix.SysctlUint64("hw.memsize")
	if err != nil {
		return 0, 0, fmt.Errorf("hostmem.Physical: sysctl hw.memsize: %w", err)
	}
	return int64(n), -1, nil
}
