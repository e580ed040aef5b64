package tensor

import (
	"github.com/subletml/sublet/autograd"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
)

// Op names of the fused multiply-add and divide-add.
const (
	OpAddcmul = "Addcmul"
	OpAddcdiv = "Addcdiv"
)

// Addcmul returns t + value·a·b elementwise, broadcasting the three (torch.addcmul),
// in one pass without temporaries; value is a constant of the type the op computes in
// (as AddScalar's). Recorded, it saves b when a wants a gradient and a when b does, as
// Mul does.
func (t *Tensor) Addcmul(a, b *Tensor, value float64) *Tensor {
	return addcOp(opAddcmul, t, a, b, value)
}

// Addcdiv returns t + value·a/b elementwise, broadcasting the three (torch.addcdiv),
// in one pass without temporaries; value is a constant as for Addcmul. Recorded, it
// saves b when a or b wants a gradient and a when b does, as Div does.
func (t *Tensor) Addcdiv(a, b *Tensor, value float64) *Tensor {
	return addcOp(opAddcdiv, t, a, b, value)
}

func addcOp(op *OpInfo, t, a, b *Tensor, value float64) *Tensor {
	c := begin(op.Name, t, a, b)
	c.floatOnly()
	x, p, q := c.in[0], c.in[1], c.in[2]
	shape, ok := broadcast(x.shape, p.shape)
	if ok {
		shape, ok = broadcast(shape, q.shape)
	}
	if !ok {
		c.bad(ErrShape, "shapes do not broadcast")
	}
	dt := dtype.Promote(dtype.Promote(x.dt, p.dt), q.dt)
	if why := badConstant(value, opType(dt)); why != "" {
		c.bad(ErrDType, "value: %s", why)
	}
	out := c.alloc(dt, shape)
	if c.recording() { // before computing, as it saves only inputs
		r := recordRule(c, addcBackward{k: op.binary, value: value}, out)
		if op.binary == kernels.Mul {
			r.a, r.b = c.saveCross(p, q)
		} else {
			if q.requiresGrad {
				r.a = c.save(p)
			}
			if p.requiresGrad || q.requiresGrad {
				r.b = c.save(q)
			}
		}
	}
	c.k.Addc(op.binary, out.operand(), x.operand(), p.operand(), q.operand(), value)
	return c.done(out)
}

// addcBackward passes g to t and value·g·∂(a∘b) to a and b (∘ is k), in the output's
// shape (bwd.set sums each to its input's shape).
type addcBackward struct {
	k     kernels.BinaryOp
	value float64
	a, b  *autograd.Saved // nil when no wanted gradient reads it
}

func (r *addcBackward) backward(b *bwd) {
	g := b.g
	if r.value != 1 && (b.needs(1) || b.needs(2)) {
		g = g.MulScalar(r.value)
	}
	p, q := b.saved(r.a), b.saved(r.b)
	for i, wrt := range []kernels.Arg{kernels.ArgA, kernels.ArgB} {
		if b.needs(i + 1) {
			b.set(i+1, binaryGrad(r.k, wrt, g, p, q))
		}
	}
	b.set(0, b.g) // last: set hands the handle over to the engine
}
