//go:build (linux || darwin) && (amd64 || arm64)

package dl

import (
	"errors"

	"github.com/ebitengine/purego"
)

// Supported reports whether this platform loads libraries.
const Supported = true

func open(names []string) (uintptr, error) {
	if len(names) == 0 {
		return 0, errors.New("dl: Open of no library")
	}
	var first error
	for _, n := range names {
		h, err := purego.Dlopen(n, purego.RTLD_NOW|purego.RTLD_LOCAL)
		if err == nil {
			return h, nil
		}
		if first == nil {
			first = err
		}
	}
	return 0, first
}

func symbol(h uintptr, name string) (uintptr, error) { return purego.Dlsym(h, name) }

func call(fn uintptr, args []uintptr) uintptr {
	r, _, _ := purego.SyscallN(fn, args...)
	return r
}

func bind(fptr any, fn uintptr) { purego.RegisterFunc(fptr, fn) }
