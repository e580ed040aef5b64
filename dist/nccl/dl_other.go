//go:build !(linux && (amd64 || arm64))

package nccl

import (
	"fmt"
	"runtime"
)

func openLibrary() (uintptr, error) {
	return 0, fmt.Errorf("nccl: %w: NCCL is not available on %s/%s (sublet loads %s on linux/amd64 and linux/arm64)", ErrNoLibrary, runtime.GOOS, runtime.GOARCH, libraryName)
}

func symbol(uintptr, string) (uintptr, error) {
	return 0, fmt.Errorf("nccl: %w on %s/%s", ErrNoLibrary, runtime.GOOS, runtime.GOARCH)
}

func bindStrings(uintptr, *lib) {}

// syscallN and callInt are never reached: openLibrary always fails here.
func syscallN(uintptr, ...uintptr) result { return 3 } // ncclInternalError
func callInt(uintptr, *int32) result      { return 3 }
