package alloc

import "fmt"

// Lifetime is how long an allocation is expected to live (Tag.Lifetime). The planned
// policy serves parameters and optimizer state from pools of their own, so that they
// never sit between blocks that die within a step; saved activations and temporaries
// share the default pools, where a plan lays them out by their actual lifetimes.
// PyTorch's policy ignores the hint.
type Lifetime uint8

const (
	// LifetimeUnknown is no hint.
	LifetimeUnknown Lifetime = iota
	// LifetimeParameter is a model's parameter: it lives as long as the model.
	LifetimeParameter
	// LifetimeOptimizerState is an optimizer's state (moments, momentum buffers): as
	// long as the optimizer.
	LifetimeOptimizerState
	// LifetimeActivation is a tensor saved for backward: freed within the step.
	LifetimeActivation
	// LifetimeTemporary is freed soon after it is made.
	LifetimeTemporary
	numLifetimes
)

var lifetimeNames = [numLifetimes]string{"unknown", "parameter", "optimizer_state", "activation", "temporary"}

func (l Lifetime) String() string {
	if l < numLifetimes {
		return lifetimeNames[l]
	}
	return fmt.Sprintf("alloc.Lifetime(%d)", uint8(l))
}

// ParseLifetime returns the lifetime String names ("parameter", ...), and whether the
// name is one.
func ParseLifetime(s string) (Lifetime, bool) {
	for i, n := range lifetimeNames {
		if n == s {
			return Lifetime(i), true
		}
	}
	return 0, false
}

// longLived reports whether l outlives training steps.
func (l Lifetime) longLived() bool { return l == LifetimeParameter || l == LifetimeOptimizerState }
