package cuda

import "github.com/subletml/sublet/kernels"

// The multi-tensor steps, for now one launch per tensor.

func (b *Backend) SGDMulti(c kernels.SGD, p, g, buf []kernels.Operand, first []bool) {
	kernels.CheckLists("sgd_multi", "g, first", len(p), len(g), len(first))
	for i := range p {
		var bi kernels.Operand
		if c.Momentum != 0 {
			bi = buf[i]
		}
		b.SGD(c, p[i], g[i], bi, first[i])
	}
}

func (b *Backend) AdamMulti(c kernels.Adam, steps []int, p, g, m, v []kernels.Operand) {
	kernels.CheckLists("adam_multi", "steps, g, m, v", len(p), len(steps), len(g), len(m), len(v))
	for i := range p {
		b.Adam(c, steps[i], p[i], g[i], m[i], v[i])
	}
}

func (b *Backend) UnscaleMulti(g []kernels.Operand, inv float64, found kernels.Operand) {
	for _, x := range g {
		b.Unscale(x, inv, found)
	}
}
