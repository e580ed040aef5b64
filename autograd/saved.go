package autograd

import (
	"fmt"
	"sync"
)

// SavedHooks transform what a node saves. The tensor package keeps the pair
// in effect in its scope and passes it to every Save made there.
type SavedHooks interface {
	// Pack takes v (it owns v from the call on, also on error) and returns
	// what the graph stores instead; the graph releases that object when the
	// saved value is released. A checkpoint returns a placeholder and
	// releases v; an offload copies v to host memory and releases v.
	Pack(v Value) (Value, error)
	// Unpack returns a value equal to the one packed. p stays the graph's:
	// Unpack runs once per Get in every backward that reaches the node, so
	// it must not consume p. The result belongs to the running backward,
	// which releases it right after the node's Function returns, also when
	// the graph is retained.
	Unpack(p Value) (Value, error)
}

// Saved is a value a node keeps for its backward, through the node's saved
// hooks if it was saved under a pair.
type Saved struct {
	node    *Node      // owner; set by Save, never changed
	hooks   SavedHooks // set by Save, never changed; nil: v is the value itself
	version uint64     // set by Save, never changed; v's version when saved
	index   int32      // the how-manyth Save on node; set by Save, never changed
	checked bool       // set by Save, never changed; v is Versioned and hooks nil

	released bool // guarded by mu
	mu       sync.Mutex
	v        Value // guarded by mu; the value or the packed object; nil once released
}

// Save keeps v for the node's backward and returns its handle. Save owns v
// from the call on, also on error. Under hooks, v goes through hooks.Pack now
// and the stored object through hooks.Unpack at every Get; with nil hooks v
// itself is stored, and if it is Versioned its version is recorded (through
// hooks it cannot be tracked, as in PyTorch).
func (n *Node) Save(v Value, hooks SavedHooks) (*Saved, error) {
	if v == nil {
		return nil, fmt.Errorf("autograd: Save on %s: nil value", n)
	}
	if err := n.acceptsSaved(); err != nil {
		v.Release()
		return nil, err
	}
	if hooks != nil {
		p, err := hooks.Pack(v)
		if err != nil {
			return nil, fmt.Errorf("autograd: Save on %s: pack hook: %w", n, err)
		}
		if p == nil {
			return nil, fmt.Errorf("autograd: Save on %s: pack hook returned nil; return a placeholder Value", n)
		}
		v = p
	}
	var version uint64
	vv, checked := v.(Versioned)
	if checked = checked && hooks == nil; checked {
		version = vv.Version()
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.acceptsSavedLocked(); err != nil {
		v.Release()
		return nil, err
	}
	var s *Saved
	if int(n.nsaved) < len(n.savedRoom) {
		s = &n.savedRoom[n.nsaved]
	} else {
		s = new(Saved)
	}
	*s = Saved{node: n, hooks: hooks, v: v, version: version, checked: checked, index: n.nsaved}
	n.nsaved++
	if n.saved == nil {
		n.saved = n.savedBuf[:0]
	}
	n.saved = append(n.saved, s)
	return s, nil
}

func (n *Node) acceptsSaved() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.acceptsSavedLocked()
}

func (n *Node) acceptsSavedLocked() error {
	switch {
	case n.kind == KindAccumulate:
		return fmt.Errorf("autograd: Save on %s: an accumulate node saves nothing", n)
	case n.fn == nil:
		return fmt.Errorf("autograd: %w", freed(n, "Save"))
	case n.released:
		return fmt.Errorf("autograd: %w", backwardTwice(n))
	}
	return nil
}

// releaseSaved releases the node's saved values after a backward ran it, and marks
// it consumed if it saved any: a node that saved nothing can run again, as in
// PyTorch (amp's cached weight casts are shared by every use in a region).
func (n *Node) releaseSaved() {
	n.mu.Lock()
	saved := n.saved
	n.saved = nil
	n.released = n.released || len(saved) > 0
	n.mu.Unlock()
	for _, s := range saved {
		s.Release()
	}
}

// Node returns the node that saved the value.
func (s *Saved) Node() *Node { return s.node }

// Released reports whether the saved value was released.
func (s *Saved) Released() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.released
}

// Get returns the saved value for the backward running as c. The value is
// borrowed: valid until the node's Function returns, never released by the
// caller. Under hooks it comes from Unpack (once per Get and backward; a
// second Get in the same call returns the same value). After release Get
// returns ErrBackwardTwice naming the node.
func (s *Saved) Get(c *Ctx) (Value, error) {
	if c == nil {
		return nil, fmt.Errorf("autograd: Saved.Get on %s: nil Ctx; saved values are read inside a Function's Backward", s.node)
	}
	if u := c.unpackedOf(s); u != nil {
		return u, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.released {
		return nil, fmt.Errorf("autograd: %w", backwardTwice(s.node))
	}
	if s.hooks == nil {
		if s.checked {
			if now := s.v.(Versioned).Version(); now != s.version {
				return nil, fmt.Errorf("autograd: saved value %d of %s is at version %d; expected version %d instead: %w. "+
					"Do the in-place op on a copy, or after the backward",
					s.index, s.node, now, s.version, ErrModifiedInPlace)
			}
		}
		return s.v, nil
	}
	u, err := s.hooks.Unpack(s.v)
	if err != nil {
		return nil, fmt.Errorf("autograd: Saved.Get on %s: unpack hook: %w", s.node, err)
	}
	if u == nil {
		return nil, fmt.Errorf("autograd: Saved.Get on %s: unpack hook returned nil", s.node)
	}
	c.keepUnpacked(s, u)
	return u, nil
}

// Release releases the stored value (the packed object under hooks). Later
// calls do nothing; a later Get fails with ErrBackwardTwice.
func (s *Saved) Release() {
	s.mu.Lock()
	if s.released {
		s.mu.Unlock()
		return
	}
	v := s.v
	s.v, s.released = nil, true
	s.mu.Unlock()
	v.Release()
}
