//go:build !(linux && (amd64 || arm64))

package cuda

import (
	"fmt"
	"runtime"
)

func openLibrary() (uintptr, error) {
	return 0, fmt.Errorf("cuda: %w: CUDA not available on %s/%s (sublet loads %s, which NVIDIA ships for linux/amd64 and linux/arm64)", ErrNoDriver, runtime.GOOS, runtime.GOARCH, libraryName)
}

func symbol(uintptr, string) (uintptr, error) {
	return 0, fmt.Errorf("cuda: %w on %s/%s", ErrNoDriver, runtime.GOOS, runtime.GOARCH)
}

func dlopen(name string) (uintptr, error) {
	return 0, fmt.Errorf("cannot load %s: loading libraries at run time is not supported on %s/%s", name, runtime.GOOS, runtime.GOARCH)
}

// syscallRaw is never reached: no Library or Device exists here.
func syscallRaw(uintptr, ...uintptr) uintptr { return 0 }

// syscallN is never reached: openLibrary always fails here, so no Device exists. It
// answers CUDA_ERROR_NOT_INITIALIZED, the driver's own answer before cuInit.
func syscallN(uintptr, ...uintptr) result { return errorNotInitialized }
