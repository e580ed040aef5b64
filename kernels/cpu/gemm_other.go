//go:build !amd64 && !arm64

package cpu

// gemmKernels lists the micro-kernels this machine can run: the pure-Go one.
func gemmKernels() []*gemmKernel { return []*gemmKernel{goGemmKernel()} }

// transposers and copyRows are the packing's vector moves (gemm_amd64.go); none here.
var (
	transposers []transposer
	copyRows    func(dst *float32, ldd int, src *float32, lds int, rows int, mask int)
)
