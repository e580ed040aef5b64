package hostmem

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Physical reports the machine's physical memory and how much of it the OS could hand
// out now (MemAvailable of /proc/meminfo: free memory plus reclaimable caches), or -1
// for the latter when /proc/meminfo cannot be read or lacks it (kernels before 3.14).
func Physical() (total, available int64, err error) {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return 0, 0, fmt.Errorf("hostmem.Physical: sysinfo: %w", err)
	}
	total = int64(si.Totalram) * int64(si.Unit)
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return total, -1, nil
	}
	s := bufio.NewScanner(bytes.NewReader(data))
	for s.Scan() {
		f := bytes.Fields(s.Bytes())
		if len(f) >= 2 && string(f[0]) == "MemAvailable:" {
			kib, err := strconv.ParseInt(string(f[1]), 10, 64)
			if err != nil {
				return 0, 0, fmt.Errorf("hostmem.Physical: /proc/meminfo line %q: %w", s.Text(), err)
			}
			return total, kib << 10, nil
		}
	}
	return total, -1, nil
}
