package autograd

// Value is an opaque counted reference the graph moves around: a gradient, a
// saved tensor, a packed object. Release drops the reference; whoever owns a
// Value (the engine, a Saved, a hook) calls it exactly once.
type Value interface {
	Release()
}

// Arith is the gradient arithmetic the caller supplies to Backward.
type Arith interface {
	// Add returns a+b. It owns a and b from the call on, whatever it
	// returns: it may write the sum into a and return a, and it releases
	// every operand it does not return.
	Add(a, b Value) (Value, error)
	// HasNonFinite reports whether v holds a NaN or an Inf. Backward calls
	// it only under Options.DetectAnomaly; v stays the engine's.
	HasNonFinite(v Value) (bool, error)
}

// Versioned is implemented by Values whose contents can change in place (a
// tensor handle whose storage has a version counter). Save records the
// version of such a value stored without hooks, and Get fails with
// ErrModifiedInPlace if it changed since.
type Versioned interface {
	Version() uint64
}
