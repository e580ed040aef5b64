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

// Autocast returns a child scope of parent whose ops follow the autocast policy to dt
// (F16 or BF16): products run in dt, ops that need range or accuracy run in F32, the
// others in their inputs' types (see the package doc). The scope's children inherit
// it. When parent is itself inside an autocast scope, the new scope joins that
// region and shares its weight-cast cache; otherwise it starts a region, and closing it
// releases the cache.
func Autocast(parent *tensor.Scope, dt dtype.DType, opts ...Option) (*tensor.Scope, error) {
	switch {
	case parent == nil:
		return nil, fmt.Errorf("amp: Autocast to %v: no parent scope; make one with tensor.NewScope", dt)
	case dt != dtype.F16 && dt != dtype.BF16:
		return nil, fmt.Errorf("amp: Autocast to %v: only float16 and bfloat16 are autocast types; pass dtype.F16 or dtype.BF16", dt)
	}
	p := &policy{dt: dt, enabled: true, cache: true}
	for _, o := range opts {
		o(p)
	}
	if outer, ok := parent.Autocast().(*policy); ok {
		p.region = outer.region
		return parent.Child(tensor.WithAutocast(p)), nil
	}
	s := parent.Child(tensor.WithAutocast(p))
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

// Inputs casts the floating inputs of op as its class says (tensor.Autocast).
func (p *policy) Inputs(op string, in []*tensor.Tensor, cast func(*tensor.Tensor, dtype.DType) *tensor.Tensor) []*tensor.Tensor {
	if !p.enabled {
		return in
	}
	var to dtype.DType
	switch classOf(op) {
	case tensor.AutocastLower:
		to = p.dt
	case tensor.AutocastF32:
		to = dtype.F32
	default:
		return in
	}
	var home *tensor.Scope // the op's scope, found once a cached cast needs it
	for i, t := range in {
		if !eligible(t) || t.DType() == to {
			continue
		}
		if p.cache && to == p.dt && cacheable(t) {
			if c := p.region.cast(t, to); c != nil {
				if home == nil {
					home = innermost(in)
				}
				in[i] = home.Bind(c)
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

// innermost is the scope an op on in lands in: the deepest of the inputs' scopes
// (tensor checks that the others enclose it).
func innermost(in []*tensor.Tensor) *tensor.Scope {
	var s *tensor.Scope
	best := -1
	for _, t := range in {
		if d := depth(t.Scope()); d > best {
			s, best = t.Scope(), d
		}
	}
	return s
}

// depth is the number of scopes enclosing s (-1 for none).
func depth(s *tensor.Scope) int {
	d := -1
	for ; s != nil; s = s.Parent() {
		d++
	}
	return d
}
