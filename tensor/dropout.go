package tensor

import (
	"github.com/subletml/sublet/autograd"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
)

// Dropout zeroes each element of t with probability p and scales the others by
// 1/(1-p). The mask is Philox4x32-10 keyed by one 64-bit draw from the scope's
// generator (save and restore its state to draw the same mask again), so it is the same
// on every device for the same generator state. It saves the mask (one byte per
// element). Training mode is the caller's: in evaluation, do not call it.
func (t *Tensor) Dropout(p float64) *Tensor {
	c := begin(OpDropout, t)
	c.floatOnly()
	if !(p >= 0 && p < 1) {
		c.bad(ErrShape, "dropout probability %g outside [0, 1)", p)
	}
	gen := c.s.m.gen
	if gen == nil {
		c.bad(ErrScope, "%s", noGenerator)
	}
	if err := notCapturing(c.in[0].st.dev, "a draw from the host's generator (every replay would draw the same mask)"); err != nil {
		c.bad(err, "")
	}
	x := c.in[0]
	mask := c.alloc(dtype.Bool, x.shape)
	out := c.alloc(x.dt, x.shape)
	c.k.DropoutMask(mask.operand(), p, gen.Uint64())
	c.k.Dropout(out.operand(), x.operand(), mask.operand(), p)
	if c.recording() {
		r := recordRule(c, dropoutBackward{p: p}, out)
		r.mask = c.save(mask)
	}
	c.temp(mask)
	return c.done(out)
}

type dropoutBackward struct {
	p    float64
	mask *autograd.Saved
}

func (r *dropoutBackward) backward(b *bwd) {
	g, mask := b.g, b.saved(r.mask)
	b.set(0, gradKernel("dropout backward", g, []*Tensor{mask}, func(k kernels.Backend, dst kernels.Operand) {
		k.Dropout(dst, g.operand(), mask.operand(), r.p)
	}))
}
