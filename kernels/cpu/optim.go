package cpu

import (
	"math"

	"github.com/subletml/sublet/kernels"
)

// SGDStep updates the parameters p in place from their gradient g with the
// hyper-parameters c, rounded to T. buf is the momentum buffer (len(p) floats; unused
// and may be nil when Momentum is 0); on the first step (first) it is set to the
// gradient rather than decayed, as PyTorch does.
func SGDStep[T float](c kernels.SGD, p, g, buf []T, first bool) {
	const op = "sgd"
	checkLen(op, "g", len(g), len(p))
	if c.Momentum != 0 {
		checkLen(op, "momentum buffer", len(buf), len(p))
	}
	lr, mom, damp, wd := T(c.LR), T(c.Momentum), T(c.Dampening), T(c.WeightDecay)
	parallelFor(len(p), grain, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			d := g[i]
			if wd != 0 {
				d += wd * p[i]
			}
			if mom != 0 {
				b := d
				if !first {
					b = mom*buf[i] + (1-damp)*d
				}
				buf[i] = b
				if c.Nesterov {
					d += mom * b
				} else {
					d = b
				}
			}
			p[i] -= lr * d
		}
	})
}

// AdamStep runs Adam's (AdamW's when c.Decoupled) update number step (1 for the
// first) on parameters p in place from their gradient g, with the first and second
// moment buffers m and v (len(p) floats each, zero before the first step), fused in
// one pass. The bias corrections are computed in float64, the elements in T.
func AdamStep[T float](c kernels.Adam, step int, p, g, m, v []T) {
	const op = "adam"
	checkLen(op, "g", len(g), len(p))
	checkLen(op, "m", len(m), len(p))
	checkLen(op, "v", len(v), len(p))
	if step < 1 {
		panic("kernels/cpu: adam: step numbers start at 1")
	}
	bc1 := 1 - math.Pow(c.Beta1, float64(step))
	bc2 := 1 - math.Pow(c.Beta2, float64(step))
	stepSize := T(c.LR / bc1)
	rbc2 := T(1 / math.Sqrt(bc2))
	decay := T(1)
	if c.Decoupled {
		decay = T(1 - c.LR*c.WeightDecay)
	}
	b1, b2, eps, wd := T(c.Beta1), T(c.Beta2), T(c.Eps), T(c.WeightDecay)
	omb1, omb2 := T(1-c.Beta1), T(1-c.Beta2)
	parallelFor(len(p), grain, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			d := g[i]
			if !c.Decoupled && wd != 0 {
				d += wd * p[i]
			}
			mi := b1*m[i] + omb1*d
			vi := b2*v[i] + omb2*d*d
			m[i], v[i] = mi, vi
			p[i] = p[i]*decay - stepSize*mi/(sqrtf(vi)*rbc2+eps)
		}
	})
}
