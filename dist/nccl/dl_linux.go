//go:build linux && (amd64 || arm64)

package nccl

import (
	"fmt"
	"unsafe"

	"github.com/ebitengine/purego"
)

// openLibrary dlopens NCCL: the versioned soname its packages install, then the
// development symlink.
func openLibrary() (uintptr, error) {
	h, err := purego.Dlopen(libraryName, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err == nil {
		return h, nil
	}
	if dev, errDev := purego.Dlopen("libnccl.so", purego.RTLD_NOW|purego.RTLD_LOCAL); errDev == nil {
		return dev, nil
	}
	return 0, fmt.Errorf("nccl: %w: cannot load %s (%v); install NCCL (libnccl2) or add its folder to LD_LIBRARY_PATH", ErrNoLibrary, libraryName, err)
}

func symbol(h uintptr, name string) (uintptr, error) { return purego.Dlsym(h, name) }

// bindStrings binds the two entry points that return C strings.
func bindStrings(h uintptr, l *lib) {
	purego.RegisterLibFunc(&l.getErrorString, h, "ncclGetErrorString")
	purego.RegisterLibFunc(&l.getLastError, h, "ncclGetLastError")
}

// syscallN calls an NCCL entry point with integer arguments; ncclResult_t is 32 bits.
//
//go:uintptrescapes
func syscallN(fn uintptr, args ...uintptr) result {
	r, _, _ := purego.SyscallN(fn, args...)
	return result(int32(r))
}

// callInt calls fn(int* out).
func callInt(fn uintptr, out *int32) result { return syscallN(fn, uintptr(unsafe.Pointer(out))) }
