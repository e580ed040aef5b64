package tensor

import (
	"slices"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
)

// Concat joins ts along axis: their other dimensions must agree; the result has the
// type they promote to.
func Concat(ax int, ts ...*Tensor) *Tensor {
	if len(ts) == 0 {
		fail(OpConcat, ErrShape, nil, "nothing to concatenate")
	}
	c := begin(OpConcat, ts...)
	first := c.in[0]
	a, ok := axis(ax, len(first.shape))
	if !ok {
		c.bad(ErrShape, "axis %d of rank-%d tensors", ax, len(first.shape))
	}
	shape := slices.Clone(first.shape)
	shape[a] = 0
	dt := first.dt
	sizes := make([]int, len(c.in))
	for i, t := range c.in {
		if len(t.shape) != len(shape) {
			c.bad(ErrShape, "input %d has rank %d, not %d", i, len(t.shape), len(shape))
		}
		for j, d := range t.shape {
			if j != a && d != shape[j] {
				c.bad(ErrShape, "input %d is %v; all dimensions but %d must agree", i, t.shape, a)
			}
		}
		sizes[i] = t.shape[a]
		shape[a] += t.shape[a]
		dt = dtype.Promote(dt, t.dt)
	}
	out := c.alloc(dt, shape)
	off := 0
	for i, t := range c.in {
		c.k.Copy(placeAt(out, a, off, sizes[i]), t.operand())
		off += sizes[i]
	}
	if c.recording() {
		recordRule(c, concatBackward{axis: a, sizes: sizes}, out)
	}
	return c.done(out)
}

// placeAt is the operand of out's elements at off ≤ i < off+n along axis a.
func placeAt(out *Tensor, a, off, n int) kernels.Operand {
	shape := slices.Clone(out.shape)
	shape[a] = n
	o := out.operand()
	o.Layout = kernels.Layout{Shape: shape, Strides: out.strides, Offset: out.offset + off*out.strides[a]}
	return o
}

// concatBackward hands each input the slice of the gradient it filled (views).
type concatBackward struct {
	axis  int
	sizes []int
}

func (r *concatBackward) backward(b *bwd) {
	off := 0
	for i, n := range r.sizes {
		if b.needs(i) {
			b.set(i, b.g.Slice(r.axis, off, off+n))
		}
		off += n
	}
}

// Stack joins ts, all of one shape, along a new dimension at position axis.
func Stack(ax int, ts ...*Tensor) *Tensor {
	if len(ts) == 0 {
		fail(OpStack, ErrShape, nil, "nothing to stack")
	}
	c := begin(OpStack, ts...)
	first := c.in[0]
	a, ok := axis(ax, len(first.shape)+1)
	if !ok {
		c.bad(ErrShape, "position %d for rank-%d tensors", ax, len(first.shape))
	}
	dt := first.dt
	for i, t := range c.in {
		if !sameShape(t.shape, first.shape) {
			c.bad(ErrShape, "input %d is %v, input 0 %v; Stack needs one shape", i, t.shape, first.shape)
		}
		dt = dtype.Promote(dt, t.dt)
	}
	out := c.alloc(dt, slices.Insert(slices.Clone(first.shape), a, len(c.in)))
	for i, t := range c.in {
		dst := placeAt(out, a, i, 1)
		dst.Shape = slices.Delete(dst.Shape, a, a+1)
		dst.Strides = slices.Delete(slices.Clone(dst.Strides), a, a+1)
		c.k.Copy(dst, t.operand())
	}
	if c.recording() {
		recordRule(c, stackBackward{axis: a, n: len(c.in)}, out)
	}
	return c.done(out)
}

type stackBackward struct{ axis, n int }

func (r *stackBackward) backward(b *bwd) {
	for i := range r.n {
		if b.needs(i) {
			b.set(i, b.g.Slice(r.axis, i, i+1).Squeeze(r.axis))
		}
	}
}
