package tensor

import (
	"slices"
)

// The view ops return a new handle over the same storage (no copy, no memory): they
// place the same elements differently. Their gradients are the inverse placement.

// placement computes a view's shape, strides and offset from its input, or panics
// through c.bad.
type placement func(c *call, x *Tensor) (shape, strides []int, offset int)

func viewOp(op string, t *Tensor, place placement, r rule) *Tensor {
	c := beginView(op, t)
	x := c.in[0]
	shape, strides, offset := place(c, x)
	out := c.view(x, shape, strides, offset)
	if c.recording() {
		c.record(r, out)
	}
	return c.done(out)
}

// reshapeBackward reshapes the gradient back to the input's shape.
type reshapeBackward struct{}

func (reshapeBackward) backward(b *bwd) { b.set(0, b.g.Reshape(b.f.in[0].shape...)) }

// resolve returns shape with one -1 replaced so that it holds n elements, and its
// row-major strides (layoutOf's, shared). shape is only read.
func (c *call) resolve(n int, shape []int) *sharedLayout {
	var room [smallRank]int
	out := append(room[:0], shape...)
	free, known := -1, 1
	for i, d := range out {
		switch {
		case d == -1 && free < 0:
			free = i
		case d < 0:
			c.bad(ErrShape, "shape %v: one -1 at most, no other negative size", slices.Clone(shape))
		default:
			known *= d
		}
	}
	if free >= 0 {
		if known == 0 || n%known != 0 {
			c.bad(ErrShape, "shape %v cannot hold %d elements", slices.Clone(shape), n)
		}
		out[free] = n / known
	}
	if numel(out) != n {
		c.bad(ErrShape, "shape %v holds %d elements, the tensor has %d", slices.Clone(shape), numel(out), n)
	}
	return layoutOf(out)
}

// View returns t with a new shape of the same element count (one size may be -1). t
// must be contiguous; Reshape copies when it is not.
func (t *Tensor) View(shape ...int) *Tensor {
	return viewOp(OpView, t, func(c *call, x *Tensor) ([]int, []int, int) {
		if !x.IsContiguous() {
			c.bad(ErrShape, "View needs a contiguous tensor (strides %v); use Reshape, which copies", x.strides)
		}
		l := c.resolve(x.Numel(), shape)
		return l.shape, l.strides, x.offset
	}, reshapeBackward{})
}

// Reshape returns t with a new shape of the same element count (one size may be -1):
// a view when t is contiguous, a copy otherwise.
func (t *Tensor) Reshape(shape ...int) *Tensor {
	t.live(OpReshape)
	if !t.IsContiguous() {
		tmp := t.Clone()
		defer tmp.Release()
		t = tmp
	}
	return viewOp(OpReshape, t, func(c *call, x *Tensor) ([]int, []int, int) {
		l := c.resolve(x.Numel(), shape)
		return l.shape, l.strides, x.offset
	}, reshapeBackward{})
}

// Transpose swaps dimensions d0 and d1 (negative counts from the end).
func (t *Tensor) Transpose(d0, d1 int) *Tensor {
	t.live(OpTranspose)
	rank := len(t.shape)
	var room [smallRank]int
	perm := room[:0]
	for i := range rank {
		perm = append(perm, i)
	}
	a, okA := axis(d0, rank)
	b, okB := axis(d1, rank)
	if !okA || !okB {
		fail(OpTranspose, ErrShape, []*Tensor{t}, "dimensions %d and %d of a rank-%d tensor", d0, d1, rank)
	}
	perm[a], perm[b] = perm[b], perm[a]
	return permute(OpTranspose, t, perm)
}

// T swaps the last two dimensions (the matrix transpose of a batch of matrices).
func (t *Tensor) T() *Tensor { return t.Transpose(-2, -1) }

// Permute reorders the dimensions: dimension i of the result is dimension dims[i] of t.
func (t *Tensor) Permute(dims ...int) *Tensor { return permute(OpPermute, t, dims) }

// permute is a view op (viewOp's steps) whose shape and strides are built on the
// stack and shared (sharedOf), and whose rule is made only when it records: a
// transpose in a backward rule allocates its handle alone. dims is only read.
func permute(op string, t *Tensor, dims []int) *Tensor {
	c := beginView(op, t)
	x := c.in[0]
	rank := len(x.shape)
	if len(dims) != rank {
		c.bad(ErrShape, "permutation %v of a rank-%d tensor", slices.Clone(dims), rank)
	}
	var shapeRoom, stridesRoom, invRoom [smallRank]int
	var seenRoom [smallRank]bool
	shape, strides := append(shapeRoom[:0], x.shape...), append(stridesRoom[:0], x.strides...)
	inv, seen := append(invRoom[:0], x.shape...), append(seenRoom[:0], make([]bool, rank)...)
	for i, d := range dims {
		a, ok := axis(d, rank)
		if !ok || seen[a] {
			c.bad(ErrShape, "%v is not a permutation of the %d dimensions", slices.Clone(dims), rank)
		}
		seen[a] = true
		inv[a] = i
		shape[i], strides[i] = x.shape[a], x.strides[a]
	}
	l := sharedOf(shape, strides)
	out := c.view(x, l.shape, l.strides, x.offset)
	if c.recording() {
		recordRule(c, permuteBackward{slices.Clone(inv)}, out)
	}
	return c.done(out)
}

type permuteBackward struct{ inv []int }

func (r permuteBackward) backward(b *bwd) { b.set(0, b.g.Permute(r.inv...)) }

// Slice returns elements start ≤ i < end along axis (negative start and end count from
// the end of the axis).
func (t *Tensor) Slice(ax, start, end int) *Tensor {
	r := &sliceBackward{}
	return viewOp(OpSlice, t, func(c *call, x *Tensor) ([]int, []int, int) {
		a, ok := axis(ax, len(x.shape))
		if !ok {
			c.bad(ErrShape, "axis %d of a rank-%d tensor", ax, len(x.shape))
		}
		n := x.shape[a]
		s, e := start, end
		if s < 0 {
			s += n
		}
		if e < 0 {
			e += n
		}
		if s < 0 || e > n || s > e {
			c.bad(ErrShape, "slice [%d:%d] of an axis of %d", start, end, n)
		}
		r.axis, r.start, r.end = a, s, e
		shape := slices.Clone(x.shape)
		shape[a] = e - s
		return shape, slices.Clone(x.strides), x.offset + s*x.strides[a]
	}, r)
}

// sliceBackward puts the gradient in its place in zeros of the input's shape.
type sliceBackward struct{ axis, start, end int }

func (r *sliceBackward) backward(b *bwd) {
	in := b.f.in[0]
	g := b.g
	dx := b.s.Zeros(g.st.dev, g.dt, in.shape...)
	dx.Slice(r.axis, r.start, r.end).CopyFrom(g)
	b.set(0, dx)
}

// Expand broadcasts t to shape (numpy rules: sizes of 1 repeat with stride 0, new
// leading dimensions are added; -1 keeps a size). No data is copied.
func (t *Tensor) Expand(shape ...int) *Tensor {
	return viewOp(OpExpand, t, func(c *call, x *Tensor) ([]int, []int, int) {
		lead := len(shape) - len(x.shape)
		if lead < 0 {
			c.bad(ErrShape, "cannot expand to %v, which has fewer dimensions", shape)
		}
		out, strides := slices.Clone(shape), make([]int, len(shape))
		for i := range out {
			j := i - lead
			switch {
			case j < 0 && out[i] >= 0:
			case j < 0:
				c.bad(ErrShape, "-1 in a new leading dimension of %v", shape)
			case out[i] == -1 || out[i] == x.shape[j]:
				out[i], strides[i] = x.shape[j], x.strides[j]
			case x.shape[j] == 1 && out[i] >= 0:
			default:
				c.bad(ErrShape, "cannot expand to %v", shape)
			}
		}
		return out, strides, x.offset
	}, identityBackward{})
}

// Squeeze removes dimension ax, which must have size 1.
func (t *Tensor) Squeeze(ax int) *Tensor {
	return viewOp(OpSqueeze, t, func(c *call, x *Tensor) ([]int, []int, int) {
		a, ok := axis(ax, len(x.shape))
		if !ok || x.shape[a] != 1 {
			c.bad(ErrShape, "dimension %d is not of size 1", ax)
		}
		return slices.Delete(slices.Clone(x.shape), a, a+1), slices.Delete(slices.Clone(x.strides), a, a+1), x.offset
	}, reshapeBackward{})
}

// Unsqueeze inserts a dimension of size 1 at position ax (0 ≤ ax ≤ rank; negative
// counts from the end, -1 appending).
func (t *Tensor) Unsqueeze(ax int) *Tensor {
	return viewOp(OpUnsqueeze, t, func(c *call, x *Tensor) ([]int, []int, int) {
		a, ok := axis(ax, len(x.shape)+1)
		if !ok {
			c.bad(ErrShape, "position %d in a rank-%d tensor", ax, len(x.shape))
		}
		return slices.Insert(slices.Clone(x.shape), a, 1), slices.Insert(slices.Clone(x.strides), a, 1), x.offset
	}, reshapeBackward{})
}
