//go:build (linux || darwin || freebsd || netbsd) && (amd64 || arm64)

package blas

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/subletml/sublet/kernels/cpu"
)

// CBLAS enumeration values (cblas.h).
const (
	cblasRowMajor = 101
	cblasNoTrans  = 111
	cblasTrans    = 112
)

// Library is a loaded system BLAS; it implements cpu.Gemm through cblas_sgemm.
type Library struct {
	name string // the file it was loaded from
	// Exactly one of these is set, by the library's integer width (LP64 or ILP64).
	sgemm32 func(layout, transA, transB int32, m, n, k int32, alpha float32, a unsafe.Pointer, lda int32, b unsafe.Pointer, ldb int32, beta float32, c unsafe.Pointer, ldc int32)
	sgemm64 func(layout, transA, transB int32, m, n, k int64, alpha float32, a unsafe.Pointer, lda int64, b unsafe.Pointer, ldb int64, beta float32, c unsafe.Pointer, ldc int64)
	// threads returns the library's thread count (threadSymbols' getter); nil when it
	// exports none.
	threads func() int32
}

func open(file string) (*Library, error) {
	h, err := purego.Dlopen(file, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, s := range symbols {
		fn, err := purego.Dlsym(h, s.name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		lib := &Library{name: file}
		if s.ilp64 {
			purego.RegisterFunc(&lib.sgemm64, fn)
		} else {
			purego.RegisterFunc(&lib.sgemm32, fn)
		}
		lib.bindThreads(h)
		return lib, nil
	}
	return nil, fmt.Errorf("%s exports no cblas_sgemm: %w", file, errors.Join(errs...))
}

// bindThreads finds the library's thread-count functions in h and, unless the
// program set the count through the libraries' variables, sets it to GOMAXPROCS (see
// the package doc).
func (l *Library) bindThreads(h uintptr) {
	for _, s := range threadSymbols {
		set, err := purego.Dlsym(h, s.set)
		if err != nil {
			continue
		}
		get, err := purego.Dlsym(h, s.get)
		if err != nil {
			continue
		}
		purego.RegisterFunc(&l.threads, get)
		if !threadsFromEnv() {
			var setThreads func(int32)
			purego.RegisterFunc(&setThreads, set)
			setThreads(int32(runtime.GOMAXPROCS(0)))
		}
		return
	}
}

// Threads is the number of threads the library runs a product on, for the whole
// process; 0 when it does not say (the reference libblas, single-threaded).
func (l *Library) Threads() int {
	if l.threads == nil {
		return 0
	}
	return int(l.threads())
}

// Name is the library file Load opened.
func (l *Library) Name() string { return l.name }

// Sgemm runs cblas_sgemm in row-major order; its contract is cpu.Sgemm's, with the
// same argument checks before the call.
func (l *Library) Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	cpu.CheckSgemm(transA, transB, m, n, k, lda, ldb, ldc, len(a), len(b), len(c))
	if m == 0 || n == 0 {
		return
	}
	if l.sgemm32 != nil && max(m, n, k, lda, ldb, ldc) > 1<<31-1 {
		panic(fmt.Sprintf("blas: %s: sizes m=%d n=%d k=%d exceed 32-bit integers", l.name, m, n, k))
	}
	ta, tb := int32(cblasNoTrans), int32(cblasNoTrans)
	if transA {
		ta = cblasTrans
	}
	if transB {
		tb = cblasTrans
	}
	pa, pb, pc := ptr(a), ptr(b), ptr(c)
	// BLAS requires leading dimensions ≥ 1 even for empty operands.
	lda, ldb, ldc = max(lda, 1), max(ldb, 1), max(ldc, 1)
	if l.sgemm64 != nil {
		l.sgemm64(cblasRowMajor, ta, tb, int64(m), int64(n), int64(k), alpha, pa, int64(lda), pb, int64(ldb), beta, pc, int64(ldc))
	} else {
		l.sgemm32(cblasRowMajor, ta, tb, int32(m), int32(n), int32(k), alpha, pa, int32(lda), pb, int32(ldb), beta, pc, int32(ldc))
	}
	runtime.KeepAlive(a)
	runtime.KeepAlive(b)
	runtime.KeepAlive(c)
}

// SgemmBatched runs one cblas_sgemm per matrix of the batch (the library parallelizes
// each); its contract is cpu.SgemmBatched's.
func (l *Library) SgemmBatched(transA, transB bool, m, n, k int, alpha float32, a []float32, lda, strideA int, b []float32, ldb, strideB int, beta float32, c []float32, ldc, strideC int, batch int) {
	cpu.CheckSgemmBatched(transA, transB, m, n, k, lda, strideA, ldb, strideB, ldc, strideC, batch, len(a), len(b), len(c))
	for i := range batch {
		l.Sgemm(transA, transB, m, n, k, alpha, a[min(i*strideA, len(a)):], lda, b[min(i*strideB, len(b)):], ldb, beta, c[min(i*strideC, len(c)):], ldc)
	}
}

// ptr is the address of s's first element, or nil for an empty slice (BLAS does not
// read an operand whose size is zero).
func ptr(s []float32) unsafe.Pointer {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Pointer(&s[0])
}
