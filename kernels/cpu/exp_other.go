//go:build !amd64

package cpu

// expWidth is 0 here: expTo uses expScalar.
const expWidth = 0

func expRun(dst, src *float32, n int) { panic("kernels/cpu: no vector exp on this platform") }
