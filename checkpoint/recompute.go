package checkpoint

import (
	"errors"
	"fmt"
	"strings"

	"github.com/subletml/sublet/autograd"
	"github.com/subletml/sublet/tensor"
)

// ErrNondeterministic is wrapped by the errors of a recomputation that saved other
// tensors than the forward did (count, shape, dtype or device). A backward through the
// checkpoint fails with it (test with errors.Is).
var ErrNondeterministic = errors.New("the recomputation differs from the original forward")

// ErrExtraBackward is wrapped by the error of a backward through a selectively
// checkpointed function whose kept results an earlier backward used: the first
// recomputation hands each kept result to its op and lets it go, as PyTorch does, so
// such a function is backpropagated once (PyTorch's message).
var ErrExtraBackward = errors.New("trying to backward an extra time. You are only allowed to backward once " +
	"on any region computed under selective activation checkpoint")

// recomputation is one re-run of a frame's function: the saved hooks of its scope,
// handing the i-th tensor it saves to the frame's i-th holder. One goroutine (the
// backward's) uses it.
type recomputation struct {
	f          *frame
	last       int      // the last save a holder needs (lastNeeded), where the early stop comes
	n          int      // tensors saved so far
	ops        int      // ops asked for a kept result so far (tensor.OpCache.Result)
	mismatches []string // determinism check failures, by position
}

// stopped is the error Pack fails the save with to end the run: every saved tensor
// is regenerated (err nil: the early stop), or the recomputation already failed. The
// op that saved aborts (releasing what it made) and panics with a *tensor.Error
// wrapping it, which unwinds the function up to run.
type stopped struct {
	r   *recomputation
	err error
}

func (s *stopped) Error() string {
	if s.err != nil {
		return s.err.Error()
	}
	return "checkpoint: recomputation stopped early: every saved tensor was regenerated"
}

// recompute runs the function again on the inputs, in a recording scope with the
// forward's generator state and autocast policy, filling every live holder. The
// scope, and every tensor of the run but those handed to holders, is released before
// it returns. On error, or a panic of the function (which goes on unwinding), no
// holder keeps a recomputed tensor.
func (f *frame) recompute() (err error) {
	ins, release, err := f.recomputeInputs()
	if err != nil {
		return err
	}
	defer release()
	ok := false
	defer func() {
		if !ok {
			f.clear()
		}
	}()
	r := &recomputation{f: f, last: f.lastNeeded()}
	opts := []tensor.Option{tensor.WithSavedHooks(r), tensor.WithAutocast(f.autocast), tensor.WithAnomaly(f.anomaly)}
	if f.gen != nil {
		opts = append(opts, tensor.WithGenerator(f.gen))
	}
	if f.rngSaved {
		// fork_rng: the surrounding draws continue as if the recompute had drawn nothing.
		now := f.gen.State()
		f.gen.Restore(f.rng)
		defer f.gen.Restore(now)
	}
	rs := tensor.NewScope(opts...)
	defer rs.Close()
	bound := make([]*tensor.Tensor, len(ins))
	for i, t := range ins {
		bound[i] = rs.Bind(t)
		if f.inputs[i].requiresGrad {
			bound[i].SetRequiresGrad(true)
		}
	}
	early, err := r.run(bound)
	if err == nil && !early {
		err = r.check()
	}
	ok = err == nil
	return err
}

// recomputeInputs returns the inputs for a recompute and what releases the ones it
// had to unpack from the outer hooks.
func (f *frame) recomputeInputs() ([]*tensor.Tensor, func(), error) {
	ins := make([]*tensor.Tensor, len(f.inputs))
	var owned []autograd.Value
	release := func() {
		for _, v := range owned {
			v.Release()
		}
	}
	for i, in := range f.inputs {
		if f.outer == nil {
			t := in.kept.(*tensor.Tensor)
			if now := t.Version(); now != in.version {
				return nil, nil, fmt.Errorf("checkpoint: input %d %v was modified in place since the forward (version %d, now %d); "+
					"the recomputation would see other values. Do the in-place op on a copy, or after the backward",
					i, metaOf(t), in.version, now)
			}
			ins[i] = t
			continue
		}
		v, err := f.outer.Unpack(in.kept)
		if err != nil {
			release()
			return nil, nil, fmt.Errorf("checkpoint: getting input %d back from the enclosing saved-tensor hooks: %w", i, err)
		}
		owned = append(owned, v)
		t, ok := v.(*tensor.Tensor)
		if !ok {
			release()
			return nil, nil, fmt.Errorf("checkpoint: the enclosing saved-tensor hooks returned %T for input %d; want *tensor.Tensor", v, i)
		}
		ins[i] = t
	}
	return ins, release, nil
}

// run calls the function, turning its stop back into a return: early when the stop
// was the early one (err nil) or the determinism check's.
func (r *recomputation) run(in []*tensor.Tensor) (early bool, err error) {
	defer func() {
		if p := recover(); p != nil {
			var s *stopped
			if e, ok := p.(*tensor.Error); !ok || !errors.As(e, &s) || s.r != r {
				panic(p)
			}
			early, err = true, s.err
		}
	}()
	r.f.fn(in)
	return false, nil
}

// checkMeta reports the determinism check's metadata mismatches of the saves so far:
// all there is to check when the run stops early.
func (r *recomputation) checkMeta() error {
	if r.f.cfg.SkipDeterminismCheck || len(r.mismatches) == 0 {
		return nil
	}
	return fmt.Errorf("checkpoint: %w: recomputed values for the following tensors have different metadata "+
		"than during the forward pass.\n%s", ErrNondeterministic, strings.Join(r.mismatches, "\n"))
}

// check reports what the determinism check found once the function has run to its
// end.
func (r *recomputation) check() error {
	if err := r.checkMeta(); err != nil || r.f.cfg.SkipDeterminismCheck {
		return err
	}
	if want := r.f.saves(); r.n != want {
		return fmt.Errorf("checkpoint: %w: a different number of tensors was saved during the original forward and "+
			"recomputation.\nNumber of tensors saved during forward: %d\nNumber of tensors saved during recomputation: %d",
			ErrNondeterministic, want, r.n)
	}
	return nil
}

// saves is the number of tensors the forward saved.
func (f *frame) saves() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.holders)
}

// lastNeeded is the position of the last save still to be regenerated, -1 for none:
// its holder is live and holds no tensor (one the frame kept from the forward,
// keepResult, or one an earlier recomputation left, needs none; nor does one the graph
// released). The backward waits for the recomputation, so no holder changes during it
// but by the recomputation's own deliveries.
func (f *frame) lastNeeded() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.holders) - 1; i >= 0; i-- {
		if h := f.holders[i]; !h.dead && h.v == nil {
			return i
		}
	}
	return -1
}

func (f *frame) holderAt(i int) *holder {
	f.mu.Lock()
	defer f.mu.Unlock()
	if i >= len(f.holders) {
		return nil
	}
	return f.holders[i]
}

// Pack hands the i-th tensor the recompute saves to the frame's i-th holder, checks
// it against what the forward saved there, and stops the run after the last one (or
// at a save beyond the forward's count) by failing that save.
func (r *recomputation) Pack(v autograd.Value) (autograd.Value, error) {
	t, ok := v.(*tensor.Tensor)
	if !ok {
		v.Release()
		return nil, fmt.Errorf("checkpoint: pack: a saved value of type %T; the tensor package saves *tensor.Tensor", v)
	}
	f := r.f
	i := r.n
	r.n++
	h := f.holderAt(i)
	if h == nil {
		t.Release()
		if f.cfg.SkipDeterminismCheck {
			return recomputed{}, nil
		}
		return nil, &stopped{r: r, err: fmt.Errorf("checkpoint: %w: trying to save more tensors during recomputation than during "+
			"the original forward pass (%d)", ErrNondeterministic, i)}
	}
	if m := metaOf(t); !f.cfg.SkipDeterminismCheck && !m.equal(h.m) {
		r.mismatches = append(r.mismatches, fmt.Sprintf("tensor at position %d:\nsaved metadata: %v\nrecomputed metadata: %v", i, h.m, m))
	}
	f.deliver(h, t)
	if !f.cfg.NoEarlyStop && i >= r.last {
		return nil, &stopped{r: r, err: r.checkMeta()}
	}
	return recomputed{}, nil
}

// Unpack fails: the recomputation's own graph is dropped, never run backward.
func (r *recomputation) Unpack(autograd.Value) (autograd.Value, error) {
	return nil, errors.New("checkpoint: a tensor saved during a recomputation was unpacked; " +
		"backward through a recomputation's own graph is not supported")
}

// Result gives op, the recomputation's op number r.ops, the result the forward kept of
// the same op, if it kept one: the op then copies it instead of computing, and the
// frame holds it no more. Another op there, a kept result modified in place since, or
// one an earlier recomputation took, ends the recomputation with an error.
func (r *recomputation) Result(op string, _ []*tensor.Tensor) (*tensor.Tensor, error) {
	seq := r.ops
	r.ops++
	k, ok := r.f.takeKept(seq)
	if k.t != nil {
		defer func() {
			if k.t != nil { // not handed to the op
				k.t.Release()
			}
		}()
	}
	switch {
	case !ok:
		return nil, nil
	case k.t == nil:
		return nil, &stopped{r: r, err: fmt.Errorf("checkpoint: %w (op %d, %s, whose kept result an earlier backward used); "+
			"run the forward again, or checkpoint without a Policy to backpropagate twice", ErrExtraBackward, seq, op)}
	case k.op != op:
		return nil, &stopped{r: r, err: fmt.Errorf("checkpoint: %w: op %d of the recomputation is %s, where the forward ran %s "+
			"and the policy kept its result", ErrNondeterministic, seq, op, k.op)}
	case k.t.Version() != k.version:
		return nil, &stopped{r: r, err: fmt.Errorf("checkpoint: the result of %s (op %d) that the policy kept was modified in place "+
			"since the forward (version %d, now %d); do the in-place op on a copy", op, seq, k.version, k.t.Version())}
	}
	t := k.t
	k.t = nil
	return t, nil
}

// Ran does nothing: the recomputation keeps no results.
func (r *recomputation) Ran(string, []*tensor.Tensor, *tensor.Tensor) {}

// recomputed stands in the recomputation's graph for a tensor handed to a holder.
type recomputed struct{}

func (recomputed) Release() {}
