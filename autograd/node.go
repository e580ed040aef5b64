package autograd

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// Kind says how the engine treats a node.
type Kind uint8

const (
	// KindOp is a recorded op: backward releases it (unless the graph is
	// retained) and a later backward through it is an error.
	KindOp Kind = iota
	// KindAccumulate is a leaf's gradient accumulator: it has no inputs and
	// one output slot, runs before other ready nodes, is never released by
	// backward and lives as long as its references (the leaf's, the edges').
	KindAccumulate
)

func (k Kind) String() string {
	switch k {
	case KindOp:
		return "op"
	case KindAccumulate:
		return "accumulate"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Edge names the producer of a forward input: output Slot of Node. The zero
// Edge stands for an input that does not require grad.
type Edge struct {
	Node *Node
	Slot int
}

// Function is a node's backward rule, implemented beside the op's forward.
type Function interface {
	// Backward receives one gradient per output slot of the node (nil where
	// none arrived; at least one is non-nil) and returns one per input (nil
	// where there is none; Ctx.NeedsGrad says which are wanted). grads stay
	// the engine's and are released when Backward returns, so a gradient
	// passed through unchanged is returned as a new reference; a Function may
	// instead take one by setting its entry to nil, and then owns it (a leaf's
	// accumulator keeps the first gradient it is given so). The returned
	// values become the engine's, also when an error is returned.
	Backward(c *Ctx, grads []Value) ([]Value, error)
}

// Clock hands out sequence numbers, increasing in creation order. The tensor
// package keeps one per root scope; numbers from different clocks are not
// comparable, which costs only the ordering heuristic, never correctness.
type Clock struct {
	last atomic.Uint64
}

// Next returns the next sequence number (the first is 1).
func (c *Clock) Next() uint64 { return c.last.Add(1) }

// NodeSpec describes a node to NewNode.
type NodeSpec struct {
	Name    string   // op name, e.g. "Mul"; every error names it
	Kind    Kind     // KindOp or KindAccumulate
	Seq     uint64   // from the graph's Clock; orders ready nodes
	Inputs  []Edge   // one per forward input, the zero Edge where no grad is needed
	Outputs int      // number of output slots, at least 1 (exactly 1 for KindAccumulate)
	Fn      Function // the backward rule
	Site    Site     // where the op was created; recorded under anomaly mode
}

// Node is one recorded op or one leaf accumulator.
type Node struct {
	// Set by NewNode and never changed (kind and outputs are with the small fields
	// below).
	name   string
	seq    uint64
	site   *Site // nil without one (outside anomaly mode)
	inputs []Edge

	// refs counts the references (see the package doc); the node is freed
	// when it drops to zero and never comes back. Changed only by CAS.
	refs   atomic.Int32
	nsaved int32 // guarded by mu; Saves so far (numbers them)

	mu       sync.Mutex
	kind     Kind       // set by NewNode, never changed
	released bool       // guarded by mu; backward consumed the node
	outputs  int32      // set by NewNode, never changed
	fn       Function   // guarded by mu; nil once freed
	saved    []*Saved   // guarded by mu; nil once released or freed
	hooks    *nodeHooks // guarded by mu; nil until the first hook, and once freed

	// Room for the usual few inputs (three: a linear layer's) and saved values, so
	// that recording an op allocates neither. savedRoom holds the first Saves'
	// handles (written under mu by Save, each once).
	inBuf     [3]Edge
	savedBuf  [2]*Saved
	savedRoom [2]Saved
}

// NewNode records a node. It takes a reference on every producer in
// spec.Inputs and returns the node holding one reference, which the caller
// owns and gives back with Release.
func NewNode(spec NodeSpec) (*Node, error) {
	if err := spec.check(); err != nil {
		return nil, err
	}
	n := &Node{
		name:    spec.Name,
		kind:    spec.Kind,
		seq:     spec.Seq,
		outputs: int32(spec.Outputs),
		fn:      spec.Fn,
	}
	if len(spec.Site) > 0 {
		site := spec.Site
		n.site = &site
	}
	n.inputs = append(n.inBuf[:0], spec.Inputs...)
	n.refs.Store(1)
	for i, e := range n.inputs {
		if e.Node == nil {
			continue
		}
		if err := e.Node.retain(); err != nil {
			for _, done := range n.inputs[:i] {
				if done.Node != nil {
					err = errors.Join(err, done.Node.Release())
				}
			}
			return nil, fmt.Errorf("autograd: NewNode %s: input %d: %w", spec.Name, i, err)
		}
	}
	return n, nil
}

func (s *NodeSpec) check() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("autograd: NewNode %q: "+format, append([]any{s.Name}, args...)...)
	}
	switch {
	case s.Name == "":
		return bad("empty name; give the op name, errors use it")
	case s.Fn == nil:
		return bad("nil Fn; every node needs its backward rule")
	case s.Outputs < 1:
		return bad("%d outputs; a node has at least 1", s.Outputs)
	case s.Kind != KindOp && s.Kind != KindAccumulate:
		return bad("unknown kind %v", s.Kind)
	case s.Kind == KindAccumulate && (len(s.Inputs) != 0 || s.Outputs != 1):
		return bad("accumulate node with %d inputs and %d outputs; it has 0 and 1",
			len(s.Inputs), s.Outputs)
	}
	for i, e := range s.Inputs {
		if e.Node != nil && (e.Slot < 0 || e.Slot >= int(e.Node.outputs)) {
			return bad("input %d: slot %d of %s, which has %d outputs", i, e.Slot, e.Node, e.Node.outputs)
		}
	}
	return nil
}

// Name returns the op name.
func (n *Node) Name() string { return n.name }

// Kind returns the node's kind.
func (n *Node) Kind() Kind { return n.kind }

// Seq returns the sequence number.
func (n *Node) Seq() uint64 { return n.seq }

// Site returns where the node was created (empty unless recorded).
func (n *Node) Site() Site {
	if n.site == nil {
		return nil
	}
	return *n.site
}

// NumInputs returns the number of forward inputs (input edges).
func (n *Node) NumInputs() int { return len(n.inputs) }

// Input returns the edge of forward input i.
func (n *Node) Input(i int) Edge { return n.inputs[i] }

// NumOutputs returns the number of output slots.
func (n *Node) NumOutputs() int { return int(n.outputs) }

// String names the node in errors: op name and sequence number.
func (n *Node) String() string { return fmt.Sprintf("%s#%d", n.name, n.seq) }

// Refs returns the number of references held now.
func (n *Node) Refs() int { return int(n.refs.Load()) }

// Freed reports whether the last reference was released.
func (n *Node) Freed() bool { return n.refs.Load() == 0 }

// Released reports whether a backward consumed the node (released its saved
// values); a later backward through it fails with ErrBackwardTwice.
func (n *Node) Released() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.released
}

// Retain takes one more reference (for one more handle to an output).
func (n *Node) Retain() error {
	if err := n.retain(); err != nil {
		return fmt.Errorf("autograd: %w", err)
	}
	return nil
}

// retain is Retain with an error for callers that name the package themselves.
func (n *Node) retain() error {
	for {
		r := n.refs.Load()
		if r <= 0 {
			return freed(n, "Retain")
		}
		if n.refs.CompareAndSwap(r, r+1) {
			return nil
		}
	}
}

// Release drops one reference. Dropping the last frees the node: its saved
// values are released and its edges' references dropped, which frees every
// producer nothing else references. Releasing more references than were
// taken returns ErrFreed.
func (n *Node) Release() error {
	var errs []error
	var room [8]*Node // what a chain of sole producers needs
	stack := append(room[:0], n)
	for len(stack) > 0 {
		m := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		last, err := m.drop()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !last {
			continue
		}
		for _, s := range m.free() {
			s.Release()
		}
		for i := len(m.inputs) - 1; i >= 0; i-- {
			if p := m.inputs[i].Node; p != nil {
				stack = append(stack, p)
			}
		}
	}
	return errors.Join(errs...)
}

// drop removes one reference and reports whether it was the last.
func (n *Node) drop() (last bool, err error) {
	for {
		r := n.refs.Load()
		if r <= 0 {
			return false, fmt.Errorf("autograd: %w", freed(n, "Release"))
		}
		if n.refs.CompareAndSwap(r, r-1) {
			return r == 1, nil
		}
	}
}

// free clears what a freed node holds and returns its saved values, which
// the caller releases outside the lock.
func (n *Node) free() []*Saved {
	n.mu.Lock()
	defer n.mu.Unlock()
	saved := n.saved
	n.saved, n.fn, n.hooks = nil, nil, nil
	return saved
}
