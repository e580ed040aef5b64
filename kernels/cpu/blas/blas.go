// Package blas loads a system BLAS (OpenBLAS, MKL, or any libblas with CBLAS) at run
// time through purego and offers its cblas_sgemm as a cpu.Gemm. Nothing links against
// it: the build stays CGO_ENABLED=0, and without a system BLAS everything runs on the
// built-in GEMM.
//
// Choosing (FromEnv reads SUBLET_BLAS; Open takes the same words):
//
//	builtin (or unset)  the built-in pure-Go GEMM; deterministic and needs nothing
//	auto                the first system BLAS found, else builtin
//	openblas            libopenblas (LP64, then the 64-bit-integer libopenblas64)
//	mkl                 Intel MKL's single dynamic library, libmkl_rt
//	blas                the system's libblas.so.3 (Debian's alternative)
//	/path/to/lib.so     that library file, which must export cblas_sgemm (or
//	                    cblas_sgemm64_, or the scipy_-prefixed names of the OpenBLAS
//	                    builds that NumPy and SciPy wheels carry)
//
// Threads: a system BLAS runs its own threads. Loading one (Load, Open, FromEnv) sets
// their number to GOMAXPROCS, the bound the built-in kernels keep to, so that one knob
// bounds sublet's CPU work whichever GEMM runs it (as torch.set_num_threads sets
// MKL's and OpenMP's); unless one of the libraries' own variables
// (OPENBLAS_NUM_THREADS, GOTO_NUM_THREADS, MKL_NUM_THREADS, OMP_NUM_THREADS) is set,
// which the library then follows. OpenBLAS (the builds whose cblas_sgemm the package
// loads) and MKL are set; the reference libblas is single-threaded. The count is the
// library's, for the whole process: the last load sets it. Threads reports it.
//
// Invariants: a *Library is immutable after Open and safe for concurrent use; its
// libraries stay loaded for the life of the process (never dlclosed, since calls may
// be in flight). A system BLAS may sum in another order than the built-in GEMM, so
// results can differ in the last bits between implementations.
package blas

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/subletml/sublet/kernels/cpu"
)

// Env is the environment variable FromEnv reads.
const Env = "SUBLET_BLAS"

// ErrNotFound is wrapped by Open's error when no library of the asked kind can be
// loaded on this machine.
var ErrNotFound = errors.New("system BLAS not found")

// candidates lists, per kind, the library names tried in order.
var candidates = map[string][]string{
	"openblas": {"libopenblas.so.0", "libopenblas.so", "libopenblas64.so.0", "libopenblas.dylib"},
	"mkl":      {"libmkl_rt.so.2", "libmkl_rt.so", "libmkl_rt.dylib"},
	"blas":     {"libblas.so.3", "libcblas.so.3"},
}

// symbols are the names of cblas_sgemm a library may export, tried in order, and
// whether each takes 64-bit integers: CBLAS's, OpenBLAS's 64-bit-integer build's, and
// those of the OpenBLAS builds in SciPy's (scipy-openblas32) and NumPy's
// (scipy-openblas64) wheels.
var symbols = []struct {
	name  string
	ilp64 bool
}{{"cblas_sgemm", false}, {"cblas_sgemm64_", true}, {"scipy_cblas_sgemm", false}, {"scipy_cblas_sgemm64_", true}}

// threadSymbols are the setter and getter of a library's thread count, tried in
// order: OpenBLAS's, its 64-bit-integer build's, those of SciPy's and NumPy's wheels'
// builds, MKL's. Each takes or returns a C int.
var threadSymbols = []struct{ set, get string }{
	{"openblas_set_num_threads", "openblas_get_num_threads"},
	{"openblas_set_num_threads64_", "openblas_get_num_threads64_"},
	{"scipy_openblas_set_num_threads", "scipy_openblas_get_num_threads"},
	{"scipy_openblas_set_num_threads64_", "scipy_openblas_get_num_threads64_"},
	{"MKL_Set_Num_Threads", "MKL_Get_Max_Threads"},
}

// threadVars are the environment variables a system BLAS reads its thread count from;
// when one is set, loading a library leaves its count alone.
var threadVars = []string{"OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS"}

// threadsFromEnv reports whether the program set the libraries' thread count itself.
func threadsFromEnv() bool {
	for _, v := range threadVars {
		if os.Getenv(v) != "" {
			return true
		}
	}
	return false
}

// FromEnv returns the GEMM that SUBLET_BLAS asks for (see the package doc); unset
// means builtin. Asking for a system BLAS that cannot be loaded is an error, except
// with auto.
func FromEnv() (cpu.Gemm, error) { return Open(os.Getenv(Env)) }

// Open returns the GEMM that choice names (see the package doc).
func Open(choice string) (cpu.Gemm, error) {
	switch choice {
	case "", "builtin":
		return cpu.Builtin(), nil
	case "auto":
		for _, kind := range []string{"openblas", "mkl", "blas"} {
			if lib, err := Load(kind); err == nil {
				return lib, nil
			}
		}
		return cpu.Builtin(), nil
	}
	lib, err := Load(choice)
	if err != nil {
		return nil, err
	}
	return lib, nil
}

// Load opens a system BLAS of the given kind ("openblas", "mkl", "blas") or at the
// given path (anything containing a '/').
func Load(kind string) (*Library, error) {
	names, ok := candidates[kind]
	if !ok {
		if !strings.ContainsRune(kind, '/') {
			return nil, fmt.Errorf("blas: unknown %s value %q: use builtin, auto, openblas, mkl, blas or a library path", Env, kind)
		}
		names = []string{kind}
	}
	var errs []error
	for _, n := range names {
		lib, err := open(n)
		if err == nil {
			return lib, nil
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("blas: loading %s: %w (%w)", kind, ErrNotFound, errors.Join(errs...))
}
