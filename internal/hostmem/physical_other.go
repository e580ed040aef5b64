//go:build !linux && !darwin && !windows

package hostmem

import (
	"fmt"
	"runtime"
)

// Physical is not implemented on this OS: callers must be given a capacity.
func Physical() (total, available int64, err error) {
	return 0, 0, fmt.Errorf("hostmem.Physical: physical memory size unknown on %s; pass an explicit capacity", runtime.GOOS)
}
