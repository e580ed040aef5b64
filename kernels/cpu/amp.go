package cpu

import "sync/atomic"

// NonFinite reports whether any element of x is an Inf or a NaN.
func NonFinite(x Operand) bool {
	var found atomic.Bool
	it := newIter("non_finite", x.Layout)
	parallelFor(it.size, grain, func(lo, hi int) {
		var buf [chunk]float32
		it.walk(lo, hi, func(offs, inner *[maxOperands]int, n int) {
			if !found.Load() && anyNonFinite(x.load(offs[0], inner[0], n, &buf)) {
				found.Store(true)
			}
		})
	})
	return found.Load()
}

// Unscale multiplies every element of g by invScale in place and reports whether any
// was an Inf or a NaN before (the gradient scaler's found-inf): one pass for both.
func Unscale(g Operand, invScale float32) (foundInf bool) {
	var found atomic.Bool
	elementwise("unscale", g, []Operand{g}, func(out []float32, in [][]float32) {
		if anyNonFinite(in[0]) {
			found.Store(true)
		}
		mapRun(out, in[0], func(v float32) float32 { return v * invScale })
	})
	return found.Load()
}

func anyNonFinite(v []float32) bool {
	for _, x := range v {
		if x-x != 0 { // Inf-Inf and NaN-NaN are NaN
			return true
		}
	}
	return false
}
