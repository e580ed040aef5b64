package tensor

import (
	"slices"

	"github.com/subletml/sublet/kernels"
)

// OpCache is an optional interface of the saved-tensor hooks of a scope
// (WithSavedHooks): selective activation checkpointing. The ops of the scope that a
// cache can answer (those of the op table that save nothing they compute besides
// their result: every op but those with SavesExtra; views, factories and the casts
// autocast makes for an op are never asked) tell it each result they computed (Ran), and ask it first whether to reuse a
// result instead (Result). A reused result is copied into the op's own result as
// soon as the op allocates it, and the op records its node and saves what it saves as
// if it had computed it, so a recomputation saves what the forward saved; only its
// kernels do not run.
type OpCache interface {
	// Result is asked before op runs on in: nil to compute, or a tensor of the
	// result's shape and type that the op takes (and releases) and copies into its
	// result. An error fails the op with it.
	Result(op string, in []*Tensor) (*Tensor, error)
	// Ran is told the result of every op that computed it; out stays the op's (take
	// a reference with a Bind or a Detach to keep it).
	Ran(op string, in []*Tensor, out *Tensor)
}

// cacheable reports whether an OpCache may answer op.
func cacheable(op string) bool {
	o, ok := opByName[op]
	return ok && !o.SavesExtra
}

// lookup asks the scope's OpCache, if it has one, for the op's result; when it gives
// one the op computes nothing (the meta kernels) and done copies it in. It runs once
// the op's inputs are final, after the casts autocast made (which the cache does not
// see: they are part of the op), and the op runs no other op inside, so a cache sees
// ops start in the order they finish.
func (c *call) lookup() {
	oc, ok := c.s.m.hooks.(OpCache)
	if !ok || len(c.in) == 0 || !cacheable(c.op) {
		return
	}
	t, err := oc.Result(c.op, slices.Clone(c.in))
	if err != nil {
		c.bad(err, "the saved-tensor hooks' op cache")
	}
	if t != nil {
		c.cached, c.answered, c.k = t, true, kernels.Meta()
	}
}

// fromCache fills t, the op's newest allocation, with the cached result if it is the
// result's (the first allocation of its shape and type): before the op records and
// saves, as it would after computing.
func (c *call) fromCache(t *Tensor) {
	r := c.cached
	if r == nil || r.dt != t.dt || !sameShape(r.shape, t.shape) || r.st.dev != t.st.dev {
		return
	}
	c.cached = nil
	defer r.Release()
	kernelsFor(c.op, c.dev, c.in).Copy(t.operand(), r.operand())
}

// finishCache tells the scope's OpCache the result the op computed, or checks that a
// cached one was used.
func (c *call) finishCache(out *Tensor) {
	if c.answered {
		if r := c.cached; r != nil {
			c.cached = nil
			r.Release()
			if out != nil && !c.isInputView(out) {
				c.bad(ErrShape, "the op cache gave %v %v for a result of %v %v", r.shape, r.dt, out.shape, out.dt)
			}
		}
		return
	}
	if c.k == nil || c.partOf || out == nil || len(c.in) == 0 {
		return
	}
	if oc, ok := c.s.m.hooks.(OpCache); ok && cacheable(c.op) {
		oc.Ran(c.op, slices.Clone(c.in), out)
	}
}

// isInputView reports whether out shares an input's storage (Cast to the input's own
// type makes a view).
func (c *call) isInputView(out *Tensor) bool {
	for _, t := range c.in {
		if t.st == out.st {
			return true
		}
	}
	return false
}
