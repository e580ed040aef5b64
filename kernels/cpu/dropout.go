package cpu

import (
	"fmt"
	"math"
)

// DropoutMask fills mask with 0 (drop, probability p) or 1 (keep), drawing from next,
// a source of uniformly random uint64s such as math/rand/v2's (*Rand).Uint64 or
// (*PCG).Uint64: each draw decides two elements (32 bits each), so the mask depends
// only on the source's sequence. It runs on the calling goroutine.
func DropoutMask(mask []uint8, p float32, next func() uint64) {
	if !(p >= 0 && p <= 1) {
		panic(fmt.Sprintf("kernels/cpu: dropout: probability %v outside [0, 1]", p))
	}
	// Keep when the 32-bit draw is at least p·2³².
	thr := uint64(math.Ldexp(float64(p), 32))
	for i := 0; i < len(mask); i += 2 {
		u := next()
		mask[i] = boolByte(u&0xffffffff >= thr)
		if i+1 < len(mask) {
			mask[i+1] = boolByte(u>>32 >= thr)
		}
	}
}

// Dropout writes x·mask/(1-p) into dst (0 where mask is 0); with the output's
// gradient in place of x it is also the backward. x and mask (a Bool operand, usually
// contiguous over dst's shape) broadcast to dst's shape; dst may be x.
func Dropout(dst, x, mask Operand, p float32) {
	scale := float32(0)
	if p < 1 {
		scale = 1 / (1 - p)
	}
	elementwise("dropout", dst, []Operand{x, mask}, func(out []float32, in [][]float32) {
		zipRun(out, in[0], in[1], func(v, m float32) float32 {
			if m == 0 {
				return 0
			}
			return v * scale
		})
	})
}
