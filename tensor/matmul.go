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
	c, lin := beginLinear(OpLinear, x, w, bias)
	var shapeRoom [smallRank]int
	out := c.alloc(lin.dt, lin.shapeInto(shapeRoom[:0]))
	if c.recording() { // before computing, as it saves only inputs
		r := recordRule(c, linearBackward{}, out)
		r.x, r.w = c.saveCross(lin.x, lin.w)
	}
	lin.place(c)
	lin.product(c, out)
	return c.done(out)
}

// linearCall is a Linear-shaped op's inputs once begun (after autocast), the kernels'
// views of them and the result's type.
type linearCall struct {
	x, w, bias *Tensor         // bias nil for none
	x2         kernels.Operand // x as [rows, in] (place)
	wt         kernels.Operand // w read transposed: [in, out] (place)
	dt         dtype.DType
}

// beginLinear starts op, a Linear-shaped op, on x [..., in], a weight w [out, in] and
// a bias [out] (nil for none), and checks them.
func beginLinear(op string, x, w, bias *Tensor) (*call, linearCall) {
	var room [3]*Tensor
	in := append(room[:0], x, w)
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
	return c, l
}

// shapeInto appends the result's shape, [..., out], to buf (a caller's stack array:
// alloc takes a shared copy).
func (l linearCall) shapeInto(buf []int) []int {
	return append(append(buf, l.x.shape[:len(l.x.shape)-1]...), l.w.shape[0])
}

// place sets the kernels' views x2 and wt: after the op allocated its results, as x2
// may be a copy of x, which an OpCache must not take for the result.
func (l *linearCall) place(c *call) {
	nOut, nIn := l.w.shape[0], l.w.shape[1]
	l.x2 = c.placed(l.x, []int{numel(l.x.shape[:len(l.x.shape)-1]), nIn})
	l.wt = viewOperand(l.w, []int{nIn, nOut}, []int{l.w.strides[1], l.w.strides[0]}, l.w.offset)
}

// rows is the kernels' [rows, out] view of t, a contiguous result of the op.
func (l linearCall) rows(c *call, t *Tensor) kernels.Operand {
	return c.placed(t, []int{l.x2.Shape[0], l.w.shape[0]})
}

// product writes x·wᵀ + bias into dst, a contiguous result of the op: in one pass
// where the backend folds the bias into its product (kernels.BiasMatmul), with Matmul
// and Binary otherwise.
func (l linearCall) product(c *call, dst *Tensor) {
	d2 := l.rows(c, dst)
	if bm, ok := c.k.(kernels.BiasMatmul); ok && l.bias != nil && bm.MatmulBias(d2, l.x2, l.wt, l.bias.operand()) {
		return
	}
	c.k.Matmul(d2, l.x2, l.wt)
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
