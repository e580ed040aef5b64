package cpu

import "unsafe"

// goGemmKernel is the pure-Go micro-kernel every platform has: a 4×4 tile held in 16
// scalar accumulators.
func goGemmKernel() *gemmKernel {
	return newGemmKernel("go", 4, 4, 256, 64, 1024, sgemmKernel4x4Go, nil)
}

func sgemmKernel4x4Go(k int, a, b, c *float32, ldc int, alpha float32) {
	ap := unsafe.Slice(a, 4*k)
	bp := unsafe.Slice(b, 4*k)
	var c00, c01, c02, c03, c10, c11, c12, c13 float32
	var c20, c21, c22, c23, c30, c31, c32, c33 float32
	for p := range k {
		as := ap[4*p : 4*p+4 : 4*p+4]
		bs := bp[4*p : 4*p+4 : 4*p+4]
		a0, a1, a2, a3 := as[0], as[1], as[2], as[3]
		b0, b1, b2, b3 := bs[0], bs[1], bs[2], bs[3]
		c00 += a0 * b0
		c01 += a0 * b1
		c02 += a0 * b2
		c03 += a0 * b3
		c10 += a1 * b0
		c11 += a1 * b1
		c12 += a1 * b2
		c13 += a1 * b3
		c20 += a2 * b0
		c21 += a2 * b1
		c22 += a2 * b2
		c23 += a2 * b3
		c30 += a3 * b0
		c31 += a3 * b1
		c32 += a3 * b2
		c33 += a3 * b3
	}
	cs := unsafe.Slice(c, 3*ldc+4)
	r0 := cs[0:4:4]
	r0[0] += alpha * c00
	r0[1] += alpha * c01
	r0[2] += alpha * c02
	r0[3] += alpha * c03
	r1 := cs[ldc : ldc+4 : ldc+4]
	r1[0] += alpha * c10
	r1[1] += alpha * c11
	r1[2] += alpha * c12
	r1[3] += alpha * c13
	r2 := cs[2*ldc : 2*ldc+4 : 2*ldc+4]
	r2[0] += alpha * c20
	r2[1] += alpha * c21
	r2[2] += alpha * c22
	r2[3] += alpha * c23
	r3 := cs[3*ldc : 3*ldc+4 : 3*ldc+4]
	r3[0] += alpha * c30
	r3[1] += alpha * c31
	r3[2] += alpha * c32
	r3[3] += alpha * c33
}
