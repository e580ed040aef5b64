package alloc

import "fmt"

// Policy is an allocation policy: where a request's memory comes from. The statistics,
// the memory history, snapshots, summaries, OOM errors and replay are the allocator's,
// the same under every policy; only the decisions differ.
type Policy uint8

const (
	// PolicyPyTorch decides as PyTorch 2.11's native caching allocator does, exactly:
	// a trace replayed through it matches PyTorch's statistics after every event
	// (testdata/oracle). The zero value.
	PolicyPyTorch Policy = iota
	// PolicyPlanned plans steady loops and stitches free pages (docs/allocator.md, "The
	// planned policy"): a request sequence that repeats is served from one arena laid
	// out offline, and pages are mapped by 2 MiB so that free whole pages anywhere can
	// back a request instead of new device memory.
	PolicyPlanned
	numPolicies
)

// policyNames are the values of the policy key.
var policyNames = [numPolicies]string{"pytorch", "planned"}

func (p Policy) String() string {
	if p < numPolicies {
		return policyNames[p]
	}
	return fmt.Sprintf("alloc.Policy(%d)", uint8(p))
}

// policy parses token i as a policy name.
func (p *configParser) policy(i int) (Policy, error) {
	t, err := p.tok(i, "a policy name")
	if err != nil {
		return 0, err
	}
	for k, name := range policyNames {
		if t == name {
			return Policy(k), nil
		}
	}
	return 0, p.errAt(i, "policy '%s' is unknown; want 'pytorch' (PyTorch's decisions, the default) or 'planned'", t)
}

// policy is the seam between the allocator and its decisions. The allocator calls it
// with mu held; it counts nothing itself except through the allocator's helpers, so
// that the statistics mean the same under every policy.
type policy interface {
	// malloc serves r, once completed stream events have been processed: the block it
	// returns is allocated and counted; a lack of memory is an *OOMError. Requests pass
	// by value: through an interface a pointer would make each one a heap allocation.
	malloc(r request) (*block, error)
	// free takes back allocated block b, just taken out of the pointer map; on an error
	// b is live again, back in the map.
	free(b *block) error
	// relieve is called on a miss whose new memory the device or the memory fraction
	// refused, before the cache is released: it makes room for r without giving memory
	// back, and reports whether it did (then the miss path looks again).
	relieve(r request) bool
	// settle is called before the allocator gives memory back (EmptyCache) and before a
	// capture starts: whatever the policy holds beyond the caching structures goes back
	// into them.
	settle()
}

// pytorchPolicy is PolicyPyTorch: PyTorch's malloc and free.
type pytorchPolicy struct{ a *Allocator }

func (p pytorchPolicy) malloc(r request) (*block, error) { return p.a.cachingMalloc(&r) }

func (p pytorchPolicy) free(b *block) error { return p.a.cachingFree(b) }

func (pytorchPolicy) relieve(request) bool { return false }

func (pytorchPolicy) settle() {}

// cachingMalloc is PyTorch's malloc: best fit among the cached blocks, else the miss
// path; the block found is split if worth it and counted.
func (a *Allocator) cachingMalloc(r *request) (*block, error) {
	b := a.getFreeBlock(r)
	if b == nil {
		var err error
		if b, err = a.mallocSlow(r); err != nil {
			return nil, err
		}
	}
	return a.allocFoundBlock(r, b), nil
}
