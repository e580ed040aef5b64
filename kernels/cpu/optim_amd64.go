package cpu

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// The optimizers' vector loops (optim_gen.go writes them).

//go:noescape
func sgdF32AVX512(p, grad, buf unsafe.Pointer, n int, k unsafe.Pointer)

//go:noescape
func adamF32AVX512(p, grad, m, v unsafe.Pointer, n int, k unsafe.Pointer)

//go:noescape
func sgdF64AVX512(p, grad, buf unsafe.Pointer, n int, k unsafe.Pointer)

//go:noescape
func adamF64AVX512(p, grad, m, v unsafe.Pointer, n int, k unsafe.Pointer)

//go:noescape
func sgdF32AVX2(p, grad, buf unsafe.Pointer, n int, k unsafe.Pointer)

//go:noescape
func adamF32AVX2(p, grad, m, v unsafe.Pointer, n int, k unsafe.Pointer)

//go:noescape
func sgdF64AVX2(p, grad, buf unsafe.Pointer, n int, k unsafe.Pointer)

//go:noescape
func adamF64AVX2(p, grad, m, v unsafe.Pointer, n int, k unsafe.Pointer)

// optimVecs32 and optimVecs64 list the optimizer loops this CPU runs, widest first.
var optimVecs32, optimVecs64 = func() (v32, v64 []optimVec) {
	if cpu.X86.HasAVX512F {
		v32 = append(v32, optimVec{16, sgdF32AVX512, adamF32AVX512})
		v64 = append(v64, optimVec{8, sgdF64AVX512, adamF64AVX512})
	}
	if cpu.X86.HasAVX2 {
		v32 = append(v32, optimVec{8, sgdF32AVX2, adamF32AVX2})
		v64 = append(v64, optimVec{4, sgdF64AVX2, adamF64AVX2})
	}
	return v32, v64
}()
