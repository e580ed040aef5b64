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

// syscallN is never reached: openLibrary always fails here, so no Device exists. It
// answers CUDA_ERROR_NOT_INITIALIZED, the driver's own answer before cuInit.
func syscallN(uintptr, ...uintptr) result { return errorNotInitialized }
