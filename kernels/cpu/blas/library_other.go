//go:build !((linux || darwin || freebsd || netbsd) && (amd64 || arm64))

package blas

import (
	"errors"

	"github.com/subletml/sublet/kernels/cpu"
)

// Library is a loaded system BLAS; on this platform none can be loaded.
type Library struct{ cpu.Gemm }

func open(file string) (*Library, error) {
	return nil, errors.New(file + ": loading libraries at run time is not supported on this platform")
}

// Threads is 0: no library is loaded on this platform.
func (l *Library) Threads() int { return 0 }
