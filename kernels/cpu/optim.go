package cpu

import (
	"math"

	"github.com/chewxy/math32"
	"github.com/subletml/sublet/kernels"
)

// SGDStep updates the parameters p in place from their gradient g with the
// hyper-parameters c. buf is the momentum buffer (len(p) floats; unused and may be nil
// when Momentum is 0); on the first step (first) it is set to the gradient rather than
// decayed, as PyTorch does.
func SGDStep(c kernels.SGD, p, g, buf []float32, first bool) {
	const op = "sgd"
	checkLen(op, "g", len(g), len(p))
	if c.Momentum != 0 {
		checkLen(op, "momentum buffer", len(buf), len(p))
	}
	parallelFor(len(p), grain, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			d := g[i]
			if c.WeightDecay != 0 {
				d += c.WeightDecay * p[i]
			}
			if c.Momentum != 0 {
				b := d
				if !first {
					b = c.Momentum*buf[i] + (1-c.Dampening)*d
				}
				buf[i] = b
				if c.Nesterov {
					d += c.Momentum * b
				} else {
					d = b
				}
			}
			p[i] -= c.LR * d
		}
	})
}

// AdamStep runs Adam's (AdamW's when c.Decoupled) update number step (1 for the
// first) on parameters p in place from their gradient g, with the first and second
// moment buffers m and v (len(p) floats each, zero before the first step), fused in
// one pass.
func AdamStep(c kernels.Adam, step int, p, g, m, v []float32) {
	const op = "adam"
	checkLen(op, "g", len(g), len(p))
	checkLen(op, "m", len(m), len(p))
	checkLen(op, "v", len(v), len(p))
	if step < 1 {
		panic("kernels/cpu: adam: step numbers start at 1")
	}
	bc1 := 1 - math.Pow(c.Beta1, float64(step))
	bc2 := 1 - math.Pow(c.Beta2, float64(step))
	stepSize := float32(c.LR / bc1)
	rbc2 := float32(1 / math.Sqrt(bc2))
	decay := float32(1)
	if c.Decoupled {
		decay = float32(1 - c.LR*c.WeightDecay)
	}
	b1, b2, eps, wd := float32(c.Beta1), float32(c.Beta2), float32(c.Eps), float32(c.WeightDecay)
	omb1, omb2 := float32(1-c.Beta1), float32(1-c.Beta2)
	parallelFor(len(p), grain, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			d := g[i]
			if !c.Decoupled && wd != 0 {
				d += wd * p[i]
			}
			mi := b1*m[i] + omb1*d
			vi := b2*v[i] + omb2*d*d
			m[i], v[i] = mi, vi
			p[i] = p[i]*decay - stepSize*mi/(math32.Sqrt(vi)*rbc2+eps)
		}
	})
}
