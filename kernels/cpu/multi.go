package cpu

import (
	"fmt"

	"github.com/subletml/sublet/kernels"
)

// The multi-tensor steps run the single-tensor steps one after the other: the
// reference every backend's multi-tensor kernels match bit for bit. (One parallel
// pass over a whole list's elements measured no faster on a 2-core host: see
// docs/benchmarks.md.)

func (b *Backend) SGDMulti(c kernels.SGD, p, g, buf []kernels.Operand, first []bool) {
	const op = "kernels/cpu: sgd_multi"
	kernels.CheckLists(op, "g, first", len(p), len(g), len(first))
	mom := c.Momentum != 0
	if mom {
		kernels.CheckLists(op, "buf", len(p), len(buf))
	}
	for i := range p {
		var bi kernels.Operand
		if mom {
			bi = buf[i]
		}
		b.SGD(c, p[i], g[i], bi, first[i])
	}
}

func (b *Backend) AdamMulti(c kernels.Adam, steps []int, p, g, m, v []kernels.Operand) {
	kernels.CheckLists("kernels/cpu: adam_multi", "steps, g, m, v", len(p), len(steps), len(g), len(m), len(v))
	for i := range p {
		b.Adam(c, steps[i], p[i], g[i], m[i], v[i])
	}
}

// AdamMultiCapturable reads the rate and the counts from host memory and runs Adam
// with them: the reference of the device-side bias corrections (math.Pow's bits).
func (b *Backend) AdamMultiCapturable(c kernels.Adam, lr, steps kernels.Operand, slot []int, p, g, m, v []kernels.Operand) {
	const op = "kernels/cpu: adam_multi_capturable"
	kernels.CheckLists(op, "slot, g, m, v", len(p), len(slot), len(g), len(m), len(v))
	rate, counts := floats[float64](op, lr), floats[float64](op, steps)
	if len(rate) != 1 {
		panic(fmt.Sprintf("%s: the learning rate has %d elements, want 1", op, len(rate)))
	}
	if err := kernels.CheckSlots(slot, len(counts)); err != nil {
		panic(op + ": " + err.Error())
	}
	c.LR = rate[0]
	for i := range p {
		t := int(counts[slot[i]]) + 1
		b.Adam(c, t, p[i], g[i], m[i], v[i])
		counts[slot[i]] = float64(t)
	}
}

func (b *Backend) UnscaleMulti(g []kernels.Operand, inv float64, found kernels.Operand) {
	for _, x := range g {
		b.Unscale(x, inv, found)
	}
}
