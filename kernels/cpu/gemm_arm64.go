package cpu

// The NEON micro-kernel computes C[0:8, 0:12] += alpha·Ap·Bp over k ≥ 1 steps of
// packed panels (gemm_gen.go writes it). Every arm64 CPU has NEON.

//go:noescape
func sgemmKernel8x12NEON(k int, a, b, c *float32, ldc int, alpha float32)

// gemmKernels lists the micro-kernels this machine can run, fastest first; the last
// is the pure-Go one every machine has.
func gemmKernels() []*gemmKernel {
	return []*gemmKernel{
		newGemmKernel("neon", 8, 12, 256, 8*16, 12*340, sgemmKernel8x12NEON, nil),
		goGemmKernel(),
	}
}

// transposers and copyRows are the packing's vector moves (gemm_amd64.go); none here.
var (
	transposers []transposer
	copyRows    func(dst *float32, ldd int, src *float32, lds int, rows int, mask int)
)
