package tensor

import (
	"github.com/subletml/sublet/dtype"
	"slices"

	"github.com/subletml/sublet/autograd"
	"github.com/subletml/sublet/kernels"
)

// MatMul returns the matrix product of a ([..., m, k]) and b ([..., k, n]): the batch
// dimensions broadcast, the result is [batch..., m, n]. Transposed operands (T,
// Transpose, Permute views) are read in place, without a copy. Both need rank 2 or
// more (Unsqueeze a vector). It saves a when b needs a gradient and b when a does.
func (a *Tensor) MatMul(b *Tensor) *Tensor {
	c := begin(OpMatMul, a, b)
	c.floatOnly()
	x, y := c.in[0], c.in[1]
	if len(x.shape) < 2 || len(y.shape) < 2 {
		c.bad(ErrShape, "MatMul needs operands of rank 2 or more; Unsqueeze a vector")
	}
	m, k := x.shape[len(x.shape)-2], x.shape[len(x.shape)-1]
	k2, n := y.shape[len(y.shape)-2], y.shape[len(y.shape)-1]
	batch, ok := broadcast(x.shape[:len(x.shape)-2], y.shape[:len(y.shape)-2])
	if k != k2 || !ok {
		c.bad(ErrShape, "[..., %d, %d] @ [..., %d, %d]: inner sizes or batch dimensions do not match", m, k, k2, n)
	}
	out := c.alloc(dtype.Promote(x.dt, y.dt), append(batch, m, n))
	if c.recording() { // before computing, as it saves only inputs
		r := &matmulBackward{}
		c.record(r, out)
		r.a, r.b = c.saveCross(x, y)
	}
	c.k.Matmul(out.operand(), x.operand(), y.operand())
	return c.done(out)
}

type matmulBackward struct{ a, b *autograd.Saved }

func (r *matmulBackward) backward(b *bwd) {
	g := b.g
	if b.needs(0) {
		b.set(0, g.MatMul(b.saved(r.b).T()))
	}
	if b.needs(1) {
		x := b.saved(r.a)
		if len(x.shape) > 2 && len(b.f.in[1].shape) == 2 {
			// A weight shared by the whole batch: one [k, rows]·[rows, n] product
			// instead of a product per matrix summed afterwards. The row count is
			// explicit: -1 cannot be resolved when k or n is 0.
			rows := numel(x.shape[:len(x.shape)-1])
			k, n := x.shape[len(x.shape)-1], g.shape[len(g.shape)-1]
			b.set(1, x.Reshape(rows, k).T().MatMul(g.Reshape(rows, n)))
			return
		}
		b.set(1, x.T().MatMul(g))
	}
}

// Linear returns x·wᵀ + bias for x [..., in], a weight w [out, in] and a bias [out]
// (nil for none): the result is [..., out], of the type the three promote to. It saves x when w needs a gradient and w
// when x does (the weight's storage is the parameter's: no extra memory).
func Linear(x, w, bias *Tensor) *Tensor {
	c, lin := beginLinear(OpLinear, x, w, bias)
	out := c.alloc(lin.dt, lin.shape)
	if c.recording() { // before computing, as it saves only inputs
		r := &linearBackward{}
		c.record(r, out)
		r.x, r.w = c.saveCross(lin.x, lin.w)
	}
	lin.place(c)
	lin.product(c, out)
	return c.done(out)
}

// linearCall is a Linear-shaped op's inputs once begun (after autocast), the kernels'
// views of them and the result's type and shape.
type linearCall struct {
	x, w, bias *Tensor // bias nil for none
	x2         *Tensor // x as [rows, in] (place)
	wt         *Tensor // w read transposed: [in, out] (place)
	dt         dtype.DType
	shape      []int // [..., out]
}

// beginLinear starts op, a Linear-shaped op, on x [..., in], a weight w [out, in] and
// a bias [out] (nil for none), and checks them.
func beginLinear(op string, x, w, bias *Tensor) (*call, linearCall) {
	in := []*Tensor{x, w}
	if bias != nil {
		in = append(in, bias)
	}
	c := begin(op, in...)
	c.floatOnly()
	l := linearCall{x: c.in[0], w: c.in[1]}
	if len(l.w.shape) != 2 || len(l.x.shape) < 1 || l.x.shape[len(l.x.shape)-1] != l.w.shape[1] {
		c.bad(ErrShape, "%s needs x [..., in] and a weight [out, in]", op)
	}
	nOut := l.w.shape[0]
	l.dt = dtype.Promote(l.x.dt, l.w.dt)
	if bias != nil {
		l.bias = c.in[2]
		if !sameShape(l.bias.shape, []int{nOut}) {
			c.bad(ErrShape, "the bias must be [%d]", nOut)
		}
		l.dt = dtype.Promote(l.dt, l.bias.dt)
	}
	l.shape = append(slices.Clone(l.x.shape[:len(l.x.shape)-1]), nOut)
	return c, l
}

// place sets the kernels' views x2 and wt: after the op allocated its results, as x2
// may be a copy of x, which an OpCache must not take for the result.
func (l *linearCall) place(c *call) {
	nOut, nIn := l.w.shape[0], l.w.shape[1]
	l.x2 = c.placed(l.x, []int{numel(l.x.shape[:len(l.x.shape)-1]), nIn})
	l.wt = c.internalView(l.w, []int{nIn, nOut}, []int{l.w.strides[1], l.w.strides[0]}, l.w.offset)
}

// rows is the kernels' [rows, out] view of t, a contiguous result of the op.
func (l linearCall) rows(c *call, t *Tensor) *Tensor {
	sh := []int{l.x2.shape[0], l.w.shape[0]}
	return c.internalView(t, sh, rowMajor(sh), t.offset)
}

// product writes x·wᵀ + bias into dst, a contiguous result of the op: in one pass
// where the backend folds the bias into its product (kernels.BiasMatmul), with Matmul
// and Binary otherwise.
func (l linearCall) product(c *call, dst *Tensor) {
	d2 := l.rows(c, dst).operand()
	if bm, ok := c.k.(kernels.BiasMatmul); ok && l.bias != nil && bm.MatmulBias(d2, l.x2.operand(), l.wt.operand(), l.bias.operand()) {
		return
	}
	c.k.Matmul(d2, l.x2.operand(), l.wt.operand())
	if l.bias != nil {
		o := dst.operand()
		c.k.Binary(kernels.Add, o, o, l.bias.operand())
	}
}

type linearBackward struct{ x, w *autograd.Saved }

func (r *linearBackward) backward(b *bwd) {
	in := b.f.in
	nOut, nIn := in[1].shape[0], in[1].shape[1]
	rows := numel(in[0].shape[:len(in[0].shape)-1]) // not -1: nOut or nIn may be 0
	g := b.g.Reshape(rows, nOut)
	if b.needs(0) {
		b.set(0, g.MatMul(b.saved(r.w)).Reshape(in[0].shape...))
	}
	wantB := len(in) > 2 && b.needs(2)
	if b.needs(1) {
		x := b.saved(r.x).Reshape(rows, nIn)
		if wantB {
			if dw, db := linearGrads(g, x); dw != nil {
				b.set(1, dw)
				b.set(2, db)
				return
			}
		}
		b.set(1, g.T().MatMul(x))
	}
	if wantB {
		b.set(2, g.Sum(0))
	}
}

// linearGrads returns a Linear's weight and bias gradients, gᵀ·x and g summed over its
// rows, from one product that sums g in its own pass (kernels.BiasGradMatmul: cuBLASLt's
// BGRADB epilogue), or nils where the backend cannot: then the caller runs MatMul and
// Sum, whose values differ only in the order of the bias gradient's sums. A backward
// that records (a gradient of the gradient) takes that path too, whose ops have
// backward rules.
func linearGrads(g, x *Tensor) (dw, db *Tensor) {
	const op = "linear backward"
	if _, ok := kernelsFor(op, g.st.dev, []*Tensor{g, x}).(kernels.BiasGradMatmul); !ok {
		return nil, nil // no op to start where the kernels have no such product
	}
	c := begin(op, g, x)
	g, x = c.in[0], c.in[1]
	bm, ok := c.k.(kernels.BiasGradMatmul)
	if !ok || c.recording() || g.dt != x.dt || !g.IsContiguous() || !x.IsContiguous() {
		c.abort()
		return nil, nil
	}
	rows, nOut, nIn := g.shape[0], g.shape[1], x.shape[1]
	dw, db = c.alloc(g.dt, []int{nOut, nIn}), c.alloc(g.dt, []int{nOut})
	gt := c.internalView(g, []int{nOut, rows}, []int{1, nOut}, g.offset)
	if !bm.MatmulBiasGrad(dw.operand(), db.operand(), gt.operand(), x.operand()) {
		c.abort()
		return nil, nil
	}
	c.done(nil)
	return dw, db
}

// internalView is the kernels' view of an operand t, never seen outside the op: a
// handle over t's storage that holds no reference and is never released or tracked (t,
// which the op holds, keeps the storage; the view shares t's handle).
func (c *call) internalView(t *Tensor, shape, strides []int, offset int) *Tensor {
	return &Tensor{shape: shape, strides: strides, offset: offset, dt: t.dt, st: t.st, h: t.h}
}

// placed returns t's elements as a tensor of shape (same count): an internal view of t
// when it is contiguous, of a contiguous copy in the call's rowType (released with the
// op) otherwise.
func (c *call) placed(t *Tensor, shape []int) *Tensor {
	if t.IsContiguous() {
		return c.internalView(t, shape, rowMajor(shape), t.offset)
	}
	d := c.dense(t)
	return c.internalView(d, shape, rowMajor(shape), d.offset)
}
