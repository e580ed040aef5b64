package tensor

import (
	"fmt"
	"sync"

	"github.com/subletml/sublet/autograd"
	"github.com/subletml/sublet/dtype"
)

// gradCell holds the gradient of a leaf that requires grad, or the retained gradient
// of a non-leaf. The handle that made it (ownsCell) releases it; handles Bind made
// share it.
type gradCell struct {
	// Set at creation, never changed: the gradient's shape and type.
	shape []int
	dt    dtype.DType

	mu   sync.Mutex
	grad *Tensor        // guarded by mu; an unowned handle, nil until a backward reaches it; reported leaked with its owner's (handle.cell)
	acc  *autograd.Node // guarded by mu; a leaf's accumulator, made on first use; the cell holds one reference
	dead bool           // guarded by mu; the owner was released: gradients are dropped
}

func newCell(t *Tensor) *gradCell { return &gradCell{shape: t.shape, dt: t.dt} }

// accumulator returns the leaf's AccumulateGrad node, making it on first use.
func (c *gradCell) accumulator() (*autograd.Node, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.acc == nil {
		n, err := autograd.NewNode(autograd.NodeSpec{Name: "AccumulateGrad", Kind: autograd.KindAccumulate,
			Outputs: 1, Fn: accumulate{c}})
		if err != nil {
			return nil, err
		}
		c.acc = n
	}
	return c.acc, nil
}

// kill drops the gradient and the accumulator; later gradients are dropped.
func (c *gradCell) kill() {
	c.mu.Lock()
	g, acc := c.grad, c.acc
	c.grad, c.acc, c.dead = nil, nil, true
	c.mu.Unlock()
	g.Release()
	if acc != nil {
		if err := acc.Release(); err != nil {
			panic(fmt.Sprintf("tensor: internal error: releasing an accumulator: %v", err))
		}
	}
}

// add folds g (borrowed) into the cell: the first gradient is taken (when steal is set,
// nothing else holds its storage and it is laid out as the leaf is: took is then set
// and the cell owns g) or copied; later ones are added in place, so the gradient
// keeps its identity.
func (c *gradCell) add(g *Tensor, steal bool) (took bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead {
		return false
	}
	if c.grad != nil && c.grad.Released() {
		c.grad = nil // released by its user: as if set to none
	}
	if c.grad == nil {
		// The gradient is reported leaked with the handle that owns the cell
		// (reportLeak), not watched on its own: it is unreachable exactly when the cell
		// is.
		if steal && g.soleOwner() && g.dt == c.dt && sameShape(g.shape, c.shape) {
			c.grad = g
			g.h.at = here()
			return true
		}
		s := newInternalScope()
		defer s.Close()
		x := s.Bind(g)
		if x.dt == c.dt {
			x = x.Clone()
		} else {
			x = x.Cast(c.dt) // a copy already
		}
		c.grad = s.handOver(x)
		c.grad.h.at = here()
		return false
	}
	addInPlace("AccumulateGrad", c.grad, g)
	return false
}

// addInPlace adds src into dst elementwise (src broadcasts to dst).
func addInPlace(op string, dst, src *Tensor) {
	ins := []*Tensor{dst, src}
	if !broadcastsTo(src.shape, dst.shape) {
		fail(op, ErrShape, ins, "cannot add in place")
	}
	if src.st.dev != dst.st.dev {
		fail(op, ErrDevice, ins, "a gradient on %s for a tensor on %s", src.st.dev.Name(), dst.st.dev.Name())
	}
	kernelsFor(op, dst.st.dev, ins).Axpy(dst.operand(), 1, src.operand())
	dst.st.BumpVersion()
}

// accumulate is a leaf's AccumulateGrad rule.
type accumulate struct{ c *gradCell }

// Backward folds the leaf's incoming gradient into its cell.
func (a accumulate) Backward(_ *autograd.Ctx, grads []autograd.Value) ([]autograd.Value, error) {
	return nil, Try(func() {
		if a.c.add(grads[0].(*Tensor), true) {
			grads[0] = nil // the cell took it
		}
	})
}

// SetRequiresGrad makes a leaf require gradients (or not): backward then accumulates
// its gradient, read with Grad. It returns t. Only leaves take it: the output of a
// recorded op requires grad by construction; Detach it first.
func (t *Tensor) SetRequiresGrad(on bool) *Tensor {
	t.live("SetRequiresGrad")
	if t.node != nil {
		fail("SetRequiresGrad", ErrGrad, []*Tensor{t}, "only leaves take it; this is the output of %s (Detach it)", t.node.Name())
	}
	if !t.dt.IsFloat() && on {
		fail("SetRequiresGrad", ErrDType, []*Tensor{t}, "only floating tensors can require gradients")
	}
	if t.st.inference && on {
		fail("SetRequiresGrad", ErrGrad, []*Tensor{t}, "Setting requires_grad=True on inference tensor outside InferenceMode is not allowed "+
			"(it was made in inference mode; Clone it outside inference mode)")
	}
	if on == t.requiresGrad {
		return t
	}
	if !on {
		if !t.h.ownsCell {
			fail("SetRequiresGrad", ErrGrad, []*Tensor{t}, "a bound handle cannot change its leaf; use the leaf's own handle")
		}
		t.h.cell.kill()
		t.h.cell, t.h.ownsCell, t.requiresGrad = nil, false, false
		return t
	}
	t.h.cell, t.h.ownsCell, t.requiresGrad = newCell(t), true, true
	return t
}

// AsParameter makes t, a leaf, a parameter: it leaves its scope (the caller, a module,
// owns it and releases it) and requires grad. It returns t.
func (t *Tensor) AsParameter() *Tensor {
	t.live("AsParameter")
	if t.node != nil {
		fail("AsParameter", ErrGrad, []*Tensor{t}, "a parameter is a leaf; this is the output of %s (compute it under NoGrad, or Detach it)", t.node.Name())
	}
	if s := t.scope; s != nil {
		s.forget(t)
		watch(t)
	}
	return t.SetRequiresGrad(true)
}

// Grad returns the gradient accumulated so far (nil if none): a leaf's, or a retained
// one (RetainGrad). The leaf owns it and it stays valid until ZeroGrad or the leaf's
// release; later backwards add into it in place. Releasing it is ZeroGrad(true).
func (t *Tensor) Grad() *Tensor {
	t.live("Grad")
	if t.h.cell == nil {
		return nil
	}
	t.h.cell.mu.Lock()
	defer t.h.cell.mu.Unlock()
	if t.h.cell.grad != nil && t.h.cell.grad.Released() {
		t.h.cell.grad = nil
	}
	return t.h.cell.grad
}

// ZeroGrad drops the gradient (setToNone: its memory returns to the allocator and the
// next backward steals a fresh one) or sets it to zero in place.
func (t *Tensor) ZeroGrad(setToNone bool) {
	t.live("ZeroGrad")
	if t.h.cell == nil {
		return
	}
	t.h.cell.mu.Lock()
	g := t.h.cell.grad
	if setToNone {
		t.h.cell.grad = nil
	}
	t.h.cell.mu.Unlock()
	if g == nil {
		return
	}
	if setToNone {
		g.Release()
		return
	}
	g.Fill(0)
}

// RetainGrad keeps the gradient of a non-leaf that requires grad, read with Grad after
// backward (a leaf's is kept anyway). It costs a copy of the gradient per backward.
func (t *Tensor) RetainGrad() {
	t.live("RetainGrad")
	if !t.requiresGrad {
		fail("RetainGrad", ErrGrad, []*Tensor{t}, "the tensor does not require grad")
	}
	if t.h.cell != nil {
		return
	}
	c := newCell(t)
	if err := t.node.AddGradHook(0, func(g autograd.Value) (autograd.Value, error) {
		return nil, Try(func() { c.add(g.(*Tensor), false) })
	}); err != nil {
		fail("RetainGrad", gradErr(err), []*Tensor{t}, "")
	}
	t.h.cell, t.h.ownsCell = c, true
}

// RegisterHook adds f to the hooks that see t's gradient (summed over its uses) during
// backward, before it flows on. f runs in a fresh no-grad scope s with g bound into it;
// it returns nil to keep g, or a replacement of g's shape and type (computed in s).
// On a leaf it sees the gradient before it is accumulated.
func (t *Tensor) RegisterHook(f func(s *Scope, g *Tensor) *Tensor) {
	t.live("RegisterHook")
	if !t.requiresGrad {
		fail("RegisterHook", ErrGrad, []*Tensor{t}, "the tensor does not require grad")
	}
	e, err := t.edge()
	if err == nil {
		err = e.Node.AddGradHook(e.Slot, func(v autograd.Value) (autograd.Value, error) {
			var out autograd.Value
			err := Try(func() {
				s := newInternalScope()
				defer s.Close()
				g := s.Bind(v.(*Tensor))
				r := f(s, g)
				if r == nil || r == g {
					return
				}
				r.live("RegisterHook")
				if r.dt != g.dt || !sameShape(r.shape, g.shape) {
					fail("RegisterHook", ErrShape, []*Tensor{g, r}, "a hook must return a gradient of the shape and type it got")
				}
				if r.scope != s {
					r = s.Bind(r)
				}
				out = s.handOver(r)
			})
			return out, err
		})
	}
	if err != nil {
		fail("RegisterHook", gradErr(err), []*Tensor{t}, "")
	}
}

// RegisterPostAccumulateHook adds f to run after a backward folded a gradient into the
// leaf t (the gradient is then t.Grad()): an optimizer can step and drop the gradient
// right there.
func (t *Tensor) RegisterPostAccumulateHook(f func()) {
	t.live("RegisterPostAccumulateHook")
	if t.node != nil || t.h.cell == nil {
		fail("RegisterPostAccumulateHook", ErrGrad, []*Tensor{t}, "only a leaf that requires grad has an accumulator")
	}
	acc, err := t.h.cell.accumulator()
	if err == nil {
		err = acc.AddPostHook(func(*autograd.Node) error { return Try(f) })
	}
	if err != nil {
		fail("RegisterPostAccumulateHook", gradErr(err), []*Tensor{t}, "")
	}
}
