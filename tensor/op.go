package tensor

import (
	"fmt"
	"runtime"
	"slices"
	"sync"

	"github.com/subletml/sublet/autograd"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
)

// call is one op in progress: its name, its inputs (after autocast), the scope it runs
// in (whose modes it follows and whose owner owns its results), and what it allocated,
// released again if the op fails.
type call struct {
	op  string
	in  []*Tensor
	s   *Scope
	dev device.Device
	k   kernels.Backend // computes on dev's memory (kernelsFor); nil for beginView
	// hook is the scope's OpHook (nil: none) and token what its OpBegin returned; end
	// calls OpEnd once.
	hook  OpHook
	token uint64
	made  []*Tensor
	node  *autograd.Node // the op's node once record ran
	fn    *function      // its rule
	// at is where the op was called from, recorded with its first handle and shared
	// by all of them: one call stack per op.
	at *site
	// scratch are temporaries the op releases when it is done.
	scratch []*Tensor
	// cached is the result an OpCache gave the op to copy instead of computing it
	// (opcache.go), owned by the op until its result is allocated; answered says one
	// was given. partOf marks a cast made for another op (call.cast): no OpCache is
	// told of it.
	cached           *Tensor
	answered, partOf bool
	// Room for the usual few inputs (four: a loss's backward), results and node
	// inputs without allocating.
	inBuf   [4]*Tensor
	madeBuf [2]*Tensor
	edgeBuf [3]autograd.Edge
}

// begin starts op on inputs in: it checks they are live and on one device with
// kernels, picks the scope it runs in (resultScope) and lets that scope's autocast
// policy replace them.
func begin(op string, in ...*Tensor) *call { return start(op, true, in) }

// beginView is begin for an op that runs no kernel (a view, a copy the driver makes):
// it runs on a device without kernels too, and c.k is nil.
func beginView(op string, in ...*Tensor) *call { return start(op, false, in) }

func start(op string, compute bool, in []*Tensor) *call {
	for _, t := range in {
		t.live(op)
	}
	return beginIn(resultScope(op, in), in[0].st.dev, op, compute, in...)
}

// beginIn starts op with results in s on dev (factories, and casts the autocast policy
// asks for), with dev's kernels when compute is set; the inputs are live.
func beginIn(s *Scope, dev device.Device, op string, compute bool, in ...*Tensor) *call {
	c := open(s, dev, op, compute, in)
	if ac := s.m.autocast; ac != nil && op != OpCast && len(in) > 0 {
		c.autocast(ac)
	}
	if compute {
		c.lookup() // after the autocast casts, which are ops of their own
	}
	return c
}

// autocast lets the policy ac replace the call's inputs. A policy that panics (a
// banned op, a cast out of memory) fails the op: the casts it made are released and
// the hook is told the op ended.
func (c *call) autocast(ac Autocast) {
	ok := false
	defer func() {
		if !ok {
			c.abort()
		}
	}()
	got := ac.Inputs(c.s, c.op, slices.Clone(c.in), c.cast)
	if len(got) != len(c.in) {
		c.bad(ErrShape, "the autocast policy returned %d inputs for %d", len(got), len(c.in))
	}
	for _, t := range got {
		if t == nil || t.h.released.Load() {
			c.bad(ErrReleased, "the autocast policy returned a nil or released input")
		}
	}
	c.in, ok = got, true
}

// beginTyped starts op on t, an op that takes the type of its result: dt when the
// caller gives one, and then autocast leaves the op alone (PyTorch keeps an explicit
// dtype); with dtype.Invalid, the type the scope's autocast policy picks through
// AutocastOutput (Inputs is then not called), or else t's type after Inputs. dt is
// floating.
func beginTyped(op string, t *Tensor, dt dtype.DType) (*call, dtype.DType) {
	t.live(op)
	in := []*Tensor{t}
	s := resultScope(op, in)
	if dt == dtype.Invalid {
		if p, ok := s.m.autocast.(AutocastOutput); ok {
			if d, ok := p.OutputType(op, slices.Clone(in)); ok {
				if !d.IsFloat() {
					fail(op, ErrDType, in, "the autocast policy asked for a %v result; the op's results are floating", d)
				}
				dt = d
			}
		}
	}
	if dt == dtype.Invalid {
		c := beginIn(s, t.st.dev, op, true, in...)
		return c, c.in[0].dt
	}
	c := open(s, t.st.dev, op, true, in)
	if !dt.IsFloat() {
		c.bad(ErrDType, "result type %v: the op's results are floating", dt)
	}
	c.lookup()
	return c, dt
}

// readAs makes the call's input i what the op reads to compute a result of type dt:
// the input itself where each of its values converts to dt exactly (holds: F32 from
// F16 or BF16, F64 from any float; the kernels convert as they read, and no copy is
// made), else its Cast to dt, a temporary of the op (PyTorch casts the input to an
// explicit dtype before the op). It returns the input to use.
func (c *call) readAs(i int, dt dtype.DType) *Tensor {
	x := c.in[i]
	if holds(dt, x.dt) {
		return x
	}
	y := c.cast(x, dt)
	c.in[i] = y
	return y
}

// open makes the call of op with results in s on dev, computing with dev's kernels when
// compute is set, after checking that s is open and the inputs are on dev; the inputs
// are live.
func open(s *Scope, dev device.Device, op string, compute bool, in []*Tensor) *call {
	if s.Closed() {
		fail(op, ErrScope, in, "the scope the result belongs to is closed")
	}
	for _, t := range in {
		if t.st.dev != dev {
			fail(op, ErrDevice, in, "inputs on %s and %s; move them to one device with To", dev.Name(), t.st.dev.Name())
		}
	}
	c := calls.Get().(*call)
	c.op, c.s, c.dev = op, s, dev
	if compute {
		c.k = kernelsFor(op, dev, in)
	}
	c.in, c.made = append(c.inBuf[:0], in...), c.madeBuf[:0]
	if h := s.m.hook; h != nil {
		c.hook, c.token = h, h.OpBegin(op, dev)
	}
	return c
}

// resultScope is the scope op on in runs in: the innermost of the inputs' places
// (every other one must enclose it), routed down its chain of only open children
// (Scope.route).
func resultScope(op string, in []*Tensor) *Scope {
	var s *Scope
	for _, t := range in {
		if p := t.origin(); p != nil && (s == nil || p.depth > s.depth) {
			s = p
		}
	}
	if s == nil {
		fail(op, ErrScope, in, "no input belongs to a scope (parameters, gradients and kept "+
			"tensors belong to their owner), so the result would have no owner; bind one into a scope with s.Bind(t)")
	}
	for _, t := range in {
		if p := t.origin(); p != nil && !p.encloses(s) {
			fail(op, ErrScope, in, "inputs belong to unrelated scopes (different trees, or sibling scopes); "+
				"bind them into one scope with Bind")
		}
	}
	return s.route(op, in)
}

// origin is where routing starts for an op on t: the region t was made or bound in
// while it is open, else t's scope (nil for none).
func (t *Tensor) origin() *Scope {
	if p := t.place; p != t.scope && !p.closing.Load() {
		return p
	}
	return t.scope
}

// cast is the Cast op in c's scope, for the autocast policy and readAs. Its result is
// a temporary of the op, released when the op is done (as PyTorch frees an autocast
// cast once its op returns): a node that saved it holds its own reference. It is
// part of c's op for an OpCache, which neither asks nor hears of it: which casts
// autocast makes depends on its weight-cast cache, which a recomputation may not
// find, and readAs's comes after the op asked the cache.
func (c *call) cast(t *Tensor, dt dtype.DType) *Tensor {
	t.live(OpCast)
	k := open(c.s, c.dev, OpCast, true, []*Tensor{t})
	k.partOf = true
	y := castOp(k, dt)
	c.made, c.scratch = append(c.made, y), append(c.scratch, y)
	return y
}

// alloc makes a contiguous result of dt and shape (which the call then owns) in the
// result scope. A lack of memory releases what the op made so far and panics with an
// *Error wrapping the *alloc.OOMError. shape is only read (the result takes the
// shared copy layoutOf gives), so a caller may build it on its stack.
func (c *call) alloc(dt dtype.DType, shape []int) *Tensor {
	n, ok := bytesOf(dt, shape)
	if !ok {
		c.bad(ErrShape, "a %v result of shape %v would take more than 2^63 bytes", dt, slices.Clone(shape))
	}
	var rb *resultBlock
	var blk *block
	if c.s.engine {
		rb = new(resultBlock)
		blk = &rb.blk
	}
	st, err := newStorage(c.dev, c.knownAllocator(), n, c.op, c.s.m.lifetime, blk)
	if err != nil {
		c.abort()
		fail(c.op, err, c.in, "allocating %v %v (%d bytes)", slices.Clone(shape), dt, n)
	}
	l := layoutOf(shape)
	var t *Tensor
	if rb != nil {
		st.spare = nil
		rb.t.h, rb.t.sharedAlloc, rb.t.inBlock = &rb.blk.h, true, true
		t = rb.t.init(c.s, st, true, dt, l.shape, l.strides, 0, c.at)
	} else {
		t = c.handle(st, true, dt, l.shape, l.strides, 0)
	}
	c.made = append(c.made, t)
	c.fromCache(t)
	return t
}

// resultBlock is a result of an op in a scope whose results go only to the autograd
// engine (Scope.engine): its storage, its handle and its Tensor in one allocation.
// The Tensor lives as long as the storage (a view or a saved handle keeps it), and no
// ledger or cleanup may ever read its handle (ownHandle refuses): they would keep
// the Tensor reachable through the storage.
type resultBlock struct {
	blk block
	t   Tensor
}

// knownAllocator is the allocator of an input's storage on the op's device, nil where
// there is none (allocatorOf).
func (c *call) knownAllocator() Allocator {
	for _, t := range c.in {
		if t.st.dev == c.dev {
			return t.st.al
		}
	}
	return nil
}

// handle makes a handle of the op's results in its scope (newHandle) with the op's
// site: recorded by its first handle, shared by the others; none in an internal scope.
func (c *call) handle(st *Storage, fresh bool, dt dtype.DType, shape, strides []int, offset int) *Tensor {
	t := newHandle(c.s, st, fresh, dt, shape, strides, offset, c.at)
	c.at = t.h.at
	return t
}

// view makes a result sharing t's storage, placed by shape, strides and offset.
func (c *call) view(t *Tensor, shape, strides []int, offset int) *Tensor {
	v := c.handle(t.st, false, t.dt, shape, strides, offset)
	c.made = append(c.made, v)
	return v
}

// temp releases t, a temporary of the op, now.
func (c *call) temp(t *Tensor) { t.Release() }

// rowType is the type the row kernels (softmax, layer norm, the losses, embedding)
// compute the call in: F64 when one of its inputs is F64, else F32 (F16 and BF16
// inputs are converted to F32, as PyTorch computes them in float). Every operand of
// such a kernel has it: dense, denseOut and the statistics an op saves.
func (c *call) rowType() dtype.DType {
	for _, t := range c.in {
		if t.dt == dtype.F64 {
			return dtype.F64
		}
	}
	return dtype.F32
}

// scratchOf allocates a contiguous temporary of dt released when the op is done.
func (c *call) scratchOf(dt dtype.DType, shape []int) *Tensor {
	t := c.alloc(dt, shape)
	c.scratch = append(c.scratch, t)
	return t
}

// rowStore is the type the row operands ts (nil ones aside: an output or a gradient not
// wanted, an absent weight) of a softmax or layer norm kernel are passed in: their one
// type when it is F16 or BF16 and every one is contiguous (those kernels read and
// write 16-bit rows themselves, computing in float32 with the bits of an F32 copy),
// else the call's rowType, which dense and denseOut convert them to.
func (c *call) rowStore(ts ...*Tensor) dtype.DType {
	dt := dtype.Invalid
	for _, t := range ts {
		switch {
		case t == nil:
		case !t.dt.Is16() || dt != dtype.Invalid && t.dt != dt || !t.IsContiguous():
			return c.rowType()
		default:
			dt = t.dt
		}
	}
	if dt == dtype.Invalid {
		return c.rowType()
	}
	return dt
}

// dense returns t contiguous in the call's rowType for the row kernels: t itself (nil
// for nil), or a converted copy released when the op is done.
func (c *call) dense(t *Tensor) *Tensor { return c.denseAs(t, c.rowType()) }

// denseAs is dense in dt.
func (c *call) denseAs(t *Tensor, dt dtype.DType) *Tensor {
	if t == nil || t.dt == dt && t.IsContiguous() {
		return t
	}
	d := c.scratchOf(dt, t.shape)
	c.k.Copy(d.operand(), t.operand())
	return d
}

// denseOut returns where a dense kernel writes out: out itself when it has the call's
// rowType (or is nil, a gradient not wanted), else a scratch of that type that flush
// converts into out.
func (c *call) denseOut(out *Tensor) *Tensor { return c.denseOutAs(out, c.rowType()) }

// denseOutAs is denseOut in dt.
func (c *call) denseOutAs(out *Tensor, dt dtype.DType) *Tensor {
	if out == nil || out.dt == dt {
		return out
	}
	return c.scratchOf(dt, out.shape)
}

// flush stores a dense kernel's result buf into out (nothing when buf is out, nil
// included).
func (c *call) flush(out, buf *Tensor) {
	if out != buf {
		c.k.Copy(out.operand(), buf.operand())
	}
}

// abort releases everything the op made, its results and its temporaries (Release is
// idempotent: a scratch tensor is in both lists).
func (c *call) abort() {
	if c.cached != nil {
		c.cached.Release()
		c.cached = nil
	}
	for i := len(c.made) - 1; i >= 0; i-- {
		c.made[i].Release()
	}
	for _, t := range c.scratch {
		t.Release()
	}
	c.made, c.scratch = nil, nil
	c.end()
}

// end tells the scope's hook the op ended (once).
func (c *call) end() {
	if h := c.hook; h != nil {
		c.hook = nil
		h.OpEnd(c.token)
	}
}

// bad panics with an *Error about the op's inputs.
func (c *call) bad(cause error, format string, args ...any) {
	c.abort()
	fail(c.op, cause, c.in, format, args...)
}

// recording reports whether the op records a node: the scope records and an input
// requires grad.
func (c *call) recording() bool {
	if !c.s.GradEnabled() {
		return false
	}
	for _, t := range c.in {
		if t.requiresGrad {
			return true
		}
	}
	return false
}

// record makes the op's node with backward rule r and makes out its output: it
// requires grad and holds the node's reference. An op that makes its rule there
// calls recordRule instead.
func (c *call) record(r rule, out *Tensor) { c.recordIn(new(function), c.op, c.in, r, out, 3) }

// recordRule is record with the rule r, stored with the op's function in one
// allocation; it returns the stored rule, which the op fills in (what it saves).
func recordRule[R any, P interface {
	*R
	rule
}](c *call, r R, out *Tensor) P {
	w := &withRule[R]{r: r}
	c.recordIn(&w.f, c.op, c.in, P(&w.r), out, 3)
	return &w.r
}

// withRule is a function and its rule in one allocation (recordRule).
type withRule[R any] struct {
	f function
	r R
}

// recordIn is record with the function f, zero, to fill in, for a node called name
// over the inputs in: an op that records its result as several ops' nodes would
// (LinearActivation) names each, and the saves that follow go to the last. skip is
// CaptureSite's count from here to the op's caller.
func (c *call) recordIn(f *function, name string, in []*Tensor, r rule, out *Tensor, skip int) {
	edges := append(c.edgeBuf[:0], make([]autograd.Edge, len(in))...)
	*f = function{name: name, r: r, hook: c.s.m.hook}
	f.in = append(f.inBuf[:0], make([]meta, len(in))...)
	metas := f.in
	for i, t := range in {
		metas[i] = meta{shape: t.shape, dt: t.dt}
		if !t.requiresGrad {
			continue
		}
		e, err := t.edge()
		if err != nil {
			c.bad(gradErr(err), "input %d", i)
		}
		edges[i] = e
	}
	spec := autograd.NodeSpec{Name: name, Seq: c.s.clock.Next(), Inputs: edges, Outputs: 1, Fn: f}
	if c.s.m.anomaly {
		spec.Site = autograd.CaptureSite(skip)
	}
	n, err := autograd.NewNode(spec)
	if err != nil {
		c.bad(gradErr(err), "recording the node")
	}
	out.node, out.requiresGrad = n, true
	c.node, c.fn = n, f
}

// save keeps t's data for the node's backward, through the scope's saved hooks. The
// leak report finds the saved handle through the rule's ledger.
func (c *call) save(t *Tensor) *autograd.Saved {
	if t.st.inference {
		c.bad(ErrGrad, "Inference tensors cannot be saved for backward. To work around you can make a clone to get "+
			"a normal tensor and use it in autograd (a %v %v made in inference mode: Clone it outside inference mode)", t.shape, t.dt)
	}
	at := c.at
	if at == nil { // recording in an internal scope (a hook's EnableGrad child)
		at = here()
	}
	var v *Tensor
	f := c.fn
	if f.saved == nil {
		// The first saved handle and the ledger in one allocation: nothing in it leads
		// back to f, so the cleanup still runs.
		first := new(firstSaved)
		v = first.w.init(nil, t.st, false, t.dt, t.shape, t.strides, t.offset, at)
		f.saved = first.l.init()
		runtime.AddCleanup(f, reportLedger, f.saved)
	} else {
		v = t.share(at)
	}
	f.saved.hs = append(f.saved.hs, v.h)
	sv, err := c.node.Save(v, c.s.m.hooks)
	if err != nil {
		c.bad(gradErr(err), "saving a tensor for backward")
	}
	if c.s.m.hooks != nil {
		if f.packed == nil {
			f.packed = new([]packed)
		}
		*f.packed = append(*f.packed, packed{sv, meta{t.shape, t.dt}})
	}
	return sv
}

// firstSaved is a node's first saved handle and the ledger of its saved handles
// (call.save).
type firstSaved struct {
	w withHandle
	l ledger
}

// saveCross saves, for a product of a and b, what the wanted gradients read: a when
// b needs a gradient, b when a does (nil otherwise).
func (c *call) saveCross(a, b *Tensor) (sa, sb *autograd.Saved) {
	if b.requiresGrad {
		sa = c.save(a)
	}
	if a.requiresGrad {
		sb = c.save(b)
	}
	return sa, sb
}

// done hands the outputs over: the op succeeded; its scratch is released, nothing
// else any more. The call goes back to calls: the op must not use it after.
func (c *call) done(out *Tensor) *Tensor {
	c.finishCache(out)
	for _, t := range c.scratch {
		t.Release()
	}
	c.end()
	*c = call{}
	calls.Put(c)
	return out
}

// calls recycles the records of ops that succeeded (done puts them back, cleared), so
// that a small op allocates none. A failed op's record is left to the garbage
// collector: the error being raised still reads its inputs.
var calls = sync.Pool{New: func() any { return new(call) }}

// edge is where gradients for t go: its producer's output, or its leaf accumulator.
func (t *Tensor) edge() (autograd.Edge, error) {
	if t.node != nil {
		return autograd.Edge{Node: t.node}, nil
	}
	if t.h.cell != nil {
		n, err := t.h.cell.accumulator()
		return autograd.Edge{Node: n}, err
	}
	return autograd.Edge{}, nil
}

// meta is what a node remembers of a forward input: its gradient's shape and dtype.
type meta struct {
	shape []int
	dt    dtype.DType
}

// rule is an op's backward rule, written beside its forward.
type rule interface {
	backward(b *bwd)
}

// function adapts a rule to autograd.Function.
type function struct {
	name string
	r    rule
	// hook is the OpHook of the forward op's scope, told of the rule's ops too.
	hook OpHook
	in   []meta
	// saved holds the handles the node saved (released when the node frees them), for
	// the leak report: the function is collected with its node, so a node never freed
	// (its outputs leaked) reports them. nil until the first save; written while the
	// op records.
	saved *ledger
	// packed is what each tensor saved through saved-tensor hooks was, which its
	// Unpack must give back: the rules read the bytes as that shape and type. nil
	// without hooks (the node then stores the tensor itself: most functions have
	// none, and keep no room for them); written while the op records.
	packed *[]packed
	inBuf  [3]meta // room for in
}

// packed is a tensor saved through hooks: its handle and what it was.
type packed struct {
	sv *autograd.Saved
	meta
}

// bwd is one run of a rule: a no-grad scope for everything it computes, the incoming
// gradient bound into it, and the input gradients it produces.
type bwd struct {
	ctx *autograd.Ctx
	f   *function
	s   *Scope    // the run's scope: &root.s
	g   *Tensor   // the gradient of the op's output
	out []*Tensor // per forward input: unowned handles for the engine
	// Room for out of the usual few inputs.
	outBuf [3]*Tensor
	root   internalRoot
	// lent holds the copies lend gives the rule; its room is kept from run to run.
	lent []Tensor
}

// bwds holds the records of finished runs of backward rules: a run holds nothing of
// its record once it returned (its scope closed, its gradients handed to the engine
// through the engine's own room, Ctx.Outputs), so the next run takes it, and a rule's
// run allocates nothing of its own.
var bwds = sync.Pool{New: func() any { return &bwd{lent: make([]Tensor, 0, 4)} }}

// internalRoots holds closed internal root scopes whose handles the program never
// sees (a backward's seed's): such a scope is done with once closed (what it handed
// over left it), so the next takes it.
var internalRoots = sync.Pool{New: func() any { return new(internalRoot) }}

// Backward runs the rule in a fresh no-grad scope and closes it: every temporary of the
// rule is released before the engine goes on. A *Error the rule panics with (out of
// memory) becomes the returned error.
func (f *function) Backward(ctx *autograd.Ctx, grads []autograd.Value) ([]autograd.Value, error) {
	b := bwds.Get().(*bwd)
	b.ctx, b.f = ctx, f
	b.root.init(true)
	b.s = &b.root.s
	b.s.m.hook = f.hook
	b.out = append(b.outBuf[:0], make([]*Tensor, len(f.in))...)
	// One output, so its gradient arrived: the engine's handle, placed in the rule's
	// scope while the rule runs (ops on it run there), owned by the engine.
	b.g = grads[0].(*Tensor)
	b.g.place = b.s
	err := Try(func() {
		defer b.s.Close()
		defer func() { b.g.place = nil }()
		f.r.backward(b)
	})
	vals := ctx.Outputs(len(b.out))
	for i, t := range b.out {
		if t == nil {
			continue
		}
		if err != nil {
			t.Release()
			continue
		}
		vals[i] = t
	}
	// Nothing of the run is in its scope now (released, or handed over in vals), and
	// nothing holds what it lent: the next run takes it all.
	clear(b.lent)
	*b = bwd{lent: b.lent[:0]}
	bwds.Put(b)
	if err != nil {
		return nil, err
	}
	return vals, nil
}

// packed is the function's tensors saved through hooks (none without hooks).
func (b *bwd) packed() []packed {
	if b.f.packed == nil {
		return nil
	}
	return *b.f.packed
}

// needs reports whether forward input i wants a gradient.
func (b *bwd) needs(i int) bool { return b.ctx.NeedsGrad(i) }

// saved returns a saved tensor, lent to the rule (nil for nil: a tensor the op did not
// save, as no wanted gradient reads it).
func (b *bwd) saved(sv *autograd.Saved) *Tensor {
	if sv == nil {
		return nil
	}
	v, err := sv.Get(b.ctx)
	if err != nil {
		panic(&Error{Op: b.f.name, Msg: "backward: reading a saved tensor", Err: gradErr(err)})
	}
	t, ok := v.(*Tensor)
	if !ok {
		panic(&Error{Op: b.f.name, Msg: fmt.Sprintf("backward: an unpack hook returned %T; return a *tensor.Tensor", v), Err: ErrGrad})
	}
	for _, p := range b.packed() {
		if p.sv == sv && (p.dt != t.dt || !sameShape(p.shape, t.shape)) {
			panic(&Error{Op: b.f.name, Msg: fmt.Sprintf("backward: an unpack hook returned %v %v for a tensor saved as %v %v; "+
				"give back the shape and type it packed", t.shape, t.dt, p.shape, p.dt), Err: ErrGrad})
		}
	}
	return b.lend(t)
}

// lend returns a handle the rule reads t through, t being a saved tensor (the node's,
// or one an unpack hook gave the run), which holds its storage until the rule
// returns: a copy of t placed in the rule's scope (ops on it run there) that holds no
// reference, shares t's handle (t's release is its own) and that nothing releases.
// The rule never releases it; what it returns of it, set binds. It lives in b.lent
// (a copy made before lent grew stays where it is).
func (b *bwd) lend(t *Tensor) *Tensor {
	t.live(b.f.name)
	b.lent = append(b.lent, Tensor{shape: t.shape, strides: t.strides, offset: t.offset, st: t.st, h: t.h, dt: t.dt, place: b.s})
	return &b.lent[len(b.lent)-1]
}

// set makes g the gradient of forward input i, if that input wants one. g may have the
// op output's (broadcast) shape and any floating type: set sums it down to the input's
// shape and casts it to the input's type.
func (b *bwd) set(i int, g *Tensor) {
	if g == nil || !b.needs(i) {
		return
	}
	m := b.f.in[i]
	if !sameShape(g.shape, m.shape) {
		g = g.SumTo(m.shape...)
	}
	if g.dt != m.dt {
		g = g.Cast(m.dt)
	}
	if g.scope != b.s {
		g = b.s.Bind(g)
	}
	b.out[i] = b.s.handOver(g)
}
