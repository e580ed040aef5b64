package amp

import (
	"sync"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
)

// region is one outermost autocast scope with the autocast scopes nested in it, and its
// weight-cast cache: the low-precision casts of the F32 weights its ops used, made once
// and reused (Apex's heuristic, kept by PyTorch). The cache lives as long as the
// outermost scope: closing it releases every cast (the graph keeps those a recorded op
// saved until backward releases them).
type region struct {
	mu sync.Mutex
	// casts makes the cached casts: an Aside child of the outermost scope (ops are
	// never routed into it) that records the graph, whatever the scope of the op
	// asking, so a cast first made under NoGrad still carries the gradient to its
	// weight when a recording op reuses it (PyTorch's issues 65766 and 112583; docs/autocast.md). It shares
	// the outermost scope's clock, so in backward each cast runs right after the layer
	// that used it, as in PyTorch. Nil once the region closed. Guarded by mu.
	casts *tensor.Scope
	// entries holds the casts by weight and type; guarded by mu.
	entries map[cacheKey]cacheEntry
}

// cacheKey is a weight (cacheable weights cover their storage exactly, so the storage
// names the weight, whichever handle to it an op gets) and the type it was cast to.
type cacheKey struct {
	weight *tensor.Storage
	dt     dtype.DType
}

// cacheEntry is a cached cast (owned by region.casts) and the weight's version it was
// made from: an in-place update of the weight (an optimizer step inside the region)
// makes it stale, and the next use casts again. A backward through the cast does not
// use it up: its node saved nothing, and the engine runs such a node in any number of
// backwards, so every graph built on it in the region reaches the weight.
type cacheEntry struct {
	cast    *tensor.Tensor
	version uint64
}

// newRegion starts the region of the outermost autocast scope s.
func newRegion(s *tensor.Scope) *region {
	r := &region{casts: s.Aside(tensor.EnableGrad()), entries: map[cacheKey]cacheEntry{}}
	// s closes its children (r.casts, releasing every cached cast) before its OnClose
	// callbacks run.
	s.OnClose(r.close)
	return r
}

// cacheable reports whether t's low-precision cast may be cached: an F32 leaf that
// requires grad (a weight) and covers its storage exactly (not a view), as PyTorch's
// rule says. A cached cast is never a leaf, so it is never cached again.
func cacheable(t *tensor.Tensor) bool {
	return t.DType() == dtype.F32 && t.RequiresGrad() && t.IsLeaf() && t.Offset() == 0 &&
		t.IsContiguous() && t.Bytes() == t.Storage().Size()
}

// cast returns the cached cast of weight w to dt, making it on first use (or when w
// changed since), or nil once the region closed.
func (r *region) cast(w *tensor.Tensor, dt dtype.DType) *tensor.Tensor {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.casts == nil {
		return nil
	}
	k := cacheKey{w.Storage(), dt}
	e, ok := r.entries[k]
	if ok && e.version == w.Version() {
		return e.cast
	}
	if ok {
		e.cast.Release()
	}
	b := r.casts.Bind(w)
	defer b.Release()
	e = cacheEntry{cast: b.Cast(dt), version: w.Version()}
	r.entries[k] = e
	return e.cast
}

// close forgets the cached casts; the outermost scope has released them by closing
// r.casts.
func (r *region) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.casts, r.entries = nil, nil
}

// cacheBytes is the bytes of the cached casts (for tests and reports).
func (r *region) cacheBytes() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var n int64
	for _, e := range r.entries {
		n += e.cast.Bytes()
	}
	return n
}

// CacheBytes is the bytes of the weight casts the autocast region of s caches now: 0
// when s is not an autocast scope or its region closed. Casts a recorded op saved for
// backward live on in the graph after the region closes; they are not counted here
// then.
func CacheBytes(s *tensor.Scope) int64 {
	p, ok := s.Autocast().(*policy)
	if !ok {
		return 0
	}
	return p.region.cacheBytes()
}
