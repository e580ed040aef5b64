package cpu

import "golang.org/x/sys/cpu"

// The assembly micro-kernels compute C[0:mr, 0:nr] += alpha·Ap·Bp over k ≥ 1 steps
// of packed panels (gemm_gen.go writes them).

//go:noescape
func sgemmKernel14x32AVX512(k int, a, b, c *float32, ldc int, alpha float32)

//go:noescape
func sgemmKernel6x16AVX2(k int, a, b, c *float32, ldc int, alpha float32)

// The Store kernels set C[0:mr, 0:nr] = alpha·Ap·Bp, not reading C.

//go:noescape
func sgemmKernel14x32AVX512Store(k int, a, b, c *float32, ldc int, alpha float32)

//go:noescape
func sgemmKernel6x16AVX2Store(k int, a, b, c *float32, ldc int, alpha float32)

//go:noescape
func transpose16AVX512(dst *float32, ldd int, src *float32, lds int, rows int, mask int)

//go:noescape
func transpose8AVX2(dst *float32, ldd int, src *float32, lds int, rows int, mask int)

//go:noescape
func copyRowsAVX512(dst *float32, ldd int, src *float32, lds int, rows int, mask int)

// transposers lists the packing's vector transposes this CPU runs, widest first.
var transposers = func() []transposer {
	var ts []transposer
	if cpu.X86.HasAVX512F {
		ts = append(ts, transposer{16, transpose16AVX512})
	}
	if cpu.X86.HasAVX2 && cpu.X86.HasPOPCNT {
		ts = append(ts, transposer{8, transpose8AVX2})
	}
	return ts
}()

// copyRows copies rows ≥ 1 rows of the floats mask selects (bit i: float i, i < 32)
// from src (lds floats apart) to dst (ldd floats apart), without touching the others;
// nil where the CPU has no masked vector moves.
var copyRows = func() func(dst *float32, ldd int, src *float32, lds int, rows int, mask int) {
	if cpu.X86.HasAVX512F {
		return copyRowsAVX512
	}
	return nil
}()

// gemmKernels lists the micro-kernels this machine can run, fastest first; the last
// is the pure-Go one every machine has.
//
// The AVX-512 kernel packs A in chunks of 8 panels (112 rows): on the 16-core host (an
// Emerald Rapids Xeon, 2 MiB of L2 a core) the 1024 products at 16 threads ran 6-8 %
// faster than with chunks of 12 (168 rows) in both of two alternating rounds (nn
// 978-999 against 929-982, tn 937-941 against 834-906 GFLOP/s) and deep-sgd 7.31-7.34
// steps/s against 6.77-7.05; at 1 and 2 threads on the development machine the two
// were within its noise (docs/benchmarks.md, "Twelfth session").
func gemmKernels() []*gemmKernel {
	var ks []*gemmKernel
	if cpu.X86.HasAVX512F {
		ks = append(ks, newGemmKernel("avx512", 14, 32, 384, 14*8, 4096, sgemmKernel14x32AVX512, sgemmKernel14x32AVX512Store))
	}
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		ks = append(ks, newGemmKernel("avx2", 6, 16, 256, 6*24, 4096, sgemmKernel6x16AVX2, sgemmKernel6x16AVX2Store))
	}
	return append(ks, goGemmKernel())
}
