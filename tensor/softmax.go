package tensor

import (
	"github.com/subletml/sublet/autograd"
	"github.com/subletml/sublet/dtype"
)

// Softmax returns exp(t) normalized to sum 1 along axis. It saves its output. In an
// autocast scope the policy may pick the result's type (AutocastOutput).
func (t *Tensor) Softmax(axis int) *Tensor { return softmaxOp(OpSoftmax, t, dtype.Invalid, axis) }

// SoftmaxAs is Softmax with a result of type dt (torch.softmax's dtype=): t is read as
// dt (an F16 or BF16 t gives an F32 result without an F32 copy of t; otherwise t is
// cast first), and autocast leaves it alone. It saves its output; the gradient comes
// back in t's type.
func (t *Tensor) SoftmaxAs(dt dtype.DType, axis int) *Tensor {
	return softmaxOp(OpSoftmax, t, dt, axis)
}

// LogSoftmax returns log(Softmax(t)) along axis, computed stably. It saves its output.
// In an autocast scope the policy may pick the result's type (AutocastOutput).
func (t *Tensor) LogSoftmax(axis int) *Tensor {
	return softmaxOp(OpLogSoftmax, t, dtype.Invalid, axis)
}

// LogSoftmaxAs is LogSoftmax with a result of type dt, as SoftmaxAs.
func (t *Tensor) LogSoftmaxAs(dt dtype.DType, axis int) *Tensor {
	return softmaxOp(OpLogSoftmax, t, dt, axis)
}

// split returns the sizes before, along and after axis of shape.
func (c *call) split(shape []int, ax int) (outer, n, inner int) {
	a, ok := axis(ax, len(shape))
	if !ok {
		c.bad(ErrShape, "axis %d of a rank-%d tensor", ax, len(shape))
	}
	return numel(shape[:a]), shape[a], numel(shape[a+1:])
}

func softmaxOp(op string, t *Tensor, dt dtype.DType, ax int) *Tensor {
	c, dt := beginTyped(op, t, dt)
	c.floatOnly()
	x := c.readAs(0, dt)
	outer, n, inner := c.split(x.shape, ax)
	out := c.alloc(dt, x.shape)
	// The kernels read and write contiguous rows of one type (rowStore: an F16 or BF16
	// x and out as they are, else F32 or F64). An input of another type or layout is
	// converted into the buffer the result is computed in (out itself when it has that
	// type), and the kernel runs there in place: no copy of the input is made.
	buf, xs := c.denseOutAs(out, c.rowStore(out, x)), x
	if x.dt != buf.dt || !x.IsContiguous() {
		c.k.Copy(buf.operand(), x.operand())
		xs = buf
	}
	if op == OpSoftmax {
		c.k.Softmax(buf.operand(), xs.operand(), outer, n, inner)
	} else {
		c.k.LogSoftmax(buf.operand(), xs.operand(), outer, n, inner)
	}
	c.flush(out, buf)
	if c.recording() {
		r := recordRule(c, softmaxBackward{log: op == OpLogSoftmax, outer: outer, n: n, inner: inner}, out)
		r.y = c.save(out)
	}
	return c.done(out)
}

// softmaxBackward computes the input's gradient from the saved output y and writes it
// in the input's type (PyTorch's _softmax_backward_data with the input dtype).
type softmaxBackward struct {
	log             bool
	outer, n, inner int
	y               *autograd.Saved
}

func (r *softmaxBackward) backward(b *bwd) {
	g, y := b.g, b.saved(r.y)
	c := begin("softmax backward", g, y)
	dx := c.alloc(b.f.in[0].dt, g.shape)
	st := c.rowStore(dx, g, y)
	buf, gs, ys := c.denseOutAs(dx, st), c.denseAs(g, st), c.denseAs(y, st)
	if r.log {
		c.k.LogSoftmaxBackward(buf.operand(), gs.operand(), ys.operand(), r.outer, r.n, r.inner)
	} else {
		c.k.SoftmaxBackward(buf.operand(), gs.operand(), ys.operand(), r.outer, r.n, r.inner)
	}
	c.flush(dx, buf)
	b.set(0, c.done(dx))
}
