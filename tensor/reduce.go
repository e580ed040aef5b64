package tensor

import (
	"slices"

	"github.com/subletml/sublet/autograd"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
)

// Sum returns the sum of t over axes (every axis when none is given), dropping them.
// In an autocast scope the policy may pick the result's type (AutocastOutput). The sum
// of an integer or Bool tensor is I64 and exact, as PyTorch's: x.Eq(y).Sum() counts.
func (t *Tensor) Sum(axes ...int) *Tensor { return sumOp(OpSum, t, dtype.Invalid, axes, false) }

// SumKeep is Sum keeping the reduced axes as size 1.
func (t *Tensor) SumKeep(axes ...int) *Tensor { return sumOp(OpSum, t, dtype.Invalid, axes, true) }

// SumAs is Sum with a result of type dt (torch.sum's dtype=): t is read as dt (an F16 or
// BF16 t is summed into F32 without a copy; otherwise t is cast first), and autocast
// leaves it alone. The gradient comes back in t's type.
func (t *Tensor) SumAs(dt dtype.DType, axes ...int) *Tensor { return sumOp(OpSum, t, dt, axes, false) }

// SumKeepAs is SumAs keeping the reduced axes as size 1.
func (t *Tensor) SumKeepAs(dt dtype.DType, axes ...int) *Tensor {
	return sumOp(OpSum, t, dt, axes, true)
}

// Mean returns the mean of t over axes (every axis when none is given), dropping them.
// The mean of an integer or Bool tensor is F32 (PyTorch refuses it and wants a cast
// first): pred.Eq(labels).Mean() is the accuracy.
func (t *Tensor) Mean(axes ...int) *Tensor { return meanOp(t, axes, false) }

// MeanKeep is Mean keeping the reduced axes as size 1.
func (t *Tensor) MeanKeep(axes ...int) *Tensor { return meanOp(t, axes, true) }

// reduced returns the shape of a reduction of shape over axes with the reduced axes
// kept as 1 (keep) and dropped (drop), and how many elements each output sums.
// Both shapes are layoutOf's, shared.
func (c *call) reduced(shape, axes []int) (keep, drop []int, count int) {
	var onRoom [smallRank]bool
	var keepRoom, dropRoom [smallRank]int
	on := append(onRoom[:0], make([]bool, len(shape))...)
	k, d := keepRoom[:0], dropRoom[:0]
	if len(axes) == 0 {
		for i := range on {
			on[i] = true
		}
	}
	for _, a := range axes {
		i, ok := axis(a, len(shape))
		if !ok || on[i] {
			c.bad(ErrShape, "axes %v of a rank-%d tensor: out of range or repeated", slices.Clone(axes), len(shape))
		}
		on[i] = true
	}
	count = 1
	for i, n := range shape {
		if on[i] {
			k = append(k, 1)
			count *= n
			continue
		}
		k = append(k, n)
		d = append(d, n)
	}
	return layoutOf(k).shape, layoutOf(d).shape, count
}

func sumOp(op string, t *Tensor, dt dtype.DType, axes []int, keepDims bool) *Tensor {
	c, dt := beginTyped(op, t, dt)
	if x := c.in[0]; !x.dt.IsFloat() && dt == x.dt {
		return c.reduce(x, dtype.I64, axes, keepDims, false)
	}
	c.floatOnly()
	return c.reduce(c.readAs(0, dt), dt, axes, keepDims, false)
}

func meanOp(t *Tensor, axes []int, keepDims bool) *Tensor {
	c := begin(OpMean, t)
	x := c.in[0]
	if !x.dt.IsFloat() {
		return c.reduce(x, dtype.F32, axes, keepDims, true)
	}
	return c.reduce(x, x.dt, axes, keepDims, true)
}

// reduce sums x over axes into a result of type dt (or averages it: mean).
func (c *call) reduce(x *Tensor, dt dtype.DType, axes []int, keepDims, mean bool) *Tensor {
	keep, drop, count := c.reduced(x.shape, axes)
	shape := drop
	if keepDims {
		shape = keep
	}
	out := c.alloc(dt, shape)
	dst := out.placedAs(keep)
	if mean {
		c.k.Mean(dst, x.operand())
	} else {
		c.k.Sum(dst, x.operand())
	}
	if c.recording() {
		scale := 1.0
		if mean {
			scale = 1 / float64(count)
		}
		recordRule(c, sumBackward{keep: keep, scale: scale}, out)
	}
	return c.done(out)
}

// sumBackward spreads the gradient back over the reduced axes (scaled by 1/count for
// a mean) as a broadcast view.
type sumBackward struct {
	keep  []int
	scale float64
}

func (r *sumBackward) backward(b *bwd) {
	g := b.g
	if r.scale != 1 {
		g = g.MulScalar(r.scale)
	}
	b.set(0, g.Reshape(r.keep...).Expand(b.f.in[0].shape...))
}

// Norm returns the 2-norm of all of t's elements, √(Σ x²), as a scalar of t's type
// (torch.linalg.vector_norm): the squares summed in one pass over t (the kernels'
// SumSquares), with the bits of t.Mul(t).Sum().Sqrt() for F32 and F64 (which reads t
// twice and writes a copy of it); F16 and BF16 sum and take the root in F32, rounded
// once to t's type. The gradient is g·x/‖x‖, 0 where the norm is 0. It saves its input and
// its output. In an autocast scope it runs in F32, as PyTorch's norm does.
func (t *Tensor) Norm() *Tensor {
	c, dt := beginTyped(OpNorm, t, dtype.Invalid)
	c.floatOnly()
	x := c.readAs(0, dt)
	out := c.alloc(dt, []int{})
	// In the call's rowType (F32 for F16 and BF16, whose sum of squares overflows
	// long before the norm does), then into out.
	buf := c.denseOut(out)
	o := buf.operand()
	c.k.SumSquares(o, x.operand())
	c.k.Unary(kernels.Sqrt, o, o)
	c.flush(out, buf)
	if c.recording() {
		r := recordRule(c, normBackward{}, out)
		r.x, r.y = c.save(x), c.save(out)
	}
	return c.done(out)
}

// normBackward is g·x/‖x‖, with 0 for the elements of a tensor whose norm is 0 (all
// of them 0), as PyTorch's.
type normBackward struct{ x, y *autograd.Saved }

func (r *normBackward) backward(b *bwd) {
	x, y := b.saved(r.x), b.saved(r.y)
	scale := b.g.Div(y).MaskedFill(y.EqScalar(0), 0)
	b.set(0, x.Mul(scale))
}

// SumTo sums t down to shape, which must broadcast to t's shape: the reduction of a
// broadcast (the gradient of an operand that was broadcast). In an autocast scope the
// policy may pick the result's type (AutocastOutput).
func (t *Tensor) SumTo(shape ...int) *Tensor {
	c, dt := beginTyped(OpSumTo, t, dtype.Invalid)
	c.floatOnly()
	x := c.readAs(0, dt)
	if !broadcastsTo(shape, x.shape) {
		c.bad(ErrShape, "%v does not broadcast to the tensor's shape", shape)
	}
	out := c.alloc(dt, slices.Clone(shape))
	c.k.Sum(out.operand(), x.operand())
	if c.recording() {
		c.record(expandBackward{}, out)
	}
	return c.done(out)
}

// expandBackward broadcasts the gradient back to the input's shape (a view).
type expandBackward struct{}

func (expandBackward) backward(b *bwd) { b.set(0, b.g.Expand(b.f.in[0].shape...)) }

// Max returns the largest element of t along axis, dropping it. The gradient goes to
// the first maximal element of each reduction; the op saves its I64 indices.
func (t *Tensor) Max(axis int) *Tensor { return maxOp(t, axis, false) }

// MaxKeep is Max keeping the axis as size 1.
func (t *Tensor) MaxKeep(axis int) *Tensor { return maxOp(t, axis, true) }

// Argmax returns the I64 position of the first largest element along axis, dropping
// it. It records nothing.
func (t *Tensor) Argmax(axis int) *Tensor {
	c := begin("Argmax", t)
	idx, _, _ := c.argmax(axis, false, false)
	return c.done(idx)
}

// argmax computes the positions of the maxima of the call's input along axis (I64, the
// axis dropped) and, when values is set, the maxima (the axis kept as 1 when keepDims).
// keep is the input's shape with the axis as 1.
func (c *call) argmax(ax int, values, keepDims bool) (idx, val *Tensor, keep []int) {
	x := c.in[0]
	if _, ok := axis(ax, len(x.shape)); !ok {
		c.bad(ErrShape, "axis %d of a rank-%d tensor", ax, len(x.shape))
	}
	keep, drop, count := c.reduced(x.shape, []int{ax})
	if count == 0 {
		c.bad(ErrShape, "the maximum of an empty axis")
	}
	idx = c.alloc(dtype.I64, drop)
	if values {
		shape := drop
		if keepDims {
			shape = keep
		}
		val = c.alloc(x.dt, shape)
	}
	var dst kernels.Operand // absent for Argmax, which drops the values
	if val != nil {
		dst = val.placedAs(keep)
	}
	c.k.Max(dst, idx.placedAs(keep), x.operand())
	return idx, val, keep
}

func maxOp(t *Tensor, ax int, keepDims bool) *Tensor {
	c := begin(OpMax, t)
	c.floatOnly()
	idx, out, keep := c.argmax(ax, true, keepDims)
	if c.recording() {
		r := recordRule(c, maxBackward{keep: keep}, out)
		r.idx = c.save(idx)
	}
	c.temp(idx)
	return c.done(out)
}

// maxBackward routes the gradient to the saved positions of the maxima.
type maxBackward struct {
	keep []int // the output's shape with the reduced axis as 1
	idx  *autograd.Saved
}

func (r *maxBackward) backward(b *bwd) {
	g, idx := b.g.Reshape(r.keep...), b.saved(r.idx)
	c := begin("max backward", g, idx)
	dx := c.alloc(g.dt, b.f.in[0].shape)
	c.k.MaxBackward(dx.operand(), g.operand(), c.dense64(idx).operand())
	b.set(0, c.done(dx))
}
