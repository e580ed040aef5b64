package tensor

import (
	"github.com/subletml/sublet/dtype"

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
		r := recordRule(c, matmulBackward{}, out)
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
	var room [3]*Tensor
	in := append(room[:0], x, w)
	if bias != nil {
		in = append(in, bias)
	}
	c := begin(OpLinear, in...)
	c.floatOnly()
	x, w = c.in[0], c.in[1]
	if len(w.shape) != 2 || len(x.shape) < 1 || x.shape[len(x.shape)-1] != w.shape[1] {
		c.bad(ErrShape, "Linear needs x [..., in] and a weight [out, in]")
	}
	nOut, nIn := w.shape[0], w.shape[1]
	dt := dtype.Promote(x.dt, w.dt)
	if bias != nil {
		bias = c.in[2]
		if !sameShape(bias.shape, []int{nOut}) {
			c.bad(ErrShape, "the bias must be [%d]", nOut)
		}
		dt = dtype.Promote(dt, bias.dt)
	}
	var shapeRoom [smallRank]int
	shape := append(append(shapeRoom[:0], x.shape[:len(x.shape)-1]...), nOut)
	out := c.alloc(dt, shape)
	if c.recording() { // before computing, as it saves only inputs
		r := recordRule(c, linearBackward{}, out)
		r.x, r.w = c.saveCross(x, w)
	}
	rows := numel(x.shape[:len(x.shape)-1])
	x2 := c.placed(x, []int{rows, nIn})
	wt := viewOperand(w, []int{nIn, nOut}, []int{w.strides[1], w.strides[0]}, w.offset)
	o2 := c.placed(out, []int{rows, nOut})
	if bm, ok := c.k.(kernels.BiasMatmul); ok && bias != nil && bm.MatmulBias(o2, x2, wt, bias.operand()) {
		return c.done(out)
	}
	c.k.Matmul(o2, x2, wt)
	if bias != nil {
		o := out.operand()
		c.k.Binary(kernels.Add, o, o, bias.operand())
	}
	return c.done(out)
}

type linearBackward struct{ x, w *autograd.Saved }

func (r *linearBackward) backward(b *bwd) {
	in := b.f.in
	nOut, nIn := in[1].shape[0], in[1].shape[1]
	rows := numel(in[0].shape[:len(in[0].shape)-1]) // not -1: nOut or nIn may be 0
	// Batches of more than one dimension go through contiguous [rows, …] matrices
	// (Reshape copies a gradient that is not: a broadcast one); a batch of rows is
	// one already, and the rule makes no view of it.
	flat := len(in[0].shape) == 2
	g := b.g
	if !flat || !g.IsContiguous() {
		g = g.Reshape(rows, nOut)
	}
	if b.needs(0) {
		dx := g.MatMul(b.saved(r.w))
		if !flat {
			dx = dx.Reshape(in[0].shape...)
		}
		b.set(0, dx)
	}
	wantB := len(in) > 2 && b.needs(2)
	if b.needs(1) {
		x := b.saved(r.x)
		if !flat || !x.IsContiguous() {
			x = x.Reshape(rows, nIn)
		}
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
	gt := viewOperand(g, []int{nOut, rows}, []int{1, nOut}, g.offset)
	if !bm.MatmulBiasGrad(dw.operand(), db.operand(), gt, x.operand()) {
		c.abort()
		return nil, nil
	}
	c.done(nil)
	return dw, db
}

// viewOperand is t's storage seen with shape, strides and offset: a kernel operand
// never seen outside the op (t, which the op holds, keeps the storage). shape and
// strides are only read (the operand takes sharedOf's copies): a caller builds them
// on its stack.
func viewOperand(t *Tensor, shape, strides []int, offset int) kernels.Operand {
	l := sharedOf(shape, strides)
	o := t.operand()
	o.Layout = kernels.Layout{Shape: l.shape, Strides: l.strides, Offset: offset}
	return o
}

// placed returns t's elements as an operand of shape (same count): t's own when it is
// contiguous, else a contiguous copy's in the call's rowType (released with the op).
func (c *call) placed(t *Tensor, shape []int) kernels.Operand {
	if !t.IsContiguous() {
		t = c.dense(t)
	}
	return t.placedAs(shape)
}
