//go:build linux && (amd64 || arm64)

package cuda

import (
	"fmt"

	"github.com/ebitengine/purego"
)

// openLibrary dlopens the driver library: the versioned soname the NVIDIA driver
// installs, then the development symlink.
func openLibrary() (uintptr, error) {
	lib, err := purego.Dlopen(libraryName, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err == nil {
		return lib, nil
	}
	if dev, errDev := purego.Dlopen("libcuda.so", purego.RTLD_NOW|purego.RTLD_LOCAL); errDev == nil {
		return dev, nil
	}
	return 0, fmt.Errorf("cuda: %w: cannot load %s (%v); install the NVIDIA driver or add its folder to LD_LIBRARY_PATH", ErrNoDriver, libraryName, err)
}

func symbol(lib uintptr, name string) (uintptr, error) { return purego.Dlsym(lib, name) }

// dlopen loads the shared library name (a soname the loader searches for, or a path).
func dlopen(name string) (uintptr, error) {
	return purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_LOCAL)
}

// syscallRaw calls fn with integer arguments and returns the whole return register.
//
//go:uintptrescapes
func syscallRaw(fn uintptr, args ...uintptr) uintptr {
	r, _, _ := purego.SyscallN(fn, args...)
	return r
}

// syscallN calls the driver entry point fn with integer arguments. Every entry point
// returns a 32-bit CUresult; the upper half of the return register is not part of it.
//
//go:uintptrescapes
func syscallN(fn uintptr, args ...uintptr) result {
	r, _, _ := purego.SyscallN(fn, args...)
	return result(uint32(r))
}
