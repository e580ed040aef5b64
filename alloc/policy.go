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

// The seam between the allocator and its decisions: Allocator.plan is nil under
// PyTorch's policy, whose decisions are the allocator's own code path (cachingMalloc,
// cachingFree, mallocSlow); under the planned policy the allocator hands it, with mu
// held, each request (malloc: the block returned is allocated and counted), each free
// (free: b is out of the pointer map; on an error it is back in), a miss whose memory
// the device or the fraction refused (relieve: it makes room without giving memory
// back and reports whether it did), and the moments it wants what the policy holds back
// in the caching structures (settle: before EmptyCache gives memory back and before a
// capture). The planned policy counts nothing itself but through the allocator's
// helpers, so that the statistics mean the same under both. A nil check rather than an
// interface: through one, each request would escape to the heap, and PyTorch's path
// would pay a dynamic call.

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
