package tensor

import (
	"slices"

	"github.com/subletml/sublet/autograd"
	"github.com/subletml/sublet/dtype"
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
	// Inputs, when not empty, restricts the backward to these tensors (PyTorch's
	// backward(inputs=)): only their gradients are accumulated (a non-leaf among them
	// retains its gradient from then on, as RetainGrad does), and only the ops that
	// lead to them run; the others keep what they saved. As in PyTorch, the op that
	// made a non-leaf input runs too (its gradient goes nowhere) and releases what it
	// saved.
	Inputs []*Tensor
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
	var edges []autograd.Edge
	for i, x := range o.Inputs {
		e := gradInput(op, i, x)
		if x.node != nil {
			x.RetainGrad()
		}
		edges = append(edges, e)
	}
	root := rootOf(op, 0, t, o.Grad)
	opts := autograd.Options{Arith: arith{}, RetainGraph: o.RetainGraph, Inputs: edges}
	if t.scope != nil {
		opts.DetectAnomaly = resultScope(op, []*Tensor{t}).m.anomaly
	}
	if err := autograd.Backward([]autograd.Root{root}, opts); err != nil {
		fail(op, gradErr(err), []*Tensor{t}, "")
	}
	if t.scope != nil {
		t.scope.endStep()
	}
}

// rootOf is the root of a backward from output i, t, seeded with grad (nil: 1, for a
// tensor of one element); t is live and requires grad.
func rootOf(op string, i int, t *Tensor, grad *Tensor) autograd.Root {
	var seed *Tensor
	if grad == nil {
		if t.Numel() != 1 {
			fail(op, ErrShape, []*Tensor{t}, "grad can be implicitly created only for scalar outputs; output %d has %d elements, give its gradient", i, t.Numel())
		}
		r := internalRoots.Get().(*internalRoot)
		r.init(true)
		seed = r.s.handOver(r.s.Full(t.st.dev, t.dt, 1, t.shape...))
		r.s.Close()
		internalRoots.Put(r)
	} else {
		grad.live(op)
		if grad.dt != t.dt || !sameShape(grad.shape, t.shape) || grad.st.dev != t.st.dev {
			fail(op, ErrShape, []*Tensor{t, grad}, "the gradient of output %d must have its shape, type and device", i)
		}
		seed = grad.share(nil)
	}
	e, err := t.edge()
	if err != nil {
		seed.Release()
		fail(op, gradErr(err), []*Tensor{t}, "")
	}
	return autograd.Root{Edge: e, Grad: seed}
}

// gradInput is the edge of input i, x, of a backward restricted to inputs.
func gradInput(op string, i int, x *Tensor) autograd.Edge {
	x.live(op)
	if !x.requiresGrad {
		fail(op, ErrGrad, []*Tensor{x}, "input %d does not require grad; one of the differentiated tensors must", i)
	}
	e, err := x.edge()
	if err != nil {
		fail(op, gradErr(err), []*Tensor{x}, "input %d", i)
	}
	return e
}

// GradOptions configure Grad.
type GradOptions struct {
	// GradOutputs are the gradients of the outputs, one per output (each of its
	// output's shape, type and device; only read); nil, or a nil entry, means 1 for an
	// output of one element.
	GradOutputs []*Tensor
	// RetainGraph keeps the saved tensors of the ops that ran, as for Backward.
	RetainGraph bool
	// AllowUnused gives nil for an input the outputs do not depend on, instead of
	// failing; MaterializeGrads gives zeros of its shape and type instead of nil.
	AllowUnused, MaterializeGrads bool
}

// Grad returns the gradients of the sum of outputs (each weighted by its
// GradOutputs entry) with respect to inputs, without accumulating them into any
// gradient (torch.autograd.grad): leaves' gradients are left as they are, only the
// ops that lead to an input run, and a non-leaf input stops the backward there.
// Unless o.RetainGraph, the ops that ran release what they saved, as Backward does.
// The gradients (of each input's shape and type) belong to the innermost scope of the
// outputs and inputs. An input the outputs do not depend on is an error unless
// o.AllowUnused (nil) or o.MaterializeGrads (zeros). The backward runs in the first
// output's scope's anomaly mode; its rules record nothing (there is no create_graph).
func Grad(outputs, inputs []*Tensor, o GradOptions) []*Tensor {
	const op = "Grad"
	switch {
	case len(outputs) == 0 || len(inputs) == 0:
		fail(op, ErrGrad, nil, "%d outputs and %d inputs: give at least one of each", len(outputs), len(inputs))
	case o.GradOutputs != nil && len(o.GradOutputs) != len(outputs):
		fail(op, ErrShape, outputs, "%d gradients for %d outputs", len(o.GradOutputs), len(outputs))
	}
	for i, t := range outputs {
		t.live(op)
		if !t.requiresGrad {
			fail(op, ErrGrad, []*Tensor{t}, "output %d does not require grad and has no grad_fn", i)
		}
	}
	s := resultScope(op, append(slices.Clone(outputs), inputs...))
	// One edge per distinct input; inputs that share an edge share its gradient.
	first := make(map[autograd.Edge]int, len(inputs))
	var edges []autograd.Edge
	slot := make([]int, len(inputs))
	for i, x := range inputs {
		e := gradInput(op, i, x)
		k, ok := first[e]
		if !ok {
			k = len(edges)
			first[e] = k
			edges = append(edges, e)
		}
		slot[i] = k
	}
	roots := make([]autograd.Root, 0, len(outputs))
	defer func() {
		if r := recover(); r != nil {
			for _, root := range roots {
				root.Grad.Release()
			}
			panic(r)
		}
	}()
	for i, t := range outputs {
		var g *Tensor
		if o.GradOutputs != nil {
			g = o.GradOutputs[i]
		}
		roots = append(roots, rootOf(op, i, t, g))
	}
	opts := autograd.Options{Arith: arith{}, RetainGraph: o.RetainGraph}
	if sc := outputs[0].scope; sc != nil {
		opts.DetectAnomaly = resultScope(op, outputs[:1]).m.anomaly
	}
	vs, err := autograd.Grad(roots, edges, opts)
	roots = nil // the engine owns the seeds
	if err != nil {
		fail(op, gradErr(err), outputs, "")
	}
	// The engine's gradients are the call's: s owns handles of its own to them (an
	// engine value may share its allocation with its storage, which no scope may own),
	// and a failure below (an unused input, no memory for zeros) releases those too.
	out := make([]*Tensor, len(inputs))
	handed := false
	defer func() {
		for _, v := range vs {
			if v != nil {
				v.Release()
			}
		}
		if handed {
			return
		}
		for _, t := range out {
			t.Release()
		}
	}()
	for i, x := range inputs {
		if vs[slot[i]] == nil && !o.AllowUnused && !o.MaterializeGrads {
			fail(op, ErrGrad, []*Tensor{x}, "input %d appears not to have been used in the graph; set AllowUnused if this is wanted", i)
		}
	}
	for i, x := range inputs {
		k := slot[i]
		switch {
		case vs[k] == nil && o.MaterializeGrads:
			out[i] = s.Zeros(x.st.dev, x.dt, x.shape...)
		case vs[k] == nil:
		default: // the same input again gets another handle to its gradient
			out[i] = vs[k].(*Tensor).share(nil)
			s.adopt(out[i])
		}
	}
	handed = true
	return out
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
		if ok && x.soleOwner() && sameShape(shape, x.shape) && dtype.Promote(x.dt, y.dt) == x.dt {
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
	if err := notCapturing(t.st.dev, "anomaly mode's check for NaN and Inf, which reads the answer back"); err != nil {
		return false, err
	}
	err = Try(func() { found = kernelsFor("HasNonFinite", t.st.dev, []*Tensor{t}).NonFinite(t.operand()) })
	return found, err
}
