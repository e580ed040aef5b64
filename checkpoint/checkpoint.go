package checkpoint

import (
	"errors"
	"fmt"

	"github.com/subletml/sublet/tensor"
)

// Func is a function of tensors that Checkpoint runs once in the forward and again,
// in part or whole, in each backward that needs what it saved. It takes handles owned
// by the scope it runs in and returns results computed there (or some of its inputs).
// Both runs must save the same tensors (count, shapes, dtypes, devices): no branches
// on data or on time, the same requires-grad flags. Randomness is fine when it comes
// from the scope's generator (restored for the recompute). A recompute ends early by
// failing the save of the last tensor it needs, which the op reports as a
// *tensor.Error: fn must let tensor errors through (no tensor.Try around its ops).
type Func func(in []*tensor.Tensor) []*tensor.Tensor

// Config tunes checkpointing. The zero value is PyTorch's default for
// torch.utils.checkpoint with use_reentrant=False.
type Config struct {
	// SkipRNGState does not save the scope's generator state in the forward nor
	// restore it for the recompute (preserve_rng_state=False): faster, and only right
	// when the function draws no random numbers.
	SkipRNGState bool
	// SkipDeterminismCheck does not compare what the recompute saves with what the
	// forward saved (determinism_check="none").
	SkipDeterminismCheck bool
	// NoEarlyStop runs the whole function on recompute instead of stopping once every
	// saved tensor is regenerated (set_checkpoint_early_stop(False)).
	NoEarlyStop bool
	// Policy, when set, makes the checkpoint selective (PyTorch's
	// create_selective_checkpoint_contexts): the results of the ops it says to Save
	// are kept from the forward, and the recomputation reuses them instead of
	// running those ops again; every other op is recomputed. See SaveOps.
	Policy Policy
}

// Decision is what a Policy says of an op (PyTorch's CheckpointPolicy, whose MUST_
// and PREFER_ forms differ only under a compiler).
type Decision uint8

const (
	// Recompute runs the op again in the recomputation (the default).
	Recompute Decision = iota
	// Save keeps the op's result from the forward for the recomputation.
	Save
)

// Policy decides, in the forward, whether the result of each op of the checkpointed
// function (named by the tensor.Op* constants; in are its inputs) is kept. It is
// asked only of the ops a result can be reused for: every op of tensor's op table
// but views, factories and those that save a statistic, mask or index they compute
// (LayerNorm, CrossEntropy, Dropout, Max: tensor.OpInfo.SavesExtra), which are
// always recomputed, as are the casts autocast makes for an op (which of them run
// depends on the weight-cast cache, gone when the backward comes after the region).
type Policy func(op string, in []*tensor.Tensor) Decision

// SaveOps is the policy that keeps the results of the ops named and recomputes the
// rest (create_selective_checkpoint_contexts with a list of ops): SaveOps(
// tensor.OpMatMul, tensor.OpLinear) keeps the products, which cost the most to
// recompute, and recomputes the cheap elementwise ops between them.
func SaveOps(ops ...string) Policy {
	keep := make(map[string]bool, len(ops))
	for _, op := range ops {
		keep[op] = true
	}
	return func(op string, _ []*tensor.Tensor) Decision {
		if keep[op] {
			return Save
		}
		return Recompute
	}
}

const opCheckpoint = "checkpoint.Checkpoint"

// Checkpoint runs fn on x with the zero Config, PyTorch's checkpoint(fn, x,
// use_reentrant=False): checkpoint.Checkpoint(block.Forward, x). See Config.Checkpoint.
func Checkpoint(fn func(x *tensor.Tensor) *tensor.Tensor, x *tensor.Tensor) *tensor.Tensor {
	return Config{}.Checkpoint(fn, x)
}

// CheckpointN runs fn on several tensors with the zero Config; see Config.CheckpointN.
func CheckpointN(fn Func, in ...*tensor.Tensor) []*tensor.Tensor {
	return Config{}.CheckpointN(fn, in...)
}

// Checkpoint is CheckpointN of a function of one tensor to one tensor.
func (c Config) Checkpoint(fn func(x *tensor.Tensor) *tensor.Tensor, x *tensor.Tensor) *tensor.Tensor {
	return c.CheckpointN(func(in []*tensor.Tensor) []*tensor.Tensor { return []*tensor.Tensor{fn(in[0])} }, x)[0]
}

// CheckpointN runs fn on in without keeping what its ops save for backward: the graph
// is recorded as usual, but every saved tensor is replaced by a placeholder and only
// the inputs are kept (see the package doc). The results belong where an op on the
// inputs puts them (tensor.ResultScope; at least one input needs a scope). In a scope
// that records no graph it just runs fn, in a child scope.
//
// It panics with a *tensor.Error when the inputs have no scope or fn returns a tensor
// not computed in its scope; fn's own panics go through, after the frame has released
// what it took.
func (c Config) CheckpointN(fn Func, in ...*tensor.Tensor) []*tensor.Tensor {
	out, _ := c.checkpoint(fn, in)
	return out
}

// checkpoint is CheckpointN, which also returns the call's frame (nil where the scope
// records no graph), for Sequential to have it keep the result (frame.keepResult).
func (c Config) checkpoint(fn Func, in []*tensor.Tensor) ([]*tensor.Tensor, *frame) {
	s := callScope(opCheckpoint, in)
	if !s.GradEnabled() {
		return runIn(opCheckpoint, s, nil, fn, in), nil
	}
	f := newFrame(c, fn, s, in)
	defer f.forwardDone()
	return runIn(opCheckpoint, s, f, fn, in), f
}

// callScope is the scope an op on in would run in (tensor.ResultScope), where the
// function's child scope opens.
func callScope(op string, in []*tensor.Tensor) *tensor.Scope {
	for _, t := range in {
		if t == nil {
			panic(&tensor.Error{Op: op, Msg: "nil input", Err: tensor.ErrShape})
		}
	}
	s, err := tensor.TryValue(func() *tensor.Scope { return tensor.ResultScope(in...) })
	if e := (*tensor.Error)(nil); errors.As(err, &e) {
		e.Op = op
		panic(e)
	}
	return s
}

// encloses reports whether outer is inner or one of its ancestors.
func encloses(outer, inner *tensor.Scope) bool {
	for s := inner; s != nil; s = s.Parent() {
		if s == outer {
			return true
		}
	}
	return false
}

// runIn runs fn in a child scope of s (with saved hooks h, when not nil) on handles to
// in bound there, and moves its results to s; the child, and every temporary of fn,
// is closed when it returns.
func runIn(op string, s *tensor.Scope, h *frame, fn Func, in []*tensor.Tensor) []*tensor.Tensor {
	var opts []tensor.Option
	if h != nil {
		opts = append(opts, tensor.WithSavedHooks(h))
	}
	c := s.Child(opts...)
	defer c.Close()
	bound := make([]*tensor.Tensor, len(in))
	for i, t := range in {
		bound[i] = c.Bind(t)
	}
	out := fn(bound)
	for i, y := range out {
		switch {
		case y == nil:
			panic(&tensor.Error{Op: op, Msg: fmt.Sprintf("the function returned nil as result %d", i), Err: tensor.ErrShape})
		case y.Released():
			panic(&tensor.Error{Op: op, Msg: fmt.Sprintf("the function returned a released tensor as result %d", i), Err: tensor.ErrReleased})
		case y.Scope() == c:
			c.Keep(y)
		case y.Scope() == nil || !encloses(y.Scope(), s):
			panic(&tensor.Error{Op: op, Msg: fmt.Sprintf("result %d of the function is not owned by its scope; "+
				"return tensors computed from its inputs", i), Err: tensor.ErrScope})
		}
	}
	return out
}
