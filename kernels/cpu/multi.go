package cpu

import "github.com/subletml/sublet/kernels"

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

func (b *Backend) UnscaleMulti(g []kernels.Operand, inv float64, found kernels.Operand) {
	for _, x := range g {
		b.Unscale(x, inv, found)
	}
}
