package tensor

import (
	"github.com/subletml/sublet/autograd"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
)

// Add returns a + b, broadcasting by numpy rules.
func (a *Tensor) Add(b *Tensor) *Tensor { return binaryOp(opAdd, a, b) }

// Sub returns a - b, broadcasting.
func (a *Tensor) Sub(b *Tensor) *Tensor { return binaryOp(opSub, a, b) }

// Mul returns a · b elementwise, broadcasting.
func (a *Tensor) Mul(b *Tensor) *Tensor { return binaryOp(opMul, a, b) }

// Div returns a / b elementwise, broadcasting.
func (a *Tensor) Div(b *Tensor) *Tensor { return binaryOp(opDiv, a, b) }

// Pow returns a^b elementwise, broadcasting.
func (a *Tensor) Pow(b *Tensor) *Tensor { return binaryOp(opPow, a, b) }

// Maximum returns max(a, b) elementwise, broadcasting (NaN if either is NaN; at ties
// each side gets half the gradient).
func (a *Tensor) Maximum(b *Tensor) *Tensor { return binaryOp(opMaximum, a, b) }

// Minimum returns min(a, b) elementwise, broadcasting.
func (a *Tensor) Minimum(b *Tensor) *Tensor { return binaryOp(opMinimum, a, b) }

// floatOnly panics unless every input of the call is floating.
func (c *call) floatOnly() {
	for _, t := range c.in {
		if !t.dt.IsFloat() {
			c.bad(ErrDType, "the op takes floating tensors; Cast the %v input first", t.dt)
		}
	}
}

func binaryOp(op *OpInfo, a, b *Tensor) *Tensor {
	k := op.binary
	c := begin(op.Name, a, b)
	x, y := c.in[0], c.in[1]
	// An integer operand promotes to the other's floating type (PyTorch's rule); two
	// integer operands have no floating result.
	dt := dtype.Promote(x.dt, y.dt)
	if !dt.IsFloat() {
		c.bad(ErrDType, "the op takes floating tensors (an integer one with a floating one); Cast the inputs first")
	}
	shape, ok := broadcast(x.shape, y.shape)
	if !ok {
		c.bad(ErrShape, "shapes do not broadcast")
	}
	out := c.alloc(dt, shape)
	if c.recording() { // before computing, as it saves only inputs
		r := recordRule(c, binaryBackward{k: k}, out)
		// Save only what the wanted gradients read (PyTorch's choice): Mul's gradient
		// for a reads b and the other way round, Div's for a reads b only.
		switch k {
		case kernels.Mul:
			r.a, r.b = c.saveCross(x, y)
		case kernels.Div:
			if y.requiresGrad {
				r.a = c.save(x)
			}
			r.b = c.save(y)
		case kernels.Pow, kernels.Maximum, kernels.Minimum:
			r.a, r.b = c.save(x), c.save(y)
		}
	}
	if d, s, ok := c.hostF32(out, x, y); ok {
		d.BinaryF32(k, s[0], s[1], s[2])
	} else {
		c.k.Binary(k, out.operand(), x.operand(), y.operand())
	}
	return c.done(out)
}

// binaryBackward is the rule of the elementwise binary ops: the kernel's derivative
// times g, in the output's shape (bwd.set sums it to each input's shape).
type binaryBackward struct {
	k    kernels.BinaryOp
	a, b *autograd.Saved // nil when no wanted gradient reads it
}

func (r *binaryBackward) backward(b *bwd) {
	g, x, y := b.g, b.saved(r.a), b.saved(r.b)
	for i, wrt := range []kernels.Arg{kernels.ArgA, kernels.ArgB} {
		if b.needs(i) {
			b.set(i, binaryGrad(r.k, wrt, g, x, y))
		}
	}
}

// binaryGrad computes g·∂k(a,b)/∂wrt in g's shape. a or b may be nil where the
// derivative does not read it.
func binaryGrad(k kernels.BinaryOp, wrt kernels.Arg, g, a, b *Tensor) *Tensor {
	var room [2]*Tensor
	ins := room[:0]
	for _, t := range [...]*Tensor{a, b} {
		if t != nil {
			ins = append(ins, t)
		}
	}
	return gradKernel(backwardName(k.String()), g, ins, func(kb kernels.Backend, dst kernels.Operand) {
		kb.BinaryBackward(k, wrt, dst, g.operand(), a.operand(), b.operand())
	})
}

// backwardName is the name of op's backward ("relu backward"): an elementwise op's
// from a table made once, so that its backward rule builds no string each time.
func backwardName(op string) string {
	if name, ok := backwardNames[op]; ok {
		return name
	}
	return op + " backward"
}

// backwardNames maps the names of the elementwise ops to their backward's. Made at
// start, never changed.
var backwardNames = func() map[string]string {
	m := map[string]string{}
	for k := kernels.UnaryOp(1); k.Valid(); k++ {
		m[k.String()] = k.String() + " backward"
	}
	for k := kernels.BinaryOp(1); k.Valid(); k++ {
		m[k.String()] = k.String() + " backward"
	}
	return m
}()

// gradKernel makes a tensor of g's shape, of the type g and ins promote to, and fills
// it with f on the op's kernels.
func gradKernel(op string, g *Tensor, ins []*Tensor, f func(k kernels.Backend, dst kernels.Operand)) *Tensor {
	var room [4]*Tensor
	c := begin(op, append(append(room[:0], g), ins...)...)
	dt := g.dt
	for _, t := range ins {
		dt = dtype.Promote(dt, t.dt)
	}
	out := c.alloc(dt, g.shape)
	f(c.k, out.operand())
	return c.done(out)
}

// AddScalar returns t + v.
func (t *Tensor) AddScalar(v float64) *Tensor {
	return scalarOp(opAddScalar, t, v, identityBackward{})
}

// MulScalar returns t · v.
func (t *Tensor) MulScalar(v float64) *Tensor {
	return scalarOp(opMulScalar, t, v, mulScalarBackward{v})
}

// PowScalar returns t^p elementwise.
func (t *Tensor) PowScalar(p float64) *Tensor {
	return scalarOp(opPowScalar, t, p, &powScalarBackward{p: p})
}

func scalarOp(op *OpInfo, t *Tensor, v float64, r rule) *Tensor {
	k := op.binary
	c := begin(op.Name, t)
	c.floatOnly()
	x := c.in[0]
	if why := badConstant(v, opType(x.dt)); why != "" {
		c.bad(ErrDType, "%s", why)
	}
	out := c.alloc(x.dt, x.shape)
	c.k.Binary(k, out.operand(), x.operand(), kernels.Scalar(v))
	if c.recording() {
		c.record(r, out)
		if p, ok := r.(*powScalarBackward); ok {
			p.x = c.save(x)
		}
	}
	return c.done(out)
}

type mulScalarBackward struct{ v float64 }

func (r mulScalarBackward) backward(b *bwd) { b.set(0, b.g.MulScalar(r.v)) }

type powScalarBackward struct {
	p float64
	x *autograd.Saved
}

func (r *powScalarBackward) backward(b *bwd) {
	g, x := b.g, b.saved(r.x)
	b.set(0, gradKernel("pow backward", g, []*Tensor{x}, func(k kernels.Backend, dst kernels.Operand) {
		k.BinaryBackward(kernels.Pow, kernels.ArgA, dst, g.operand(), x.operand(), kernels.Scalar(r.p))
	}))
}
