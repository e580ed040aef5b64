package cpu

import "golang.org/x/sys/cpu"

// The assembly micro-kernels compute C[0:mr, 0:nr] += alpha·Ap·Bp over k ≥ 1 steps
// of packed panels (gemm_gen.go writes them).

//go:noescape
func sgemmKernel14x32AVX512(k int, a, b, c *float32, ldc int, alpha float32)

//go:noescape
func sgemmKernel6x16AVX2(k int, a, b, c *float32, ldc int, alpha float32)

// gemmKernels lists the micro-kernels this machine can run, fastest first; the last
// is the pure-Go one every machine has.
func gemmKernels() []*gemmKernel {
	var ks []*gemmKernel
	if cpu.X86.HasAVX512F {
		ks = append(ks, newGemmKernel("avx512", 14, 32, 384, 14*12, 4096, sgemmKernel14x32AVX512))
	}
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		ks = append(ks, newGemmKernel("avx2", 6, 16, 256, 6*24, 4096, sgemmKernel6x16AVX2))
	}
	return append(ks, goGemmKernel())
}
