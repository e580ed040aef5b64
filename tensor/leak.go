package tensor

import (
	"cmp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/subletml/sublet/autograd"
)

// siteDepth is how many callers a handle records: enough to get past the package's own
// frames to the caller's op and its caller.
const siteDepth = 16

// site is where handles were created: the return addresses of the call stack,
// symbolized only when one of them is reported as leaked.
type site [siteDepth]uintptr

// handle is the part of a Tensor the leak report needs. It is a separate object so
// that the cleanup watching the Tensor, or the ledger of the scope owning it (of the
// node that saved it), can read it without keeping the Tensor (or the scope, or the
// node) reachable; a handle that none of them reads comes in one allocation with its
// Tensor (withHandle) until one does (ownHandle).
type handle struct {
	released atomic.Bool // set once by Release (or the owning scope's Close)
	ownsCell bool        // the handle releases cell (see cell)
	st       *Storage    // the storage under the handle; set at creation
	// at is where the handle was created (interned: shared by every handle made at
	// the same call stack); set at creation, or by watch for a handle made without
	// one (in an internal scope, or shared for the engine) when it is handed to the
	// program.
	at *site
	// cell holds the gradient of a leaf that requires grad (shared with the handles
	// Bind makes of it) or the retained gradient of a non-leaf (RetainGrad), nil for
	// none. The handle that owns it (ownsCell) releases it, and its gradient, which no
	// cleanup watches, is reported leaked with that handle. cell and ownsCell are
	// written by the goroutine using the Tensor (SetRequiresGrad, RetainGrad).
	cell *gradCell
}

// here returns the call stack from here's caller outwards (the package's frames at its
// top are not printed), interned.
func here() *site {
	var pcs site
	callers(pcs[:])
	return intern(&pcs)
}

// siteBits sizes the table intern keeps, 1<<siteBits slots: more than the distinct op
// call stacks of a model's step, so that a training loop finds each in it.
const siteBits = 12

// sites is intern's table: sites[i] is the last call stack interned whose hash picks
// slot i, nil before the first. A site is never changed once stored, so readers need
// no lock; a slot another stack took over is replaced, not chained.
var sites [1 << siteBits]atomic.Pointer[site]

// intern returns a site equal to pcs that stays unchanged: the one in the table when
// an op at the same call stack ran before (a training loop runs the same ops from the
// same places every step, and an op then allocates no site), else a new one, stored
// in the table. Handles compare sites by value, never by address, so a stack stored
// twice (two goroutines, or a slot taken over in between) reports as one.
func intern(pcs *site) *site {
	slot := &sites[(wordHash(pcs[:], 0)*0x9e3779b97f4a7c15)>>(64-siteBits)]
	if p := slot.Load(); p != nil && *p == *pcs {
		return p
	}
	p := new(site)
	*p = *pcs
	slot.Store(p)
	return p
}

// watch registers the leak report for t, which no scope owns (any more): it runs when
// the garbage collector finds t, and reports it if it was not released. A handle a
// scope owns is not watched on its own: the scope's ledger reports it (an owned handle
// is reachable from its scope, so both are found together). A handle without a site
// records where it is handed out.
func watch(t *Tensor) {
	t.ownHandle()
	if t.h.at == nil {
		t.h.at = here()
	}
	runtime.AddCleanup(t, reportLeak, t.h)
}

// ledger is the leak report's view of the handles a scope owns (ledger.hs[i] is the
// handle of the scope's owned[i]) or a node saved. Guarded by the scope's mu while the
// scope is in use, written by the op recording the node; reportLedger reads it once
// the scope's tree (the node's rule) is unreachable.
type ledger struct {
	hs  []*handle
	buf [ledgerRoom]*handle // room for the first handles
	// pos is a scope's ledger's index in its tree's ledgers; guarded by the tree's mu.
	pos int
}

// ledgerRoom is a ledger's inline room: a node saves one or two handles.
const ledgerRoom = 2

func newLedger() *ledger { return new(ledger).init() }

// init makes l, zero, an empty ledger, and returns it.
func (l *ledger) init() *ledger {
	l.hs = l.buf[:0]
	return l
}

// reportLedger reports the unreleased handles of a scope the garbage collector found
// unclosed, or of a node that was never freed.
func reportLedger(l *ledger) {
	for _, h := range l.hs {
		reportLeak(h)
	}
}

// tree is the leak report's view of a root scope and its descendants: the ledgers of
// those that are open and own handles. One cleanup, on the root, reads it: an open
// scope is among its parent's children, so it becomes unreachable only with its root,
// and a closed one owns nothing. A scope opened and closed per step or per layer then
// registers no cleanup, and its ledger is a closed scope's (spareLedgers).
type tree struct {
	mu      sync.Mutex
	ledgers []*ledger // guarded by mu; ledgers[l.pos] is l
}

// spareLedgers holds the ledgers of closed scopes, empty, with the room they grew.
var spareLedgers sync.Pool

// open gives a scope of the tree, about to own its first handle, a ledger.
func (tr *tree) open() *ledger {
	l, _ := spareLedgers.Get().(*ledger)
	if l == nil {
		l = newLedger()
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	l.pos = len(tr.ledgers)
	tr.ledgers = append(tr.ledgers, l)
	return l
}

// close takes l, the ledger of a scope that closed and released its handles, out of
// the tree and gives it back to spareLedgers.
func (tr *tree) close(l *ledger) {
	tr.mu.Lock()
	last := len(tr.ledgers) - 1
	moved := tr.ledgers[last]
	tr.ledgers[l.pos], moved.pos = moved, l.pos
	tr.ledgers[last] = nil
	tr.ledgers = tr.ledgers[:last]
	tr.mu.Unlock()
	clear(l.hs)
	l.hs = l.hs[:0]
	spareLedgers.Put(l)
}

// reportTree reports the unreleased handles of the open scopes of a tree whose root
// the garbage collector found unclosed.
func reportTree(tr *tree) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, l := range tr.ledgers {
		reportLedger(l)
	}
}

// Leak is one allocation site of handles the garbage collector found unreleased. Their
// device memory was not freed (a leak is reported, never repaired): Release every
// handle, or close its scope. With Growing set it is growth instead: see Leaks.
type Leak struct {
	// Site is the call stack that created the handles, innermost first, starting at the
	// first frame outside package tensor.
	Site string
	// Device names the device of their storage.
	Device string
	// Count is the number of handles; Bytes the sum of their storages' sizes (a storage
	// shared by several leaked views counts once per view).
	Count int
	Bytes int64
	// Growing marks growth rather than collected handles: an open scope owned Count
	// handles (Bytes) made at Site when a step ended, having gained some from there in
	// each of its last two steps.
	Growing bool
}

type leakKey struct {
	at     site
	device string
}

// siteKey is a site as reported: stacks that differ only inside the package (an op's
// result and what its node saved, say) show as one.
type siteKey struct{ site, device string }

// leaks accumulates the report; only reportLeak and reportGrowth write it.
var leaks struct {
	mu     sync.Mutex
	bySite map[leakKey]*Leak // guarded by mu
	// growth is the latest growth seen at each site; guarded by mu.
	growth map[siteKey]*Leak
}

func reportLeak(h *handle) {
	if h.released.Load() {
		return
	}
	if c := h.cell; c != nil && h.ownsCell {
		c.mu.Lock()
		g := c.grad
		c.mu.Unlock()
		if g != nil {
			reportLeak(g.h)
		}
	}
	leaks.mu.Lock()
	defer leaks.mu.Unlock()
	if leaks.bySite == nil {
		leaks.bySite = make(map[leakKey]*Leak)
	}
	var at site
	if h.at != nil {
		at = *h.at
	}
	k := leakKey{at, h.st.dev.Name()}
	l := leaks.bySite[k]
	if l == nil {
		l = &Leak{Site: siteString(at[:]), Device: k.device}
		leaks.bySite[k] = l
	}
	l.Count++
	l.Bytes += h.st.size
}

// Leaks returns the handles found leaked so far, by allocation site, most bytes first.
// A handle is found when the garbage collector collects it unreleased: a handle no scope
// owns when it is unreachable, one a scope owns when that scope is unreachable and was
// never closed, a gradient with the handle that owns it (its leaf's, or the one that
// retained it). Run runtime.GC (twice: cleanups run after the cycle that found them)
// before asking.
//
// Leaks also reports growth (Growing set), the memory a training loop loses when it
// keeps each step's tensors in a long-lived scope: a step of a scope ends at each
// Backward from a tensor the scope, or a scope inside it, owns; when a scope gained
// handles made at one site in each of its last two steps and still owns them, the site
// is reported with what the scope owns from there. A loop with no scope per step (see
// the package doc), factories or Keep into the long-lived scope inside the loop, and
// several backwards in one scope are found so, at the second step: each Backward
// checks the scopes enclosing its tensor, comparing the handles they own.
func Leaks() []Leak {
	merged := map[siteKey]*Leak{}
	var out []Leak
	leaks.mu.Lock()
	for _, l := range leaks.bySite {
		k := siteKey{l.Site, l.Device}
		if m := merged[k]; m != nil {
			m.Count += l.Count
			m.Bytes += l.Bytes
			continue
		}
		c := *l
		merged[k] = &c
	}
	for _, l := range leaks.growth {
		out = append(out, *l)
	}
	leaks.mu.Unlock()
	for _, l := range merged {
		out = append(out, *l)
	}
	slices.SortFunc(out, func(a, b Leak) int {
		return cmp.Or(cmp.Compare(b.Bytes, a.Bytes), cmp.Compare(a.Site, b.Site))
	})
	return out
}

// endStep ends a step of s and of every scope enclosing it that owns handles: each
// reports the sites it grew at (see Leaks).
func (s *Scope) endStep() {
	for sc := s; sc != nil; sc = sc.parent {
		if sc.owner == sc && !sc.internal {
			sc.countStep()
		}
	}
}

// countStep ends a step of s and reports the allocation sites of which s owns handles
// born in both this step and the one before.
func (s *Scope) countStep() {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.steps
	s.steps++
	if now == 0 {
		return
	}
	var before map[site]bool
	for _, t := range s.owned {
		if t.born == now-1 && t.h.at != nil {
			if before == nil {
				before = map[site]bool{}
			}
			before[*t.h.at] = true
		}
	}
	grew := map[site]bool{}
	for _, t := range s.owned {
		if t.born == now && t.h.at != nil && before[*t.h.at] {
			grew[*t.h.at] = true
		}
	}
	if len(grew) == 0 {
		return
	}
	type count struct {
		n     int
		bytes int64
	}
	byStack := map[leakKey]*count{}
	for _, t := range s.owned {
		if t.h.at == nil || !grew[*t.h.at] {
			continue
		}
		k := leakKey{*t.h.at, t.st.dev.Name()}
		c := byStack[k]
		if c == nil {
			c = &count{}
			byStack[k] = c
		}
		c.n++
		c.bytes += t.st.size
	}
	found := map[siteKey]*Leak{}
	for k, c := range byStack {
		sk := siteKey{siteString(k.at[:]), k.device}
		l := found[sk]
		if l == nil {
			l = &Leak{Site: sk.site, Device: sk.device, Growing: true}
			found[sk] = l
		}
		l.Count += c.n
		l.Bytes += c.bytes
	}
	leaks.mu.Lock()
	defer leaks.mu.Unlock()
	if leaks.growth == nil {
		leaks.growth = make(map[siteKey]*Leak)
	}
	for k, l := range found {
		leaks.growth[k] = l
	}
}

const selfPkg = "github.com/subletml/sublet/tensor."

// siteString formats pcs, dropping the package's own frames at the top.
func siteString(pcs []uintptr) string { return frames(pcs).String() }

// firstFrame is the first frame of pcs outside the package, "" when there is none.
func firstFrame(pcs []uintptr) string {
	if fs := frames(pcs); len(fs) > 0 {
		return strings.TrimSpace(fs[:1].String())
	}
	return ""
}

// frames symbolizes pcs, dropping the package's own frames at the top.
func frames(pcs []uintptr) autograd.Site {
	frames := runtime.CallersFrames(pcs)
	var site autograd.Site
	inside := true
	for {
		f, more := frames.Next()
		if f.Function != "" {
			if inside && strings.HasPrefix(f.Function, selfPkg) {
				if !more {
					break
				}
				continue
			}
			inside = false
			site = append(site, autograd.Frame{Function: trimModule(f.Function), File: shortFile(f.File), Line: f.Line})
		}
		if !more {
			break
		}
	}
	return site
}

func trimModule(fn string) string {
	if i := strings.LastIndexByte(fn, '/'); i >= 0 {
		return fn[i+1:]
	}
	return fn
}

func shortFile(file string) string {
	i := strings.LastIndexByte(file, '/')
	if i < 0 {
		return file
	}
	if j := strings.LastIndexByte(file[:i], '/'); j >= 0 {
		return file[j+1:]
	}
	return file
}
