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
// node) reachable.
type handle struct {
	released atomic.Bool // set once by Release (or the owning scope's Close)
	st       *Storage    // the storage under the handle; set at creation
	// at is where the handle was created, shared by the handles one op made; set at
	// creation, or by watch for a handle made without one (in an internal scope, or
	// shared for the engine) when it is handed to the program.
	at *site
}

// here returns the call stack from the caller of here's caller, skipping skip more
// frames.
func here(skip int) *site {
	at := new(site)
	runtime.Callers(3+skip, at[:])
	return at
}

// watch registers the leak report for t, which no scope owns (any more): it runs when
// the garbage collector finds t, and reports it if it was not released. A handle a
// scope owns is not watched on its own: the scope's ledger reports it (an owned handle
// is reachable from its scope, so both are found together). A handle without a site
// records where it is handed out.
func watch(t *Tensor) {
	if t.h.at == nil {
		t.h.at = here(1)
	}
	runtime.AddCleanup(t, reportLeak, t.h)
}

// ledger is the leak report's view of the handles a scope owns (ledger.hs[i] is the
// handle of the scope's owned[i]) or a node saved. Guarded by the scope's mu while the
// scope is in use, written by the op recording the node; reportLedger reads it once
// the scope (the node's rule) is unreachable.
type ledger struct {
	hs  []*handle
	buf [2]*handle // room for the first handles (a node saves one or two)
}

func newLedger() *ledger {
	l := &ledger{}
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

// Leak is one allocation site of handles the garbage collector found unreleased. Their
// device memory was not freed (a leak is reported, never repaired): Release every
// handle, or close its scope.
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
}

type leakKey struct {
	at     site
	device string
}

// leaks accumulates the report; only reportLeak writes it.
var leaks struct {
	mu     sync.Mutex
	bySite map[leakKey]*Leak // guarded by mu
}

func reportLeak(h *handle) {
	if h.released.Load() {
		return
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
// never closed. Run runtime.GC (twice: cleanups run after the cycle that found them)
// before asking.
func Leaks() []Leak {
	// Stacks that differ only inside the package (an op's result and what its node
	// saved, say) show as one site.
	type key struct{ site, device string }
	merged := map[key]*Leak{}
	var out []Leak
	leaks.mu.Lock()
	for _, l := range leaks.bySite {
		k := key{l.Site, l.Device}
		if m := merged[k]; m != nil {
			m.Count += l.Count
			m.Bytes += l.Bytes
			continue
		}
		c := *l
		merged[k] = &c
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

const selfPkg = "github.com/subletml/sublet/tensor."

// siteString formats pcs, dropping the package's own frames at the top.
func siteString(pcs []uintptr) string {
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
	return site.String()
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
