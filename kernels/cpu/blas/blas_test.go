package blas

import (
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/kernels"
	"github.com/subletml/sublet/kernels/cpu"
)

func TestOpenChoices(t *testing.T) {
	g, err := Open("")
	require.NoError(t, err)
	assert.Equal(t, cpu.Builtin(), g)
	g, err = Open("builtin")
	require.NoError(t, err)
	assert.Equal(t, cpu.Builtin(), g)
	g, err = Open("auto")
	require.NoError(t, err, "auto never fails: it falls back to builtin")
	assert.NotNil(t, g)

	_, err = Open("cublas")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"cublas"`)
	assert.Contains(t, err.Error(), "openblas")

	_, err = Load("/nonexistent/libnothing.so")
	require.ErrorIs(t, err, ErrNotFound)
	assert.Contains(t, err.Error(), "/nonexistent/libnothing.so")

	t.Setenv(Env, "builtin")
	g, err = FromEnv()
	require.NoError(t, err)
	assert.Equal(t, cpu.Builtin(), g)
}

// systemBLAS loads the library SUBLET_BLAS names (a kind or a path; default openblas)
// or skips the test when there is none.
func systemBLAS(t *testing.T) *Library {
	choice := os.Getenv(Env)
	if choice == "" || choice == "auto" || choice == "builtin" {
		choice = "openblas"
	}
	lib, err := Load(choice)
	if errors.Is(err, ErrNotFound) {
		t.Skipf("no system BLAS: %v", err)
	}
	require.NoError(t, err)
	return lib
}

func TestSystemSgemmMatchesBuiltin(t *testing.T) {
	lib := systemBLAS(t)
	t.Logf("testing %s", lib.Name())
	r := rand.New(rand.NewPCG(1, 2))
	for range 40 {
		m, n, k := r.IntN(50), r.IntN(50), r.IntN(50)
		transA, transB := r.IntN(2) == 0, r.IntN(2) == 0
		ar, ac := m, k
		if transA {
			ar, ac = k, m
		}
		br, bc := k, n
		if transB {
			br, bc = n, k
		}
		lda, ldb, ldc := ac+r.IntN(3), bc+r.IntN(3), n+r.IntN(3)
		rnd := func(size int) []float32 {
			s := make([]float32, size)
			for i := range s {
				s[i] = float32(r.NormFloat64())
			}
			return s
		}
		a, b, c := rnd(ar*lda), rnd(br*ldb), rnd(m*ldc)
		want := append([]float32(nil), c...)
		got := append([]float32(nil), c...)
		cpu.Sgemm(transA, transB, m, n, k, 0.5, a, lda, b, ldb, 2, want, ldc)
		lib.Sgemm(transA, transB, m, n, k, 0.5, a, lda, b, ldb, 2, got, ldc)
		for i := range want {
			require.InDelta(t, want[i], got[i], 1e-4*(1+math.Abs(float64(want[i]))), "%dx%dx%d at %d", m, n, k, i)
		}
	}
	// Batched, with A shared across the batch.
	a := []float32{1, 2, 3, 4}
	b := []float32{1, 0, 0, 1, 2, 0, 0, 2}
	c := make([]float32, 8)
	lib.SgemmBatched(false, false, 2, 2, 2, 1, a, 2, 0, b, 2, 4, 0, c, 2, 4, 2)
	assert.Equal(t, []float32{1, 2, 3, 4, 2, 4, 6, 8}, c)
	assert.Panics(t, func() { lib.Sgemm(false, false, 2, 2, 2, 1, a[:3], 2, b, 2, 0, c, 2) }, "checked before the call")
}

func TestMatmulOnSystemBLAS(t *testing.T) {
	lib := systemBLAS(t)
	r := rand.New(rand.NewPCG(3, 4))
	a := make([]float32, 3*20*30)
	b := make([]float32, 30*40)
	for i := range a {
		a[i] = float32(r.NormFloat64())
	}
	for i := range b {
		b[i] = float32(r.NormFloat64())
	}
	// a is [3, 20, 30]; b is viewed transposed as [30, 40] from a [40, 30] buffer.
	bt := kernels.Layout{Shape: []int{30, 40}, Strides: []int{1, 30}}
	want := make([]float32, 3*20*40)
	got := make([]float32, 3*20*40)
	cpu.Matmul(nil, cpu.F32(want, kernels.Contiguous(3, 20, 40)), cpu.F32(a, kernels.Contiguous(3, 20, 30)), cpu.F32(b, bt), 1, 0)
	cpu.Matmul(lib, cpu.F32(got, kernels.Contiguous(3, 20, 40)), cpu.F32(a, kernels.Contiguous(3, 20, 30)), cpu.F32(b, bt), 1, 0)
	for i := range want {
		require.InDelta(t, want[i], got[i], 1e-4*(1+math.Abs(float64(want[i]))), "at %d", i)
	}
}

// A library that exports none of cblas_sgemm's names is refused, naming it and the
// names tried.
func TestLibraryWithoutSgemm(t *testing.T) {
	for _, path := range []string{"/lib/x86_64-linux-gnu/libm.so.6", "/usr/lib/x86_64-linux-gnu/libm.so.6", "/lib64/libm.so.6", "/usr/lib/aarch64-linux-gnu/libm.so.6"} {
		if _, err := os.Stat(path); err != nil {
			continue
		}
		_, err := Load(path)
		require.ErrorIs(t, err, ErrNotFound)
		assert.Contains(t, err.Error(), path+" exports no cblas_sgemm")
		assert.Contains(t, err.Error(), "scipy_cblas_sgemm64_")
		return
	}
	t.Skip("no libm to load")
}

// TestThreadsFollowGOMAXPROCS: loading a system BLAS that says its thread count sets it
// to GOMAXPROCS, and leaves it alone when the program set one of the libraries'
// variables.
func TestThreadsFollowGOMAXPROCS(t *testing.T) {
	for _, v := range threadVars {
		if os.Getenv(v) != "" {
			t.Skipf("%s is set: the library follows it", v)
		}
	}
	lib := systemBLAS(t)
	if lib.Threads() == 0 {
		t.Skipf("%s does not say its thread count", lib.Name())
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, n := range []int{1, min(2, runtime.NumCPU())} {
		runtime.GOMAXPROCS(n)
		lib = systemBLAS(t)
		assert.Equal(t, n, lib.Threads(), "%s loaded at GOMAXPROCS=%d", lib.Name(), n)
	}

	// With the library's own variable set, a load leaves the count as it was.
	runtime.GOMAXPROCS(1)
	systemBLAS(t)
	t.Setenv("OPENBLAS_NUM_THREADS", "1")
	runtime.GOMAXPROCS(2)
	assert.Equal(t, 1, systemBLAS(t).Threads())
}
