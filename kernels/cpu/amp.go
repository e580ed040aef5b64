package cpu

import "sync/atomic"

// NonFinite reports whether any element of x is an Inf or a NaN (read in its own
// precision: an F64 beyond float32's range is finite).
func NonFinite(x Operand) bool { return byType(nonFinite[float32], nonFinite[float64], x.dt)(x) }

func nonFinite[T float](x Operand) bool {
	var found atomic.Bool
	it := newIter("non_finite", x.Layout)
	parallelFor(it.size, grain, func(lo, hi int) {
		var buf [chunk]T
		it.walk(lo, hi, func(offs, inner [maxOperands]int, n int) {
			if !found.Load() && anyNonFinite(load(&x, offs[0], inner[0], n, &buf)) {
				found.Store(true)
			}
		})
	})
	return found.Load()
}

// Unscale multiplies every element of g by invScale (rounded to the type the kernel
// computes in) in place and reports whether any was an Inf or a NaN before (the
// gradient scaler's found-inf): one pass for both.
func Unscale(g Operand, invScale float64) (foundInf bool) {
	return byType(unscale[float32], unscale[float64], g.dt)(g, invScale)
}

func unscale[T float](g Operand, invScale float64) bool {
	k := unscaleKernel[T]{T(invScale), new(atomic.Bool)}
	elementwise("unscale", g, []Operand{g}, k)
	return k.found.Load()
}

type unscaleKernel[T float] struct {
	inv   T
	found *atomic.Bool // set by any run that saw an Inf or a NaN
}

func (k unscaleKernel[T]) run(out []T, in eltIns[T]) {
	if anyNonFinite(in[0]) {
		k.found.Store(true)
	}
	mapRun(out, in[0], func(v T) T { return v * k.inv })
}

func anyNonFinite[T float](v []T) bool {
	for _, x := range v {
		if x-x != 0 { // Inf-Inf and NaN-NaN are NaN
			return true
		}
	}
	return false
}
