package tensor

import (
	"github.com/subletml/sublet/autograd"
	"github.com/subletml/sublet/dtype"
)

// LayerNorm normalizes x over its last dimension (size n) to zero mean and unit
// variance (biased, with eps added), then scales by w and shifts by b ([n] each, nil
// for none); the result has the type x, w and b promote to. It saves x, w and one mean
// and one reciprocal deviation per row.
func LayerNorm(x, w, b *Tensor, eps float64) *Tensor {
	in := []*Tensor{x}
	for _, t := range []*Tensor{w, b} {
		if t != nil {
			in = append(in, t)
		}
	}
	c := begin(OpLayerNorm, in...)
	c.floatOnly()
	x = c.in[0]
	if len(x.shape) == 0 {
		c.bad(ErrShape, "LayerNorm needs a rank of 1 or more")
	}
	n := x.shape[len(x.shape)-1]
	rows := numel(x.shape) / max(n, 1)
	i := 1
	if w != nil {
		w = c.in[i]
		i++
	}
	if b != nil {
		b = c.in[i]
	}
	dt := x.dt
	for _, p := range []*Tensor{w, b} {
		if p == nil {
			continue
		}
		if !sameShape(p.shape, []int{n}) {
			c.bad(ErrShape, "the weight and bias must be [%d]", n)
		}
		dt = dtype.Promote(dt, p.dt)
	}
	out := c.alloc(dt, x.shape)
	mean := c.alloc(c.rowType(), []int{rows})
	rstd := c.alloc(c.rowType(), []int{rows})
	st := c.rowStore(out, x, w, b)
	buf := c.denseOutAs(out, st)
	c.k.LayerNorm(buf.operand(), mean.operand(), rstd.operand(), c.denseAs(x, st).operand(), c.denseAs(w, st).operand(),
		c.denseAs(b, st).operand(), rows, n, eps)
	c.flush(out, buf)
	if c.recording() {
		r := recordRule(c, layerNormBackward{rows: rows, n: n, hasW: w != nil, hasB: b != nil}, out)
		r.x, r.mean, r.rstd = c.save(x), c.save(mean), c.save(rstd)
		if w != nil {
			r.w = c.save(w)
		}
	}
	c.temp(mean)
	c.temp(rstd)
	return c.done(out)
}

type layerNormBackward struct {
	rows, n       int
	hasW, hasB    bool
	x, mean, rstd *autograd.Saved
	w             *autograd.Saved // nil without a weight
}

func (r *layerNormBackward) backward(b *bwd) {
	g, x, mean, rstd := b.g, b.saved(r.x), b.saved(r.mean), b.saved(r.rstd)
	ins := []*Tensor{g, x, mean, rstd}
	var w *Tensor
	if r.w != nil {
		w = b.saved(r.w)
		ins = append(ins, w)
	}
	iw, ib := 1, 1
	if r.hasW {
		ib = 2
	}
	c := begin("layer norm backward", ins...)
	var dx, dw, db *Tensor
	if b.needs(0) {
		dx = c.alloc(x.dt, x.shape)
	}
	if r.hasW && b.needs(iw) {
		dw = c.alloc(c.rowType(), []int{r.n})
	}
	if r.hasB && b.needs(ib) {
		db = c.alloc(c.rowType(), []int{r.n})
	}
	st := c.rowStore(dx, g, x, w)
	buf := c.denseOutAs(dx, st)
	c.k.LayerNormBackward(buf.operand(), dw.operand(), db.operand(), c.denseAs(g, st).operand(), c.denseAs(x, st).operand(),
		c.dense(mean).operand(), c.dense(rstd).operand(), c.denseAs(w, st).operand(), r.rows, r.n)
	c.flush(dx, buf)
	c.done(nil)
	b.set(0, dx)
	if r.hasW {
		b.set(iw, dw)
	}
	if r.hasB {
		b.set(ib, db)
	}
}
