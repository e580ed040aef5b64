package checkpoint

import (
	"fmt"
	"slices"
	"sync"

	"github.com/subletml/sublet/autograd"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
)

// frame is one Checkpoint call in a recording scope: what a recompute needs, and a
// holder for each tensor the forward saved. It is the forward's saved hooks.
type frame struct {
	// Set by newFrame, never changed.
	cfg      Config
	fn       Func
	gen      *tensor.Generator     // the call scope's; nil: none
	rng      tensor.GeneratorState // gen's state at the call; valid when rngSaved
	rngSaved bool
	autocast tensor.Autocast
	anomaly  bool
	// outer are the saved hooks of the call scope (an enclosing checkpoint, an
	// offload), through which the inputs are kept; nil: they are kept directly.
	outer  autograd.SavedHooks
	inputs []input // released, all at once, when refs reaches zero

	mu         sync.Mutex
	holders    []*holder // guarded by mu; one per tensor the forward saved, in order
	refs       int       // guarded by mu; live holders, plus one while the forward runs
	forwarding bool      // guarded by mu; the forward is running: Pack makes holders
	// ops counts the ops the forward told the frame it ran (tensor.OpCache.Ran);
	// kept are the results the policy kept, in that order. Guarded by mu; each is
	// handed to the first recomputation that reaches its op (PyTorch pops it), the
	// rest released with the inputs.
	ops  int
	kept []kept
}

// kept is the result of the forward's op number seq, of op, which the policy kept:
// an unowned handle outside the graph over its data, at version; nil once a
// recomputation took it.
type kept struct {
	seq     int
	op      string
	t       *tensor.Tensor
	version uint64
}

// input is one input of the checkpointed function as the frame keeps it.
type input struct {
	// kept is an unowned *tensor.Tensor outside the graph over the input's data, or,
	// under outer hooks, what their Pack returned for it.
	kept         autograd.Value
	requiresGrad bool   // the forward input's; the recompute's input gets the same
	version      uint64 // the data's version at the call, when kept directly
}

// holder stands in the graph for a tensor the forward saved. It is a counted
// reference to the frame: the frame keeps its inputs while a holder is live.
type holder struct {
	f *frame
	i int  // position among the forward's saves; set at creation, never changed
	m meta // what was saved; set at creation, never changed
	// The saved tensor's storage and offset, which tell it apart from another of the
	// same meta (keepResult); set at creation, never changed.
	st  *tensor.Storage
	off int

	v    *tensor.Tensor // guarded by f.mu; recomputed, waiting for its unpack; nil otherwise
	dead bool           // guarded by f.mu; released by the graph
}

// meta is what the determinism check compares.
type meta struct {
	shape []int
	dt    dtype.DType
	dev   string
}

func metaOf(t *tensor.Tensor) meta {
	return meta{shape: t.Shape(), dt: t.DType(), dev: t.Device().Name()}
}

func (m meta) equal(o meta) bool {
	return slices.Equal(m.shape, o.shape) && m.dt == o.dt && m.dev == o.dev
}

func (m meta) String() string {
	return fmt.Sprintf("{shape: %v, dtype: %v, device: %s}", m.shape, m.dt, m.dev)
}

// newFrame captures the modes of s and keeps the inputs in (through s's saved hooks,
// when it has some). If keeping an input fails or panics, what was kept is released.
func newFrame(c Config, fn Func, s *tensor.Scope, in []*tensor.Tensor) *frame {
	f := &frame{cfg: c, fn: fn, gen: s.Generator(), autocast: s.Autocast(), anomaly: s.Anomaly(),
		outer: s.SavedHooks(), refs: 1, forwarding: true}
	if f.gen != nil && !c.SkipRNGState {
		f.rng, f.rngSaved = f.gen.State(), true
	}
	kept := false
	defer func() {
		if !kept {
			f.releaseInputs()
		}
	}()
	for i, t := range in {
		d := dataOf(t)
		k := input{kept: d, requiresGrad: t.RequiresGrad(), version: d.Version()}
		if f.outer != nil {
			p, err := f.outer.Pack(d)
			if err != nil {
				panic(&tensor.Error{Op: opCheckpoint, Msg: fmt.Sprintf("keeping input %d through the scope's saved-tensor hooks", i),
					Err: fmt.Errorf("%w: %w", tensor.ErrGrad, err)})
			}
			k.kept = p
		}
		f.inputs = append(f.inputs, k)
	}
	kept = true
	return f
}

// keepResult makes y, the function's result, the value of the forward's last save
// when that save is y (its storage, offset and meta): the recomputation then need not
// regenerate it, and stops before the op that made it where that op saves its inputs
// before it computes (tensor.LinearActivation). The frame holds y from now until the
// backward takes it or the graph lets it go: only right where something else holds y
// until then anyway (Sequential: heldUntilBackward), or the memory the checkpoint
// spares would grow by y. Under saved-tensor hooks of the calling scope
// (an offload, an enclosing checkpoint) the next segment keeps its input through them,
// off the device perhaps, so the frame keeps nothing there.
func (f *frame) keepResult(y *tensor.Tensor) {
	if f.outer != nil {
		return
	}
	f.mu.Lock()
	n := len(f.holders)
	var h *holder
	if n > 0 {
		h = f.holders[n-1]
	}
	f.mu.Unlock()
	if h == nil || h.st != y.Storage() || h.off != y.Offset() || !h.m.equal(metaOf(y)) {
		return
	}
	f.deliver(h, dataOf(y))
}

// forwardDone ends the forward: no more holders; if none is live the inputs go now.
func (f *frame) forwardDone() {
	f.mu.Lock()
	f.forwarding = false
	f.refs--
	last := f.refs == 0
	f.mu.Unlock()
	if last {
		f.releaseInputs()
	}
}

func (f *frame) releaseInputs() {
	for _, in := range f.inputs {
		in.kept.Release()
	}
	f.mu.Lock()
	ks := f.kept
	f.kept = nil
	f.mu.Unlock()
	for _, k := range ks {
		if k.t != nil {
			k.t.Release()
		}
	}
}

// dataOf is a new handle over t's data, outside the graph and every scope: the
// caller owns it.
func dataOf(t *tensor.Tensor) *tensor.Tensor {
	tmp := tensor.NewScope(tensor.NoGrad())
	defer tmp.Close()
	return tmp.Keep(tmp.Bind(t).Detach())
}

// Result is the forward's side of the op cache: it computes every op.
func (f *frame) Result(string, []*tensor.Tensor) (*tensor.Tensor, error) { return nil, nil }

// Ran numbers the forward's ops and keeps the result of those the policy saves.
func (f *frame) Ran(op string, in []*tensor.Tensor, out *tensor.Tensor) {
	f.mu.Lock()
	seq := f.ops
	f.ops++
	f.mu.Unlock()
	if f.cfg.Policy == nil || f.cfg.Policy(op, in) != Save {
		return
	}
	d := dataOf(out)
	f.mu.Lock()
	f.kept = append(f.kept, kept{seq: seq, op: op, t: d, version: d.Version()})
	f.mu.Unlock()
}

// takeKept takes the result the forward kept of its op number seq, if it kept one:
// the caller owns k.t, and the frame holds it no more (k.t is nil when a recomputation
// took it before).
func (f *frame) takeKept(seq int) (k kept, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	i, found := slices.BinarySearchFunc(f.kept, seq, func(k kept, seq int) int { return k.seq - seq })
	if !found {
		return kept{}, false
	}
	k = f.kept[i]
	f.kept[i].t = nil
	return k, true
}

// Pack replaces a tensor the forward saves by a holder and releases the tensor.
func (f *frame) Pack(v autograd.Value) (autograd.Value, error) {
	t, ok := v.(*tensor.Tensor)
	if !ok {
		v.Release()
		return nil, fmt.Errorf("checkpoint: pack: a saved value of type %T; the tensor package saves *tensor.Tensor", v)
	}
	m, st, off := metaOf(t), t.Storage(), t.Offset()
	t.Release()
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.forwarding {
		return nil, fmt.Errorf("checkpoint: a tensor %v was saved through the hooks of a checkpoint whose forward is over", m)
	}
	h := &holder{f: f, i: len(f.holders), m: m, st: st, off: off}
	f.holders = append(f.holders, h)
	f.refs++
	return h, nil
}

// Unpack hands the recomputed tensor of holder p over to the backward, recomputing
// first when it is not there: the first unpack of the frame in a backward
// regenerates every saved tensor still in use, each later one takes its own.
func (f *frame) Unpack(p autograd.Value) (autograd.Value, error) {
	h, ok := p.(*holder)
	if !ok || h.f != f {
		return nil, fmt.Errorf("checkpoint: unpack: %T is not a placeholder of this checkpoint", p)
	}
	if v := f.take(h); v != nil {
		return v, nil
	}
	if err := f.recompute(); err != nil {
		return nil, err
	}
	if v := f.take(h); v != nil {
		return v, nil
	}
	return nil, fmt.Errorf("checkpoint: the recomputation did not regenerate saved tensor %d %v; "+
		"the checkpointed function saves fewer tensors when run again", h.i, h.m)
}

// take removes h's recomputed tensor, nil when there is none.
func (f *frame) take(h *holder) *tensor.Tensor {
	f.mu.Lock()
	defer f.mu.Unlock()
	v := h.v
	h.v = nil
	return v
}

// deliver gives h the recomputed t (released at once when the graph released h).
func (f *frame) deliver(h *holder, t *tensor.Tensor) {
	f.mu.Lock()
	if h.dead {
		f.mu.Unlock()
		t.Release()
		return
	}
	old := h.v
	h.v = t
	f.mu.Unlock()
	if old != nil {
		old.Release()
	}
}

// clear releases every recomputed tensor still waiting.
func (f *frame) clear() {
	f.mu.Lock()
	var vs []*tensor.Tensor
	for _, h := range f.holders {
		if h.v != nil {
			vs = append(vs, h.v)
			h.v = nil
		}
	}
	f.mu.Unlock()
	for _, v := range vs {
		v.Release()
	}
}

// Release is the graph releasing the saved value: the recomputed tensor, if one is
// waiting, goes, and with the frame's last holder so do the inputs.
func (h *holder) Release() {
	f := h.f
	f.mu.Lock()
	if h.dead {
		f.mu.Unlock()
		return
	}
	h.dead = true
	v := h.v
	h.v = nil
	f.refs--
	last := f.refs == 0
	f.mu.Unlock()
	if v != nil {
		v.Release()
	}
	if last {
		f.releaseInputs()
	}
}
