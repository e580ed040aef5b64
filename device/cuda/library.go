package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"strings"

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

// syscallArgs is syscallN through dl.CallArgs: args on the heap already, nothing
// allocated, nothing kept alive.
func syscallArgs(fn uintptr, args []uintptr) result { return result(uint32(dl.CallArgs(fn, args))) }

// Library is a shared library of the CUDA toolkit (cuBLAS, cuBLASLt, ...) loaded at run
// time, like libcuda itself: nothing links against it, so it is optional. Its entry
// points are called through Device.CallLibrary, which makes the Device's context
// current first. A Library stays loaded for the life of the process (calls may be in
// flight on other goroutines, so it is never closed) and is immutable.
type Library struct {
	path string  // the name it was loaded by
	h    uintptr // dlopen handle
}

// OpenLibrary loads the first of candidates that loads: sonames the dynamic loader
// searches for ("libcublas.so.12") or paths. The error, when none loads, lists each
// candidate with the loader's reason.
func OpenLibrary(candidates ...string) (*Library, error) {
	if len(candidates) == 0 {
		return nil, errors.New("cuda: OpenLibrary: no candidates")
	}
	var why []string
	for _, c := range candidates {
		h, err := dl.Open(c)
		if err == nil {
			return &Library{path: c, h: h}, nil
		}
		why = append(why, fmt.Sprintf("%s: %v", c, err))
	}
	return nil, fmt.Errorf("cuda: none of %d libraries loads:\n  %s", len(candidates), strings.Join(why, "\n  "))
}

// Path is the soname or path the library was loaded by.
func (l *Library) Path() string { return l.path }

// Symbol returns the address of the library's entry point name.
func (l *Library) Symbol(name string) (uintptr, error) {
	fn, err := dl.Symbol(l.h, name)
	if err != nil {
		return 0, fmt.Errorf("cuda: %s has no symbol %s: %w", l.path, name, err)
	}
	return fn, nil
}

// CallLibrary calls fn, an entry point of a Library, with integer (and pointer)
// arguments while this Device's primary context is current on the calling thread, and
// returns its whole return register (a 32-bit status reads the low half). Libraries
// such as cuBLAS then launch their kernels in sublet's context. Go memory passed as a
// uintptr(unsafe.Pointer(...)) in the call expression stays alive for the call. The
// error is the driver's when the context cannot be made current (fn is not called).
//
//go:uintptrescapes
func (d *Device) CallLibrary(fn uintptr, args ...uintptr) (uintptr, error) {
	if r := d.enter(); r != success {
		d.exit()
		return 0, d.drv.errorf(r, "cuCtxSetCurrent(%s) before a library call", d.name)
	}
	r := dl.Call(fn, args...)
	d.exit()
	return r, nil
}

// CallNoContext calls fn, an entry point of l that needs no CUDA context (a version
// query), with integer arguments, and returns its whole return register.
//
//go:uintptrescapes
func (l *Library) CallNoContext(fn uintptr, args ...uintptr) uintptr { return dl.Call(fn, args...) }
