package cpu

import (
	"fmt"
	"math"
)

// DropoutMask fills mask with 0 (drop, probability p) or 1 (keep): element i is kept
// when the 32-bit word i%4 of Philox4x32-10 at counter i/4 under the key seed is at
// least p·2³², p rounded to float32. The mask is a function of seed, p and the position
// alone (not of the type of the tensor it drops), so every backend that follows this
// rule draws the same mask, however it spreads the work.
func DropoutMask(mask []uint8, p float64, seed uint64) {
	if !(p >= 0 && p <= 1) {
		panic(fmt.Sprintf("kernels/cpu: dropout: probability %v outside [0, 1]", p))
	}
	thr := uint64(math.Ldexp(float64(float32(p)), 32))
	blocks := (len(mask) + 3) / 4
	parallelFor(blocks, grain/4, func(lo, hi int) {
		for b := lo; b < hi; b++ {
			w := philoxBlock(seed, uint64(b))
			for j := range 4 {
				if i := 4*b + j; i < len(mask) {
					mask[i] = boolByte(uint64(w[j]) >= thr)
				}
			}
		}
	})
}

// Dropout writes x·mask/(1-p) into dst (0 where mask is 0), the scale computed in the
// kernel's type from p rounded to it; with the output's gradient in place of x it is
// also the backward. x and mask (a Bool operand, usually contiguous over dst's shape)
// broadcast to dst's shape; dst may be x.
func Dropout(dst, x, mask Operand, p float64) {
	byType(dropout[float32], dropout[float64], dst.dt, x.dt)(dst, x, mask, p)
}

func dropout[T float](dst, x, mask Operand, p float64) {
	scale := T(0)
	if p < 1 {
		scale = 1 / (1 - T(p))
	}
	elementwise("dropout", dst, []Operand{x, mask}, dropoutKernel[T]{scale})
}

type dropoutKernel[T float] struct{ scale T }

func (k dropoutKernel[T]) run(out []T, in eltIns[T]) {
	zipRun(out, in[0], in[1], func(v, m T) T {
		if m == 0 {
			return 0
		}
		return v * k.scale
	})
}
