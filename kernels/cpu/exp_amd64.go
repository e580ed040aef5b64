package cpu

import "golang.org/x/sys/cpu"

//go:noescape
func expAVX512(dst, src *float32, n int)

//go:noescape
func expAVX2(dst, src *float32, n int)

// expVector is the widest vector exp this CPU runs; fixed for the process.
var expVector = func() expKernel {
	switch {
	case cpu.X86.HasAVX512F:
		return expKernel{16, expAVX512}
	case cpu.X86.HasAVX2 && cpu.X86.HasFMA:
		return expKernel{8, expAVX2}
	}
	return expKernel{}
}()
