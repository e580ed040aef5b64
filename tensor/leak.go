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

// handle is the part of a Tensor the leak report needs. It is a separate object so
// that the cleanup registered on the Tensor can read it without keeping the Tensor
// reachable.
type handle struct {
	released atomic.Bool // set once by Release (or the owning scope's Close)
	bytes    int64       // the storage's size; set at creation
	device   string      // set at creation
	pcs      [siteDepth]uintptr
}

// track records where t is being created and registers the leak report for when the GC
// finds t unreleased.
func track(t *Tensor) {
	h := &handle{bytes: t.st.size, device: t.st.dev.Name()}
	runtime.Callers(3, h.pcs[:])
	t.h = h
	runtime.AddCleanup(t, reportLeak, h)
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
	pcs    [siteDepth]uintptr
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
	k := leakKey{h.pcs, h.device}
	l := leaks.bySite[k]
	if l == nil {
		l = &Leak{Site: siteString(h.pcs[:]), Device: h.device}
		leaks.bySite[k] = l
	}
	l.Count++
	l.Bytes += h.bytes
}

// Leaks returns the handles found leaked so far, by allocation site, most bytes first.
// A handle is found when the garbage collector collects it unreleased, so run
// runtime.GC (twice: cleanups run after the cycle that found them) before asking.
func Leaks() []Leak {
	leaks.mu.Lock()
	out := make([]Leak, 0, len(leaks.bySite))
	for _, l := range leaks.bySite {
		out = append(out, *l)
	}
	leaks.mu.Unlock()
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
