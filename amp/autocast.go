package amp

import (
	"fmt"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
)

// Option configures an autocast scope.
type Option func(*policy)

// Enabled turns autocast on (the default) or off in the scope. A disabled scope nested
// in an enabled one runs ops in their inputs' types (cast F16 results of the outer
// scope explicitly where F32 is needed) and keeps the outer region's cache for an
// enabled scope nested inside it again (torch.autocast(enabled=False)).
func Enabled(on bool) Option { return func(p *policy) { p.enabled = on } }

// CacheEnabled turns the weight-cast cache on (the default) or off for the ops of the
// scope (torch.autocast(cache_enabled=…)). Without it every use of a weight casts it
// again.
func CacheEnabled(on bool) Option { return func(p *policy) { p.cache = on } }

// Autocast returns a region of parent (tensor.Scope.With) whose ops follow the autocast
// policy to dt (F16 or BF16): products run in dt, ops that need range or accuracy run
// in F32, the others in their inputs' types (see the package doc). Like PyTorch's
// `with torch.autocast(...)`, it owns nothing: while it is parent's only open child,
// the ops on parent's tensors run in it, and their results belong to parent's owner,
// so a loss computed inside is used (Backward) after Close without Keep. The scope's
// children inherit the policy. When parent is itself inside an autocast scope, the
// new scope joins that region and shares its weight-cast cache; otherwise it starts a
// region, and closing it releases the cache.
func Autocast(parent *tensor.Scope, dt dtype.DType, opts ...Option) (*tensor.Scope, error) {
	switch {
	case parent == nil:
		return nil, fmt.Errorf("amp: Autocast to %v: no parent scope; make one with tensor.NewScope", dt)
	case !dt.Is16():
		return nil, fmt.Errorf("amp: Autocast to %v: only float16 and bfloat16 are autocast types; pass dtype.F16 or dtype.BF16", dt)
	}
	p := &policy{dt: dt, enabled: true, cache: true}
	for _, o := range opts {
		o(p)
	}
	if outer, ok := parent.Autocast().(*policy); ok {
		p.region = outer.region
		return parent.With(tensor.WithAutocast(p)), nil
	}
	s := parent.With(tensor.WithAutocast(p))
	p.region = newRegion(s)
	return s, nil
}

// policy is the tensor.Autocast of one autocast scope. Its fields are set when the
// scope is made and never change; region is shared by the scopes nested in one
// outermost autocast scope.
type policy struct {
	dt      dtype.DType // F16 or BF16
	enabled bool
	cache   bool // use the region's weight-cast cache
	region  *region
}

// OutputType gives the AutocastF32Out ops an F32 result when their input is eligible
// (tensor.AutocastOutput); they then do not call Inputs.
func (p *policy) OutputType(op string, in []*tensor.Tensor) (dtype.DType, bool) {
	if !p.enabled || classOf(op) != tensor.AutocastF32Out || !eligible(in[0]) {
		return dtype.Invalid, false
	}
	return dtype.F32, true
}

// Inputs casts the floating inputs of op as its class says (tensor.Autocast). In
// inference mode nothing is cached nor taken from the cache, as PyTorch does since its
// issue 158232: a cast made there could not serve a recording forward later.
func (p *policy) Inputs(s *tensor.Scope, op string, in []*tensor.Tensor, cast func(*tensor.Tensor, dtype.DType) *tensor.Tensor) []*tensor.Tensor {
	if !p.enabled {
		return in
	}
	var to dtype.DType
	switch classOf(op) {
	case tensor.AutocastLower:
		to = p.dt
	case tensor.AutocastF32:
		to = dtype.F32
	case tensor.AutocastBanned:
		panic(tensor.AutocastBannedError(op))
	default:
		return in
	}
	for i, t := range in {
		if !eligible(t) || t.DType() == to {
			continue
		}
		if p.cache && to == p.dt && cacheable(t) && !s.InferenceMode() {
			// The op reads the cached cast as it is (what it saves holds its own
			// reference), so nothing of the op's is left in the region.
			if c := p.region.cast(t, to); c != nil {
				in[i] = c
				continue
			}
		}
		in[i] = cast(t, to)
	}
	return in
}

// eligible reports whether autocast may cast t: a floating tensor other than F64, as
// PyTorch's is_autocast_eligible (float64 is left alone: asking for it is explicit).
func eligible(t *tensor.Tensor) bool { return t.DType().IsFloat() && t.DType() != dtype.F64 }
