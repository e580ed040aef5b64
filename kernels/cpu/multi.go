package cpu

import (
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
)

// The multi-tensor steps run one parallel pass over the elements of every tensor of
// their list of each type, so that a step over many small parameters splits its work
// once, not once per tensor; each element gets the bits of the single-tensor step (the
// vector loops give every element the scalar loop's bits wherever a piece starts).

func (*Backend) SGDMulti(c kernels.SGD, p, g, buf []kernels.Operand, first []bool) {
	const op = "sgd_multi"
	kernels.CheckLists("kernels/cpu: "+op, "g, first", len(p), len(g), len(first))
	if c.Momentum != 0 {
		kernels.CheckLists("kernels/cpu: "+op, "buf", len(p), len(buf))
	}
	sgdMulti[float32](c, p, g, buf, first)
	sgdMulti[float64](c, p, g, buf, first)
}

// sgdMulti steps the parameters of p computed in T (F64 ones in float64, the others in
// float32, as SGD chooses).
func sgdMulti[T float](c kernels.SGD, p, g, buf []kernels.Operand, first []bool) {
	const op = "sgd"
	mom := c.Momentum != 0
	bufOf := func(i int) []T {
		if !mom {
			return nil
		}
		return floats[T](op, buf[i])
	}
	total := 0
	for i := range p {
		if computesIn[T](p[i]) {
			n := len(floats[T](op, p[i]))
			checkLen(op, "g", len(floats[T](op, g[i])), n)
			if mom {
				checkLen(op, "momentum buffer", len(bufOf(i)), n)
			}
			total += n
		}
	}
	v := optimVector[T]()
	pieces[T](p, total, func(i, lo, hi int) {
		k := newSGDConsts[T](c, first[i])
		var b []T
		if mom {
			b = bufOf(i)[lo:hi]
		}
		k.run(v, floats[T](op, p[i])[lo:hi], floats[T](op, g[i])[lo:hi], b)
	})
}

func (*Backend) AdamMulti(c kernels.Adam, steps []int, p, g, m, v []kernels.Operand) {
	const op = "adam_multi"
	kernels.CheckLists("kernels/cpu: "+op, "steps, g, m, v", len(p), len(steps), len(g), len(m), len(v))
	adamMulti[float32](c, steps, p, g, m, v)
	adamMulti[float64](c, steps, p, g, m, v)
}

func adamMulti[T float](c kernels.Adam, steps []int, p, g, m, v []kernels.Operand) {
	const op = "adam"
	total := 0
	for i := range p {
		if computesIn[T](p[i]) {
			n := len(floats[T](op, p[i]))
			checkLen(op, "g", len(floats[T](op, g[i])), n)
			checkLen(op, "m", len(floats[T](op, m[i])), n)
			checkLen(op, "v", len(floats[T](op, v[i])), n)
			newAdamConsts[T](c, steps[i]) // checks the step number
			total += n
		}
	}
	vec := optimVector[T]()
	pieces[T](p, total, func(i, lo, hi int) {
		k := newAdamConsts[T](c, steps[i])
		k.run(vec, floats[T](op, p[i])[lo:hi], floats[T](op, g[i])[lo:hi], floats[T](op, m[i])[lo:hi], floats[T](op, v[i])[lo:hi])
	})
}

// computesIn reports whether a step on p computes in T: float64 for F64 parameters,
// float32 for the others (which must then be F32).
func computesIn[T float](p kernels.Operand) bool { return (p.DType == dtype.F64) == !is32[T]() }

// pieces splits the total elements of the parameters of ps computed in T, laid end to
// end in list order, among goroutines (parallelFor), and calls run for each tensor's
// part [lo, hi) of a piece.
func pieces[T float](ps []kernels.Operand, total int, run func(i, lo, hi int)) {
	parallelFor(total, grain, func(lo, hi int) {
		start := 0 // of tensor i among the elements
		for i, p := range ps {
			if start >= hi {
				return
			}
			if !computesIn[T](p) {
				continue
			}
			n := p.Size()
			if a, b := max(lo-start, 0), min(hi-start, n); a < b {
				run(i, a, b)
			}
			start += n
		}
	})
}

func (b *Backend) UnscaleMulti(g []kernels.Operand, inv float64, found kernels.Operand) {
	for _, x := range g {
		b.Unscale(x, inv, found)
	}
}
