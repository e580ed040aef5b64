package cpu

import "golang.org/x/sys/cpu"

//go:noescape
func expAVX512(dst, src *float32, n int)

//go:noescape
func expAVX2(dst, src *float32, n int)

// expWidth is the vector width of the widest vector exp this CPU runs (0: none); fixed
// for the process.
var expWidth = func() int {
	switch {
	case cpu.X86.HasAVX512F:
		return 16
	case cpu.X86.HasAVX2 && cpu.X86.HasFMA:
		return 8
	}
	return 0
}()

// expRun runs the vector exp of expWidth on n elements, a multiple of it. Its calls are
// direct, so dst and src do not escape (a scratch buffer stays on its caller's stack).
func expRun(dst, src *float32, n int) {
	if expWidth == 16 {
		expAVX512(dst, src, n)
	} else {
		expAVX2(dst, src, n)
	}
}
