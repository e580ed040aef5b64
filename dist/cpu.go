package dist

import (
	"fmt"
	"sync"

	"github.com/subletml/sublet/tensor"
)

// CPU is the CPU backend: collectives on tensors the host can address (cpu, sim with a
// backing store), carried over the group's TCP connections. It is the path for
// machines without GPUs and for testing the data-parallel logic; it is not a fast
// transport (each collective gathers every rank's elements at rank 0, which combines
// them and sends each rank its result).
//
// Reductions are deterministic: rank 0 combines the ranks' elements in rank order
// (((r0 ∘ r1) ∘ r2) ∘ …), in float32 for floating types and int64 for integers, and
// every rank receives the same bytes, so every rank ends with identical bits.
//
// The elements are read when the collective starts on the group's worker and written
// when its reply arrives, both through the file cpudata.go.
type CPU struct {
	g *Group

	mu     sync.Mutex
	depth  int     // guarded by mu: open GroupStart calls
	held   []*task // guarded by mu: tasks issued inside the open group, in order
	closed bool    // guarded by mu
	// pending is guarded by mu: the held tasks, for Wait to refuse them.
	pending map[*task]bool
}

// NewCPU returns the CPU backend on g.
func NewCPU(g *Group) *CPU { return &CPU{g: g, pending: make(map[*task]bool)} }

// Name returns "cpu".
func (c *CPU) Name() string { return "cpu" }

// Group returns the backend's group.
func (c *CPU) Group() *Group { return c.g }

// issue submits t now, or holds it until the outermost GroupEnd.
func (c *CPU) issue(t *task) (*Work, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, argError(c.g, t.meta, ErrClosed, "the backend was closed")
	}
	if c.depth > 0 {
		c.held = append(c.held, t)
		c.pending[t] = true
	} else {
		c.g.submit(t)
	}
	return &Work{
		early: func() error {
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.pending[t] {
				return argError(c.g, t.meta, ErrConfig, "Wait inside an open group: call GroupEnd first")
			}
			return nil
		},
		wait: func() error {
			<-t.done
			return t.err
		}}, nil
}

// host checks that the CPU can read every tensor of a collective.
func (c *CPU) host(m meta, ts ...*tensor.Tensor) error {
	for _, t := range ts {
		if !hostReadable(t) {
			return argError(c.g, m, ErrUnsupported, "the CPU backend needs tensors the host can read; %s keeps none (use NCCL on GPUs, sim with a backing store for simulations)", t.Device().Name())
		}
	}
	return nil
}

// AllReduce reduces t over the ranks, in place.
func (c *CPU) AllReduce(t *tensor.Tensor, op ReduceOp) (*Work, error) {
	m, err := collective(c.g, opAllReduce, op, 0, t, nil)
	if err == nil {
		err = c.host(m, t)
	}
	if err != nil {
		return nil, err
	}
	n := c.g.cfg.WorldSize
	return c.issue(&task{meta: m,
		prepare: func() ([]byte, error) { return readElements(t) },
		combine: func(in [][]byte) ([][]byte, error) {
			r, err := reduce(m, in)
			return repeat(r, n), err
		},
		finish: func(r []byte) error { return writeElements(t, r) }})
}

// Broadcast copies root's t into every other rank's t.
func (c *CPU) Broadcast(t *tensor.Tensor, root int) (*Work, error) {
	m, err := collective(c.g, opBroadcast, 0, root, t, nil)
	if err == nil {
		err = c.host(m, t)
	}
	if err != nil {
		return nil, err
	}
	me, n := c.g.cfg.Rank, c.g.cfg.WorldSize
	return c.issue(&task{meta: m,
		prepare: func() ([]byte, error) {
			if me != root {
				return nil, nil
			}
			return readElements(t)
		},
		combine: func(in [][]byte) ([][]byte, error) { return repeat(in[root], n), nil },
		finish: func(r []byte) error {
			if me == root {
				return nil
			}
			return writeElements(t, r)
		}})
}

// AllGather writes every rank's in into out, rank after rank.
func (c *CPU) AllGather(out, in *tensor.Tensor) (*Work, error) {
	m, err := collective(c.g, opAllGather, 0, 0, out, in)
	if err == nil {
		err = c.host(m, out, in)
	}
	if err != nil {
		return nil, err
	}
	n := c.g.cfg.WorldSize
	return c.issue(&task{meta: m,
		prepare: func() ([]byte, error) { return readElements(in) },
		combine: func(parts [][]byte) ([][]byte, error) {
			var all []byte
			for _, p := range parts {
				all = append(all, p...)
			}
			return repeat(all, n), nil
		},
		finish: func(r []byte) error { return writeElements(out, r) }})
}

// ReduceScatter reduces in over the ranks and leaves block Rank of the result in out.
func (c *CPU) ReduceScatter(out, in *tensor.Tensor, op ReduceOp) (*Work, error) {
	m, err := collective(c.g, opReduceScatter, op, 0, out, in)
	if err == nil {
		err = c.host(m, out, in)
	}
	if err != nil {
		return nil, err
	}
	return c.issue(&task{meta: m,
		prepare: func() ([]byte, error) { return readElements(in) },
		combine: func(parts [][]byte) ([][]byte, error) {
			r, err := reduce(m, parts)
			if err != nil {
				return nil, err
			}
			block := len(r) / len(parts)
			out := make([][]byte, len(parts))
			for i := range out {
				out[i] = r[i*block : (i+1)*block]
			}
			return out, nil
		},
		finish: func(r []byte) error { return writeElements(out, r) }})
}

// GroupStart opens a group: collectives are held until the outermost GroupEnd.
func (c *CPU) GroupStart() {
	c.mu.Lock()
	c.depth++
	c.mu.Unlock()
}

// GroupEnd closes a group; the outermost one issues the held collectives in order.
func (c *CPU) GroupEnd() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.depth == 0 {
		return &Error{Op: "GroupEnd", Rank: c.g.cfg.Rank, Peer: -1, Msg: "no group is open (GroupEnd without GroupStart)", Err: ErrConfig}
	}
	c.depth--
	if c.depth > 0 {
		return nil
	}
	for _, t := range c.held {
		delete(c.pending, t)
		c.g.submit(t)
	}
	c.held = nil
	return nil
}

// Abort breaks the group now.
func (c *CPU) Abort(reason string) { c.g.Abort(reason) }

// Close makes later collectives fail with ErrClosed; collectives held in an open group
// are issued first (every rank expects them). The CPU backend holds nothing else.
func (c *CPU) Close() error {
	c.mu.Lock()
	c.closed = true
	held := c.held
	c.held, c.depth = nil, 0
	for _, t := range held {
		delete(c.pending, t)
		c.g.submit(t)
	}
	c.mu.Unlock()
	return nil
}

// reduce combines the ranks' wire elements of collective m in rank order: every
// element is ((r0 ∘ r1) ∘ r2) ∘ …, rank by rank over the whole tensor.
func reduce(m meta, in [][]byte) ([]byte, error) {
	size := wireSize(m.dt)
	for r, b := range in {
		if len(b) != m.count*size {
			return nil, fmt.Errorf("dist: internal error: rank %d sent %d bytes for %v", r, len(b), m)
		}
	}
	if m.dt.IsFloat() {
		acc := decodeFloats(in[0])
		for _, b := range in[1:] {
			combineFloats(m.redop, acc, decodeFloats(b))
		}
		if m.redop == Avg {
			n := float32(len(in))
			for i := range acc {
				acc[i] /= n
			}
		}
		return encodeFloats(acc), nil
	}
	acc := decodeInts(in[0])
	for _, b := range in[1:] {
		combineInts(m.redop, acc, decodeInts(b))
	}
	return encodeInts(acc), nil
}

// combineFloats folds v into acc elementwise with op (Avg sums: the division comes
// once, after the last rank). Max and Min let a NaN win.
func combineFloats(op ReduceOp, acc, v []float32) {
	nan := func(x float32) bool { return x != x }
	switch op {
	case Sum, Avg:
		for i, x := range v {
			acc[i] += x
		}
	case Prod:
		for i, x := range v {
			acc[i] *= x
		}
	case Max:
		for i, x := range v {
			if !nan(acc[i]) && (nan(x) || x > acc[i]) {
				acc[i] = x
			}
		}
	case Min:
		for i, x := range v {
			if !nan(acc[i]) && (nan(x) || x < acc[i]) {
				acc[i] = x
			}
		}
	}
}

// combineInts folds v into acc elementwise with op.
func combineInts(op ReduceOp, acc, v []int64) {
	for i, x := range v {
		switch op {
		case Sum:
			acc[i] += x
		case Prod:
			acc[i] *= x
		case Max:
			acc[i] = max(acc[i], x)
		case Min:
			acc[i] = min(acc[i], x)
		}
	}
}
