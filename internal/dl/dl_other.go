//go:build !((linux || darwin) && (amd64 || arm64))

package dl

import (
	"fmt"
	"runtime"
)

// Supported reports whether this platform loads libraries.
const Supported = false

func open([]string) (uintptr, error) {
	return 0, fmt.Errorf("%w: %s/%s (sublet loads them on linux and darwin, amd64 and arm64)", ErrUnsupported, runtime.GOOS, runtime.GOARCH)
}

func symbol(uintptr, string) (uintptr, error) { return open(nil) }

// call and bind are never reached: no library opens here.
func call(uintptr, []uintptr) uintptr {
	panic("dl: internal error: Call without a library on " + runtime.GOOS + "/" + runtime.GOARCH)
}

func bind(any, uintptr) {
	panic("dl: internal error: Bind without a library on " + runtime.GOOS + "/" + runtime.GOARCH)
}
