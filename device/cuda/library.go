package cuda

import (
	"fmt"
	"runtime"

	"github.com/subletml/sublet/internal/dl"
)

// openLibrary loads the driver library: the versioned soname the NVIDIA driver
// installs, then the development symlink.
func openLibrary() (uintptr, error) {
	if runtime.GOOS != "linux" || !dl.Supported {
		return 0, fmt.Errorf("cuda: %w: CUDA not available on %s/%s (sublet loads %s, which NVIDIA ships for linux/amd64 and linux/arm64)", ErrNoDriver, runtime.GOOS, runtime.GOARCH, libraryName)
	}
	lib, err := dl.Open(libraryName, "libcuda.so")
	if err != nil {
		return 0, fmt.Errorf("cuda: %w: cannot load %s (%v); install the NVIDIA driver or add its folder to LD_LIBRARY_PATH", ErrNoDriver, libraryName, err)
	}
	return lib, nil
}

// syscallN calls the driver entry point fn with integer arguments. Every entry point
// returns a 32-bit CUresult; the upper half of the return register is not part of it.
//
//go:uintptrescapes
func syscallN(fn uintptr, args ...uintptr) result { return result(uint32(dl.Call(fn, args...))) }
