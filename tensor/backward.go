package tensor

import (
	"github.com/subletml/sublet/autograd"
)

// BackwardOptions configure BackwardWith.
type BackwardOptions struct {
	// Grad is the gradient of the tensor backward starts from (its shape and type);
	// nil means 1, for a tensor of one element (a loss). It is only read.
	Grad *Tensor
	// RetainGraph keeps every node's saved tensors, so backward can run through the
	// graph again; they are released with the graph (when the last handle to its
	// outputs is released).
	RetainGraph bool
}

// Backward computes the gradient of t (one element, a loss) with respect to every
// leaf that requires grad and accumulates it into the leaves' gradients. Each node's
// saved tensors are released as soon as its backward ran, so a second Backward through
// the same graph panics (autograd.ErrBackwardTwice) unless the first retained it. The
// backward runs in the anomaly mode of the scope an op on t would run in. It ends a
// step of t's scope and of the scopes enclosing it (see Leaks).
func (t *Tensor) Backward() { t.BackwardWith(BackwardOptions{}) }

// BackwardWith is Backward with options.
func (t *Tensor) BackwardWith(o BackwardOptions) {
	const op = "Backward"
	t.live(op)
	if !t.requiresGrad {
		fail(op, ErrGrad, []*Tensor{t}, "the tensor does not require grad and has no grad_fn "+
			"(it was computed under NoGrad, or from tensors that do not require grad)")
	}
	var seed *Tensor
	if o.Grad == nil {
		if t.Numel() != 1 {
			fail(op, ErrShape, []*Tensor{t}, "grad can be implicitly created only for scalar outputs; pass BackwardOptions.Grad")
		}
		s := newInternalScope()
		seed = s.handOver(s.Full(t.st.dev, t.dt, 1, t.shape...))
		s.Close()
	} else {
		o.Grad.live(op)
		if o.Grad.dt != t.dt || !sameShape(o.Grad.shape, t.shape) || o.Grad.st.dev != t.st.dev {
			fail(op, ErrShape, []*Tensor{t, o.Grad}, "the gradient must have the tensor's shape, type and device")
		}
		seed = o.Grad.share(nil)
	}
	e, err := t.edge()
	if err != nil {
		seed.Release()
		fail(op, gradErr(err), []*Tensor{t}, "")
	}
	opts := autograd.Options{Arith: arith{}, RetainGraph: o.RetainGraph}
	if t.scope != nil {
		opts.DetectAnomaly = resultScope(op, []*Tensor{t}).m.anomaly
	}
	if err := autograd.Backward([]autograd.Root{{Edge: e, Grad: seed}}, opts); err != nil {
		fail(op, gradErr(err), []*Tensor{t}, "")
	}
	if t.scope != nil {
		t.scope.endStep()
	}
}

// arith is the gradient arithmetic of the engine over unowned *Tensor handles.
type arith struct{}

// Add sums two gradients of one output: into a's storage when nothing else holds it
// and it covers the sum densely, into a new tensor otherwise.
func (arith) Add(a, b autograd.Value) (autograd.Value, error) {
	x, y := a.(*Tensor), b.(*Tensor)
	var out *Tensor
	err := Try(func() {
		shape, ok := broadcast(x.shape, y.shape)
		if ok && x.soleOwner() && sameShape(shape, x.shape) && promote(x.dt, y.dt) == x.dt {
			addInPlace("backward: summing gradients", x, y)
			out = x
			return
		}
		s := newInternalScope()
		defer s.Close()
		out = s.handOver(s.Bind(x).Add(s.Bind(y)))
	})
	if out != x {
		x.Release()
	}
	y.Release()
	if err != nil {
		if out != nil && out != x {
			out.Release()
		}
		return nil, err
	}
	return out, nil
}

// HasNonFinite reports whether v holds a NaN or an Inf (never, on a device without
// data). It synchronises with the device.
func (arith) HasNonFinite(v autograd.Value) (found bool, err error) {
	t := v.(*Tensor)
	if !t.dt.IsFloat() {
		return false, nil
	}
	err = Try(func() { found = kernelsFor("HasNonFinite", t.st.dev, []*Tensor{t}).NonFinite(t.operand()) })
	return found, err
}
