package tensor

import (
	"github.com/subletml/sublet/autograd"
	"github.com/subletml/sublet/kernels"
)

// Neg returns -t.
func (t *Tensor) Neg() *Tensor { return unaryOp(opNeg, t) }

// Abs returns |t| (gradient 0 at 0).
func (t *Tensor) Abs() *Tensor { return unaryOp(opAbs, t) }

// Exp returns e^t.
func (t *Tensor) Exp() *Tensor { return unaryOp(opExp, t) }

// Log returns ln t.
func (t *Tensor) Log() *Tensor { return unaryOp(opLog, t) }

// Sqrt returns √t.
func (t *Tensor) Sqrt() *Tensor { return unaryOp(opSqrt, t) }

// Tanh returns tanh t.
func (t *Tensor) Tanh() *Tensor { return unaryOp(opTanh, t) }

// Sigmoid returns 1/(1+e^-t).
func (t *Tensor) Sigmoid() *Tensor { return unaryOp(opSigmoid, t) }

// Relu returns max(t, 0) (gradient 0 at 0).
func (t *Tensor) Relu() *Tensor { return unaryOp(opRelu, t) }

// Gelu returns x/2·(1+erf(x/√2)), PyTorch's default GELU.
func (t *Tensor) Gelu() *Tensor { return unaryOp(opGelu, t) }

// GeluTanh returns the tanh approximation x/2·(1+tanh(√(2/π)(x+0.044715x³))).
func (t *Tensor) GeluTanh() *Tensor { return unaryOp(opGeluTanh, t) }

func unaryOp(op *OpInfo, t *Tensor) *Tensor {
	k := op.unary
	c := begin(op.Name, t)
	c.floatOnly()
	x := c.in[0]
	out := c.alloc(x.dt, x.shape)
	if d, s, ok := c.hostF32(out, x); ok {
		d.UnaryF32(k, s[0], s[1])
	} else {
		c.k.Unary(k, out.operand(), x.operand())
	}
	if c.recording() {
		r := recordRule(c, unaryBackward{k: k}, out)
		// Each op saves what its derivative reads: the output for exp, tanh, sigmoid,
		// relu and sqrt, the input for the others, nothing for neg.
		switch {
		case k == kernels.Neg:
		case k.SavesOutput():
			r.saved = c.save(out)
		default:
			r.saved = c.save(x)
		}
	}
	return c.done(out)
}

type unaryBackward struct {
	k     kernels.UnaryOp
	saved *autograd.Saved // the input or the output (k.SavesOutput); nil for Neg
}

func (r *unaryBackward) backward(b *bwd) {
	g := b.g
	var room [1]*Tensor
	ins := room[:0]
	var sv *Tensor
	if r.saved != nil {
		sv = b.saved(r.saved)
		ins = append(ins, sv)
	}
	b.set(0, gradKernel(backwardName(r.k.String()), g, ins, func(k kernels.Backend, dst kernels.Operand) {
		k.UnaryBackward(r.k, dst, g.operand(), sv.operand())
	}))
}
