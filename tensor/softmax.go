package tensor

import (
	"github.com/subletml/sublet/autograd"
	"github.com/subletml/sublet/kernels/cpu"
)

// Softmax returns exp(t) normalized to sum 1 along axis. It saves its output.
func (t *Tensor) Softmax(axis int) *Tensor { return softmaxOp(OpSoftmax, t, axis) }

// LogSoftmax returns log(Softmax(t)) along axis, computed stably. It saves its output.
func (t *Tensor) LogSoftmax(axis int) *Tensor { return softmaxOp(OpLogSoftmax, t, axis) }

// split returns the sizes before, along and after axis of shape.
func (c *call) split(shape []int, ax int) (outer, n, inner int) {
	a, ok := axis(ax, len(shape))
	if !ok {
		c.bad(ErrShape, "axis %d of a rank-%d tensor", ax, len(shape))
	}
	return numel(shape[:a]), shape[a], numel(shape[a+1:])
}

func softmaxOp(op string, t *Tensor, ax int) *Tensor {
	c := begin(op, t)
	c.floatOnly()
	x := c.in[0]
	outer, n, inner := c.split(x.shape, ax)
	out := c.alloc(x.dt, x.shape)
	if c.computes(out) {
		buf, xs := c.denseOut(out), c.dense(x)
		if op == OpSoftmax {
			cpu.Softmax(float32s(buf), float32s(xs), outer, n, inner)
		} else {
			cpu.LogSoftmax(float32s(buf), float32s(xs), outer, n, inner)
		}
		c.flush(out, buf)
	}
	if c.recording() {
		r := &softmaxBackward{log: op == OpLogSoftmax, outer: outer, n: n, inner: inner}
		c.record(r, out)
		r.y = c.save(out)
	}
	return c.done(out)
}

type softmaxBackward struct {
	log             bool
	outer, n, inner int
	y               *autograd.Saved
}

func (r *softmaxBackward) backward(b *bwd) {
	g, y := b.g[0], b.saved(r.y)
	c := begin("softmax backward", g, y)
	dx := c.alloc(g.dt, g.shape)
	if c.computes(dx) {
		buf, gs, ys := c.denseOut(dx), c.dense(g), c.dense(y)
		if r.log {
			cpu.LogSoftmaxBackward(float32s(buf), float32s(gs), float32s(ys), r.outer, r.n, r.inner)
		} else {
			cpu.SoftmaxBackward(float32s(buf), float32s(gs), float32s(ys), r.outer, r.n, r.inner)
		}
		c.flush(dx, buf)
	}
	b.set(0, c.done(dx))
}
