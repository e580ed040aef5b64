//go:build !amd64 && !arm64

package cpu

// gemmKernels lists the micro-kernels this machine can run: the pure-Go one.
func gemmKernels() []*gemmKernel { return []*gemmKernel{goGemmKernel()} }

// transpose16 and copyRows are the packing's vector moves (gemm_amd64.go); none here.
var transpose16, copyRows func(dst *float32, ldd int, src *float32, lds int, rows int, mask int)
