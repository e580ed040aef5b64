//go:build (linux || darwin) && (amd64 || arm64)

package dl

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/ebitengine/purego"
)

// Supported reports whether this platform loads libraries.
const Supported = true

func open(names []string) (uintptr, error) {
	if len(names) == 0 {
		return 0, errors.New("dl: Open of no library")
	}
	// dlerror's message belongs to the thread that called dlopen: a goroutine that
	// moved between the two read another thread's (none, most often).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var first error
	for _, n := range names {
		h, err := purego.Dlopen(n, purego.RTLD_NOW|purego.RTLD_LOCAL)
		if err == nil {
			return h, nil
		}
		if first == nil {
			first = fmt.Errorf("dl: loading %s: %w", n, err)
		}
	}
	return 0, first
}

func symbol(h uintptr, name string) (uintptr, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return purego.Dlsym(h, name)
}

func call(fn uintptr, args []uintptr) uintptr {
	r, _, _ := purego.SyscallN(fn, args...)
	return r
}

func bind(fptr any, fn uintptr) { purego.RegisterFunc(fptr, fn) }
