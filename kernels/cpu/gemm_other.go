//go:build !amd64 && !arm64

package cpu

// gemmKernels lists the micro-kernels this machine can run: the pure-Go one.
func gemmKernels() []*gemmKernel { return []*gemmKernel{goGemmKernel()} }
