package tensor

import (
	"fmt"

	"github.com/subletml/sublet/autograd"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
)

// Op names of the binary cross-entropy losses.
const (
	OpBinaryCrossEntropy           = "BinaryCrossEntropy"
	OpBinaryCrossEntropyWithLogits = "BinaryCrossEntropyWithLogits"
)

// Reduction says how a loss reduces its per-element values (PyTorch's reduction=).
type Reduction uint8

const (
	// ReduceMean averages over every element: a scalar (the default).
	ReduceMean Reduction = iota
	// ReduceSum sums over every element: a scalar.
	ReduceSum
	// ReduceNone keeps one loss per element, in the input's shape.
	ReduceNone
)

func (r Reduction) String() string {
	switch r {
	case ReduceMean:
		return "mean"
	case ReduceSum:
		return "sum"
	case ReduceNone:
		return "none"
	}
	return fmt.Sprintf("Reduction(%d)", uint8(r))
}

// BCEOptions are the optional arguments of the binary cross-entropy losses. The zero
// value is PyTorch's default: no weights, the mean.
type BCEOptions struct {
	// Weight rescales each element's loss (broadcast to the input's shape); nil: none.
	// It is a factor of a Mul after the loss (which saves it, as PyTorch's loss does).
	Weight *Tensor
	// PosWeight weights the positive term of BinaryCrossEntropyWithLogits (broadcast to
	// the input's shape: one per class along the last axis, say); nil: none. It gets no
	// gradient.
	PosWeight *Tensor
	// Reduction reduces the per-element losses.
	Reduction Reduction
}

// BinaryCrossEntropy returns the binary cross-entropy of probabilities x against
// targets of x's shape, −w·(target·ln x + (1−target)·ln(1−x)) per element with each
// logarithm clamped at −100 (torch.nn.functional.binary_cross_entropy), reduced as o
// says. An x outside [0, 1] is an error wrapping a *kernels.RangeError. Gradients flow
// to x and to the target. It saves x and the target (and the weight, in its Mul).
//
// Autocast refuses it, as PyTorch does: σ then BinaryCrossEntropy in 16 bits loses
// what BinaryCrossEntropyWithLogits, which autocast runs in F32, keeps.
func BinaryCrossEntropy(x, target *Tensor, o BCEOptions) *Tensor {
	if o.PosWeight != nil {
		fail(OpBinaryCrossEntropy, ErrShape, []*Tensor{x, target, o.PosWeight},
			"PosWeight is an option of BinaryCrossEntropyWithLogits; BinaryCrossEntropy takes Weight only")
	}
	o.check(OpBinaryCrossEntropy, x)
	return o.reduce(bce(opBinaryCrossEntropy, x, target, nil))
}

// BinaryCrossEntropyWithLogits returns the binary cross-entropy of σ(x) against
// targets of x's shape, computed from the logits x in a stable form:
// w·((1−target)·x − (1+(p−1)·target)·ln σ(x)) per element, p the positive weight
// (torch.nn.functional.binary_cross_entropy_with_logits), reduced as o says. Gradients
// flow to x and to the target. It saves x, the target and the positive weight (and
// the weight, in its Mul). Autocast runs it in F32.
func BinaryCrossEntropyWithLogits(x, target *Tensor, o BCEOptions) *Tensor {
	o.check(OpBinaryCrossEntropyWithLogits, x)
	return o.reduce(bce(opBinaryCrossEntropyWithLogits, x, target, o.PosWeight))
}

// check refuses, before op computes anything on input x, a reduction that is none
// and a weight that does not broadcast to x's shape (the per-element losses' shape).
func (o BCEOptions) check(op string, x *Tensor) {
	x.live(op)
	if o.Reduction > ReduceNone {
		fail(op, ErrShape, []*Tensor{x}, "unknown %v; use ReduceMean, ReduceSum or ReduceNone", o.Reduction)
	}
	if w := o.Weight; w != nil {
		w.live(op)
		if !broadcastsTo(w.shape, x.shape) {
			fail(op, ErrShape, []*Tensor{x, w}, "the weight's shape %v does not broadcast to the input's %v", w.shape, x.shape)
		}
	}
}

// reduce weights the per-element losses l and reduces them. The intermediate handles
// are released, also when one of the ops fails (the graph keeps what it needs).
func (o BCEOptions) reduce(l *Tensor) (r *Tensor) {
	temps := []*Tensor{l}
	defer func() {
		for _, t := range temps {
			if t != r {
				t.Release()
			}
		}
	}()
	if w := o.Weight; w != nil {
		l = l.Mul(w)
		temps = append(temps, l)
	}
	switch o.Reduction {
	case ReduceMean:
		return l.Mean()
	case ReduceSum:
		return l.Sum()
	}
	return l
}

// bce is the elementwise loss of op on x and y (and the positive weight pw, nil for
// none): one loss per element.
func bce(op *OpInfo, x, y, pw *Tensor) *Tensor {
	in := []*Tensor{x, y}
	if pw != nil {
		in = append(in, pw)
	}
	c := begin(op.Name, in...)
	c.floatOnly()
	x, y = c.in[0], c.in[1]
	dt := dtype.Promote(x.dt, y.dt)
	if pw != nil {
		pw = c.in[2]
		dt = dtype.Promote(dt, pw.dt)
		if !broadcastsTo(pw.shape, x.shape) {
			c.bad(ErrShape, "the positive weight's shape %v does not broadcast to the input's %v", pw.shape, x.shape)
		}
	}
	if !sameShape(x.shape, y.shape) {
		c.bad(ErrShape, "the target's shape %v differs from the input's %v; give them one shape", y.shape, x.shape)
	}
	out := c.alloc(dt, x.shape)
	logits := op == opBinaryCrossEntropyWithLogits
	if c.recording() { // before computing, as it saves only inputs
		if pw != nil && pw.requiresGrad {
			c.bad(ErrGrad, "the positive weight requires grad; the op computes no gradient for it (Detach it)")
		}
		r := recordRule(c, bceBackward{logits: logits}, out)
		r.x, r.y = c.save(x), c.save(y)
		if pw != nil {
			r.pw = c.save(pw)
		}
	}
	if logits {
		c.k.BinaryCrossEntropyWithLogits(out.operand(), x.operand(), y.operand(), pw.operand())
	} else if err := c.k.BinaryCrossEntropy(out.operand(), x.operand(), y.operand()); err != nil {
		c.bad(err, "the input holds values that are no probabilities; pass logits to BinaryCrossEntropyWithLogits instead of their sigmoid")
	}
	return c.done(out)
}

// bceBackward is the rule of both losses: the kernel's derivative for the input (ArgA)
// and the target (ArgB), in the output's shape.
type bceBackward struct {
	logits   bool
	x, y, pw *autograd.Saved // pw nil without a positive weight
}

func (r *bceBackward) backward(b *bwd) {
	g, x, y := b.g, b.saved(r.x), b.saved(r.y)
	ins := []*Tensor{x, y}
	var pw *Tensor
	if r.pw != nil {
		pw = b.saved(r.pw)
		ins = append(ins, pw)
	}
	name := backwardName(b.f.name)
	for i, wrt := range []kernels.Arg{kernels.ArgA, kernels.ArgB} {
		if !b.needs(i) {
			continue
		}
		b.set(i, gradKernel(name, g, ins, func(k kernels.Backend, dst kernels.Operand) {
			if r.logits {
				k.BinaryCrossEntropyWithLogitsBackward(wrt, dst, g.operand(), x.operand(), y.operand(), pw.operand())
				return
			}
			k.BinaryCrossEntropyBackward(wrt, dst, g.operand(), x.operand(), y.operand())
		}))
	}
}
