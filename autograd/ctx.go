package autograd

// Ctx is one run of a node's Function inside a backward. It is used by one
// goroutine and is valid only until the Function returns (Backward reuses it
// for the next node).
type Ctx struct {
	node     *Node
	unpacked []unpacked // what Saved.Get unpacked in this run; released after it
	outs     []Value    // Outputs' room, the next run's once the engine took them
}

type unpacked struct {
	s *Saved
	v Value
}

// Outputs returns n nil Values for the Function to fill and return as its gradients,
// in room the engine reuses: a Function that returns them allocates no slice. Once
// returned they are the engine's, as any result, and the room is the next run's.
func (c *Ctx) Outputs(n int) []Value {
	if cap(c.outs) < n {
		c.outs = make([]Value, n)
	}
	c.outs = c.outs[:n]
	clear(c.outs)
	return c.outs
}

// Node returns the node being run.
func (c *Ctx) Node() *Node { return c.node }

// NeedsGrad reports whether forward input i wants a gradient (its edge is
// not the zero Edge); a Function skips computing the others.
func (c *Ctx) NeedsGrad(i int) bool { return c.node.inputs[i].Node != nil }

func (c *Ctx) unpackedOf(s *Saved) Value {
	for _, u := range c.unpacked {
		if u.s == s {
			return u.v
		}
	}
	return nil
}

func (c *Ctx) keepUnpacked(s *Saved, v Value) {
	c.unpacked = append(c.unpacked, unpacked{s, v})
}

// end releases what was unpacked during the run.
func (c *Ctx) end() {
	for i, u := range c.unpacked {
		u.v.Release()
		c.unpacked[i] = unpacked{}
	}
	c.unpacked = c.unpacked[:0]
}
