package tensor

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/autograd"
	"github.com/subletml/sublet/device"
)

// Scope owns tensor handles and carries the modes the ops on them follow. See the
// package doc for the rules; in short:
//   - an op runs in the innermost scope among its inputs' scopes, or, when that scope
//     has exactly one open child, in that child (and so on down: routing); several
//     open children are an ErrScope naming them;
//   - the scope an op runs in gives its modes; its owner (the scope itself, or for a
//     region made by With the nearest enclosing scope that owns) owns the result;
//   - Close releases every handle the scope still owns; Keep moves a handle to the
//     parent's owner first (out of any scope for a root, so that the caller owns it);
//   - a child scope inherits its parent's modes and is closed with it.
//
// A scope is used by one goroutine at a time, as are its handles; Close is idempotent
// and may come from another goroutine, but not while an op runs on the scope's
// handles (see the package doc's Modes).
type Scope struct {
	// Set at creation, never changed.
	parent *Scope
	// owner owns what is made in the scope: the scope itself, or for a region (With)
	// its parent's owner.
	owner *Scope
	depth int32
	// aside marks a scope made by Aside: ops never route into it.
	aside bool
	// internal marks the package's own scopes (a backward rule's, a gradient sum's),
	// which are always closed before the call that made them returns: the leak report
	// need not watch them. Their children inherit it.
	internal bool
	// engine marks an internal root whose results go only to the autograd engine,
	// never to the program (a rule's run, a backward's seed): each comes in one
	// allocation with its storage (resultBlock). Not inherited.
	engine bool
	// m are the scope's modes, which never change once it is made: its parent's,
	// shared, when it sets none of its own.
	m     *modes
	clock *autograd.Clock // shared by a root and its descendants
	// at is where the scope was made (nil in internal scopes), for the errors and
	// reports that name it.
	at *site
	// tree is the leak report's view of the scope's root and its descendants, shared
	// by them; nil in internal scopes.
	tree *tree

	// next is where an op that would run in this scope runs instead: its only open
	// child that is not aside, nil when it has none, or ambiguous when it has several.
	// Written under mu (by Child, With and a child's Close), read by every op without
	// the lock.
	next atomic.Pointer[Scope]

	mu       sync.Mutex
	owned    []*Tensor // guarded by mu; a handle's pos is its index here
	children []*Scope  // guarded by mu; open children
	childBuf [1]*Scope // room for children (a step's layer, a layer's region); guarded by mu
	onClose  *[]func() // guarded by mu; nil until the first (few scopes have any)
	// closing is set once by Close, under mu; ops read it without the lock to route
	// past a region that closed.
	closing atomic.Bool
	// steps counts the steps the scope saw end: Backwards from a tensor it or one of
	// its descendants owns. A handle's born is the count when the scope adopted it;
	// the growth report compares the last two steps. Guarded by mu.
	steps    uint32
	ownedBuf [4]*Tensor // room for owned; guarded by mu
	// ledger holds the handles of owned for the leak report, which reads it (through
	// tree) if the scope is found unreachable and unclosed. Guarded by mu; taken when
	// the scope first owns a handle, given back when it closes; nil in internal scopes.
	ledger *ledger
	// room carries owned's room once owned outgrew ownedBuf, back to spareRooms when
	// the scope closes. Guarded by mu; nil until then.
	room *room
}

// room is the room a scope's owned handles take beyond its inline room. A closed scope
// gives it back to spareRooms, cleared, and the next scope that outgrows its inline
// room takes it: a scope opened and closed per step or per layer then grows no slice.
type room struct{ owned []*Tensor }

// spareRooms holds the rooms of closed scopes, empty.
var spareRooms sync.Pool

// ambiguous is the value of Scope.next for a scope with several open children.
var ambiguous = new(Scope)

// modes are the scope properties ops follow. They never change after the scope is made.
type modes struct {
	gen       *Generator          // where random ops draw; nil: none set
	hooks     autograd.SavedHooks // pack/unpack of what nodes save; nil: none
	autocast  Autocast            // casts op inputs; nil: none
	hook      OpHook              // told of every op's start and end; nil: none
	grad      bool                // record the graph (false: no_grad)
	inference bool                // inference mode: no graph, results are inference tensors
	anomaly   bool                // record op sites; backward checks for NaN/Inf
	lifetime  alloc.Lifetime      // the allocator's placement hint for what ops make
}

// Option sets a mode of a new scope.
type Option func(*modes)

// NoGrad makes a scope whose ops record no graph and save nothing (torch.no_grad):
// results do not require grad, and temporaries die as soon as they are released.
func NoGrad() Option { return func(m *modes) { m.grad = false } }

// EnableGrad makes a scope that records again inside a no-grad one (torch.enable_grad).
// Inside inference mode it records nothing: leave inference mode with
// InferenceMode(false).
func EnableGrad() Option { return func(m *modes) { m.grad = true } }

// InferenceMode turns inference mode on or off (torch.inference_mode): its ops record
// no graph (whatever EnableGrad says), and the tensors they make are inference
// tensors, with no version counter (in-place writes are not counted: Version stays
// 0), which a recorded op refuses to save for backward later, naming itself (use a
// Clone made outside inference mode instead). Views of a tensor share its kind.
func InferenceMode(on bool) Option { return func(m *modes) { m.inference = on } }

// WithLifetime tells the caching allocator how long what the scope's ops make will live
// (alloc.Lifetime): the planned policy keeps parameters and optimizer state apart from
// a step's tensors. Make parameters and optimizer state in a scope with it.
func WithLifetime(l alloc.Lifetime) Option { return func(m *modes) { m.lifetime = l } }

// WithGenerator sets the random generator that Rand, Randn and Dropout draw from.
func WithGenerator(g *Generator) Option { return func(m *modes) { m.gen = g } }

// WithSavedHooks sets the pack/unpack pair applied to every tensor an op saves for
// backward in the scope (nil: none; only the innermost pair applies). The values Pack
// receives and Unpack returns are unowned *Tensor handles; see autograd.SavedHooks for
// who releases what. Unpack gives back the shape and type Pack received, in any
// layout (a backward that gets another fails with ErrGrad).
func WithSavedHooks(h autograd.SavedHooks) Option { return func(m *modes) { m.hooks = h } }

// WithAnomaly turns anomaly mode on or off: ops record where they were created, and a
// backward from a tensor of the scope fails with an *autograd.AnomalyError naming the
// op (and that place) whose gradient has a NaN or an Inf.
func WithAnomaly(on bool) Option { return func(m *modes) { m.anomaly = on } }

// WithAutocast sets the autocast policy (nil: none) consulted before every op.
func WithAutocast(p Autocast) Option { return func(m *modes) { m.autocast = p } }

// OpHook is told when each op of a scope starts and when it ends, successful or not,
// for profiling (package profiler implements it): OpBegin before the op allocates,
// OpEnd with the token OpBegin returned once it is done. Ops nest (the casts autocast
// makes run inside their op), and the ops of a backward rule are reported to the hook
// of the scope the forward op ran in. Calls come from the goroutine running the op.
type OpHook interface {
	OpBegin(op string, dev device.Device) uint64
	OpEnd(token uint64)
}

// WithOpHook sets the hook told of every op of the scope and its children (nil: none).
func WithOpHook(h OpHook) Option { return func(m *modes) { m.hook = h } }

// NewScope makes a root scope: grad recording on, no generator, no saved hooks, no
// anomaly mode, no autocast, then opts.
func NewScope(opts ...Option) *Scope {
	m := &modes{grad: true}
	for _, o := range opts {
		o(m)
	}
	s := &Scope{m: m, clock: new(autograd.Clock), tree: new(tree)}
	s.owner, s.owned = s, s.ownedBuf[:0]
	s.at = here()
	runtime.AddCleanup(s, reportTree, s.tree)
	return s
}

// newInternalScope makes a root no-grad scope for the package's own temporaries; the
// caller closes it before returning, also when it panics.
func newInternalScope() *Scope {
	r := new(internalRoot)
	r.init(false)
	return &r.s
}

// internalRoot is an internal root scope, its modes and its clock in one allocation
// (some are recycled: internalRoots).
type internalRoot struct {
	s     Scope
	m     modes
	clock autograd.Clock
}

// init makes r's scope a root no-grad internal scope with r's modes and clock, whose
// results go only to the autograd engine when engine is set.
func (r *internalRoot) init(engine bool) {
	r.m = modes{grad: false}
	r.s = Scope{m: &r.m, clock: &r.clock, internal: true, engine: engine}
	r.s.owner, r.s.owned = &r.s, r.s.ownedBuf[:0]
}

// Child makes a scope nested in s with s's modes, then opts, that owns what is made in
// it: the results of the ops that run in it (while it is s's only open child, the ops
// on s's tensors too: see the package doc) and its factories' and Bind's handles.
// Closing s closes it.
func (s *Scope) Child(opts ...Option) *Scope { return s.child(true, false, opts) }

// With makes a region nested in s: a scope with s's modes, then opts, that owns
// nothing. Ops run in it as in a child (while it is s's only open child, the ops on
// s's tensors too), following its modes, and their results belong to s's owner, so
// they outlive the region: PyTorch's `with torch.no_grad():` or `with
// torch.autocast(...):` around a few lines. Factories and Bind in a region make
// handles its owner owns. Closing s closes it; closing it releases nothing of its own
// (its children, if any, close with it).
func (s *Scope) With(opts ...Option) *Scope { return s.child(false, false, opts) }

// Aside makes a child scope like Child that ops are never routed into: it owns only
// what is made in it by name (its factories, Bind, and ops on the handles it owns),
// and it does not count among s's open children. It is for what lives beside the
// scopes a loop opens and closes: amp's weight-cast cache, or another goroutine's
// work on tensors bound in from s. Closing s closes it.
func (s *Scope) Aside(opts ...Option) *Scope { return s.child(true, true, opts) }

func (s *Scope) child(owns, aside bool, opts []Option) *Scope {
	c := &Scope{parent: s, depth: s.depth + 1, m: s.m, clock: s.clock, internal: s.internal, aside: aside, tree: s.tree}
	c.owner, c.owned = s.owner, c.ownedBuf[:0]
	if owns {
		c.owner = c
	}
	if !c.internal {
		c.at = here()
	}
	// An internal scope's modes are its own (a recycled root's change), and so are
	// those of a scope given options.
	if len(opts) > 0 || s.internal {
		m := *s.m
		for _, o := range opts {
			o(&m)
		}
		c.m = &m
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing.Load() {
		panic(&Error{Op: "Child", Msg: "the parent scope is closed", Err: ErrScope})
	}
	if s.children == nil {
		s.children = s.childBuf[:0]
	}
	s.children = append(s.children, c)
	s.reroute()
	return c
}

// reroute sets s.next from s.children; s.mu is held.
func (s *Scope) reroute() {
	var only *Scope
	for _, k := range s.children {
		if k.aside {
			continue
		}
		if only != nil {
			s.next.Store(ambiguous)
			return
		}
		only = k
	}
	s.next.Store(only)
}

// route is the scope an op whose inputs' innermost scope is s runs in: s, or down the
// chain of only open children as far as it goes. A scope on the way with several open
// children fails op.
func (s *Scope) route(op string, in []*Tensor) *Scope {
	for {
		n := s.next.Load()
		switch n {
		case nil:
			return s
		case ambiguous:
			s.ambiguity(op, in)
		}
		s = n
	}
}

// ambiguity fails op: s, where it would run, has several open children.
func (s *Scope) ambiguity(op string, in []*Tensor) {
	s.mu.Lock()
	var kids []string
	for _, k := range s.children {
		if !k.aside {
			kids = append(kids, k.describe())
		}
	}
	s.mu.Unlock()
	fail(op, ErrScope, in, "the op would run in %s, which has %d open child scopes (%s), so which one owns the result "+
		"is ambiguous; close the ones done with, bind the inputs into the scope that should own the result "+
		"(c.Bind(x)), or make a scope another goroutine uses with Aside", s.describe(), len(kids), strings.Join(kids, "; "))
}

// ResultScope is the scope an op on in runs in (see the package doc): its modes apply,
// and its Owner owns the result. Layer and checkpoint open their child scopes there. It
// panics with ErrScope where the op would: no input has a scope, the inputs' scopes
// are unrelated, or a scope on the way has several open children.
func ResultScope(in ...*Tensor) *Scope {
	for _, t := range in {
		t.live("ResultScope")
	}
	return resultScope("ResultScope", in)
}

// Parent is the enclosing scope, nil for a root.
func (s *Scope) Parent() *Scope { return s.parent }

// Owner is the scope that owns what is made in s: s itself, or, for a region made by
// With, the nearest enclosing scope that owns.
func (s *Scope) Owner() *Scope { return s.owner }

// GradEnabled reports whether ops in the scope record the graph.
func (s *Scope) GradEnabled() bool { return s.m.grad && !s.m.inference }

// InferenceMode reports whether the scope is in inference mode.
func (s *Scope) InferenceMode() bool { return s.m.inference }

// Generator is the scope's random generator, nil when none was set.
func (s *Scope) Generator() *Generator { return s.m.gen }

// SavedHooks is the saved-tensor hook pair in effect, nil when none.
func (s *Scope) SavedHooks() autograd.SavedHooks { return s.m.hooks }

// Anomaly reports whether anomaly mode is on.
func (s *Scope) Anomaly() bool { return s.m.anomaly }

// Autocast is the autocast policy in effect, nil when none.
func (s *Scope) Autocast() Autocast { return s.m.autocast }

// Len is the number of handles the scope owns now (0 for a region).
func (s *Scope) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.owned)
}

// Closed reports whether Close was called.
func (s *Scope) Closed() bool { return s.closing.Load() }

// OnClose registers f to run when the scope closes, before it releases its handles
// (callbacks run last registered first; f may Keep handles). amp clears its weight-cast
// cache this way.
func (s *Scope) OnClose(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing.Load() {
		panic(&Error{Op: "OnClose", Msg: "the scope is closed", Err: ErrScope})
	}
	if s.onClose == nil {
		s.onClose = new([]func())
	}
	*s.onClose = append(*s.onClose, f)
}

// Close closes the open children (newest first), runs the OnClose callbacks, then
// releases every handle the scope still owns, newest first. From the moment it starts,
// ops no longer route into the scope. Closing again does nothing. A child's Close or a
// callback that panics does not leave the rest undone: everything above still happens,
// then the panic goes on.
func (s *Scope) Close() {
	s.mu.Lock()
	if s.closing.Load() {
		s.mu.Unlock()
		return
	}
	s.closing.Store(true)
	kids := s.children
	var hooks []func()
	if s.onClose != nil {
		hooks = *s.onClose
	}
	s.children, s.onClose = nil, nil
	s.next.Store(nil)
	s.mu.Unlock()
	if p := s.parent; p != nil {
		p.removeChild(s)
	}

	// Deferred calls run last registered first, and all of them run while a panic
	// unwinds.
	defer s.releaseOwned()
	for _, f := range hooks {
		defer f()
	}
	for _, k := range kids {
		defer k.Close()
	}
}

// releaseOwned releases the handles s still owns, newest first. They keep their scope
// field: the goroutine using them may be reading it in Release right now. forget finds
// them gone from owned, and the released flag decides who drops each one.
func (s *Scope) releaseOwned() {
	s.mu.Lock()
	owned, l := s.owned, s.ledger
	s.owned, s.ledger = nil, nil
	s.mu.Unlock()
	for i := len(owned) - 1; i >= 0; i-- {
		if t := owned[i]; !t.h.released.Swap(true) {
			t.drop()
		}
	}
	if l != nil {
		s.tree.close(l)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.room; r != nil {
		s.room = nil
		clear(owned)
		r.owned = owned[:0]
		spareRooms.Put(r)
	}
}

func (p *Scope) removeChild(c *Scope) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, k := range p.children {
		if k == c {
			p.children = append(p.children[:i], p.children[i+1:]...)
			p.reroute()
			return
		}
	}
}

// Keep makes t outlive s. When s owns t, Keep moves it to the owner of s's parent, or,
// for a root, out of every scope (the caller then owns it and must Release it). A
// region owns nothing: there Keep returns t if a scope enclosing the region owns it
// (t outlives the region as it is). It returns t.
func (s *Scope) Keep(t *Tensor) *Tensor {
	t.live("Keep")
	if s.owner != s {
		if t.scope == nil || !t.scope.encloses(s) {
			fail("Keep", ErrScope, []*Tensor{t}, "the tensor is owned by %s, inside this region (which owns nothing); "+
				"Keep the handle in the scope that owns it", t.scope.describe())
		}
		return t
	}
	if t.scope != s {
		fail("Keep", ErrScope, []*Tensor{t}, "the tensor is owned by %s, not by this scope; Keep the handle in the scope that owns it", t.scope.describe())
	}
	s.forget(t)
	if s.parent != nil {
		s.parent.adopt(t)
	} else {
		watch(t)
	}
	return t
}

// Bind makes a new handle to t owned by s's owner: same storage, same element layout,
// same place in the graph (gradients reach t's producer, or t's own gradient for a
// leaf). Ops on a parameter alone use it to give their result an owner and modes:
// s.Bind(w).T(). The new handle is released with its owner; t is untouched.
func (s *Scope) Bind(t *Tensor) *Tensor {
	t.live("Bind")
	if s.Closed() {
		fail("Bind", ErrScope, []*Tensor{t}, "%s is closed; bind into a scope that is open", s.describe())
	}
	b := newHandle(s, t.st, false, t.dt, t.shape, t.strides, t.offset, nil)
	b.requiresGrad, b.h.cell = t.requiresGrad, t.h.cell
	if t.node != nil {
		if err := t.node.Retain(); err != nil {
			b.Release()
			fail("Bind", gradErr(err), []*Tensor{t}, "the tensor's graph was freed")
		}
		b.node = t.node
	}
	return b
}

// handOver moves t, which s owns, out of s, an internal root scope, to the autograd
// engine, which releases every value it is given: unlike Keep, t is not watched by the
// leak report (the engine's values never reach the program).
func (s *Scope) handOver(t *Tensor) *Tensor {
	if !s.internal || s.parent != nil || t.scope != s {
		panic(fmt.Sprintf("tensor: internal error: handOver of %v from %s", t, s.describe()))
	}
	s.forget(t)
	return t
}

// adopt makes s's owner the owner of t, which has none, and s its place.
func (s *Scope) adopt(t *Tensor) {
	place := s
	s = s.owner
	s.mu.Lock()
	if s.closing.Load() {
		s.mu.Unlock()
		if !t.h.released.Swap(true) {
			t.drop()
		}
		panic(&Error{Op: "adopt", Msg: "the scope the result belongs to is closed", Err: ErrScope})
	}
	if s.tree != nil {
		t.ownHandle() // the ledger reads it
		if s.ledger == nil {
			s.ledger = s.tree.open()
		}
	}
	if len(s.owned) == cap(s.owned) && s.room == nil {
		s.takeRoom()
	}
	t.scope, t.place, t.pos, t.born = s, place, len(s.owned), s.steps
	s.owned = append(s.owned, t)
	if l := s.ledger; l != nil {
		l.hs = append(l.hs, t.h)
	}
	s.mu.Unlock()
}

// takeRoom moves owned, which fills ownedBuf, into the room a closed scope gave back,
// or into a new room twice as large when that is no larger; s.mu is held. owned never
// returns to ownedBuf, so the room given back at Close is never the scope's own.
func (s *Scope) takeRoom() {
	r, _ := spareRooms.Get().(*room)
	if r == nil || cap(r.owned) <= len(s.owned) {
		r = &room{owned: make([]*Tensor, 0, 2*len(s.owned))}
	}
	s.room = r
	s.owned = append(r.owned, s.owned...)
}

// forget takes t out of s's handles, if it is still among them (Close may have taken
// them all).
func (s *Scope) forget(t *Tensor) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t.scope, t.place = nil, nil
	if t.pos >= len(s.owned) || s.owned[t.pos] != t {
		return
	}
	last := len(s.owned) - 1
	moved := s.owned[last]
	s.owned[t.pos], moved.pos = moved, t.pos
	s.owned[last] = nil
	s.owned = s.owned[:last]
	if l := s.ledger; l != nil {
		l.hs[t.pos] = l.hs[last]
		l.hs[last] = nil
		l.hs = l.hs[:last]
	}
}

// encloses reports whether s is c or one of c's ancestors.
func (s *Scope) encloses(c *Scope) bool {
	for c != nil && c.depth >= s.depth {
		if c == s {
			return true
		}
		c = c.parent
	}
	return false
}

// describe names s in errors: its depth and where it was made.
func (s *Scope) describe() string {
	if s == nil {
		return "no scope (the caller)"
	}
	kind := "scope"
	switch {
	case s.owner != s:
		kind = "region"
	case s.aside:
		kind = "aside scope"
	}
	if s.at != nil {
		if f := firstFrame(s.at[:]); f != "" {
			return fmt.Sprintf("the %s at depth %d made at %s", kind, s.depth, f)
		}
	}
	return fmt.Sprintf("a %s at depth %d", kind, s.depth)
}

// Layer runs f on x inside a child scope (with opts applied to it) of the scope an op
// on x runs in (ResultScope): x is bound into the child, so everything f computes from
// it belongs there; when f returns, its result is kept (moved to the owner of the
// child's parent) and the child is closed, releasing f's temporaries. Temporaries a
// recorded op saved for backward live on in the graph.
func Layer(x *Tensor, f func(x *Tensor) *Tensor, opts ...Option) *Tensor {
	x.live("Layer")
	if x.scope == nil {
		fail("Layer", ErrScope, []*Tensor{x}, "the input belongs to no scope; bind it into one with Scope.Bind")
	}
	home := resultScope("Layer", []*Tensor{x})
	c := home.Child(opts...)
	defer c.Close()
	y := f(c.Bind(x))
	y.live("Layer")
	switch {
	case y.scope == c:
		return c.Keep(y)
	case y.scope != nil && y.scope.encloses(home):
		return y
	}
	fail("Layer", ErrScope, []*Tensor{y}, "the layer returned a tensor owned by %s; return one computed in the layer's scope", y.scope.describe())
	return nil
}
