package autograd

import (
	"errors"
	"fmt"
)

// Root seeds a backward: the gradient of output Edge.Slot of Edge.Node.
type Root struct {
	Edge Edge
	Grad Value // the engine owns it from the call on, also on error
}

// Options configure one Backward call.
type Options struct {
	// Arith sums gradients and, under DetectAnomaly, checks them. Required.
	Arith Arith
	// RetainGraph keeps every node's saved values, so the graph can be run
	// again; they are released when the graph is freed.
	RetainGraph bool
	// DetectAnomaly checks every gradient a node returns and fails with an
	// *AnomalyError naming the first node that produced a NaN or an Inf.
	DetectAnomaly bool
	// AfterNode, if set, is called after each node was processed: its
	// Function and hooks ran, its gradients were handed on or released, and
	// its saved values were released unless the graph is retained.
	AfterNode func(n *Node)
}

// Backward runs the graph reachable from roots in reverse, feeding each
// reachable node the sum of the gradients of its outputs and handing its
// input gradients on along its edges, until the accumulate nodes have folded
// them into the leaves. See the package doc for the order and what is
// released when. On error the nodes already run stay consumed; the others
// keep their saved values and every gradient the engine held is released.
func Backward(roots []Root, opts Options) (err error) {
	b := &backward{opts: opts, tasks: make(map[*Node]*task)}
	defer b.releaseGrads()
	retained, err := b.start(roots)
	defer func() {
		for _, n := range retained {
			err = errors.Join(err, n.Release())
		}
	}()
	for err == nil && b.ready.Len() > 0 {
		err = b.step(b.ready.pop())
	}
	return err
}

// backward is the state of one Backward call; one goroutine uses it.
type backward struct {
	opts  Options
	tasks map[*Node]*task
	ready readyQueue
}

// start checks the roots, retains their nodes (returned, for release at the
// end), counts dependencies, seeds the gradients and queues the first nodes.
// It owns the seeds: on error each is released.
func (b *backward) start(roots []Root) (retained []*Node, err error) {
	seeded := 0
	defer func() {
		for _, r := range roots[seeded:] {
			if r.Grad != nil {
				r.Grad.Release()
			}
		}
	}()
	if b.opts.Arith == nil {
		return nil, errors.New("autograd: Backward: nil Options.Arith; the tensor package supplies gradient arithmetic")
	}
	if len(roots) == 0 {
		return nil, errors.New("autograd: Backward: no roots")
	}
	for i, r := range roots {
		if err := checkRoot(i, r); err != nil {
			return retained, err
		}
		if err := r.Edge.Node.Retain(); err != nil {
			return retained, fmt.Errorf("autograd: Backward: root %d: %w", i, err)
		}
		retained = append(retained, r.Edge.Node)
	}
	if err := b.discover(roots); err != nil {
		return retained, err
	}
	for _, r := range roots {
		seeded++
		if err := b.deliver(b.tasks[r.Edge.Node], r.Edge.Slot, r.Grad); err != nil {
			return retained, err
		}
	}
	for _, r := range roots {
		if t := b.tasks[r.Edge.Node]; t.deps == 0 && !t.queued {
			t.queued = true // once, also when several roots share the node
			b.ready.push(t)
		}
	}
	return retained, nil
}

func checkRoot(i int, r Root) error {
	switch {
	case r.Edge.Node == nil:
		return fmt.Errorf("autograd: Backward: root %d does not require grad and has no node", i)
	case r.Grad == nil:
		return fmt.Errorf("autograd: Backward: root %d (%s): nil gradient; seed it (ones for a scalar loss)", i, r.Edge.Node)
	case r.Edge.Slot < 0 || r.Edge.Slot >= r.Edge.Node.outputs:
		return fmt.Errorf("autograd: Backward: root %d: slot %d of %s, which has %d outputs",
			i, r.Edge.Slot, r.Edge.Node, r.Edge.Node.outputs)
	}
	return nil
}

// discover walks every node reachable from the roots, counting the edges
// into each, and fails before anything runs if one was consumed or freed.
func (b *backward) discover(roots []Root) error {
	var stack []*Node
	visit := func(n *Node) (*task, error) {
		if t := b.tasks[n]; t != nil {
			return t, nil
		}
		if err := n.checkRunnable(); err != nil {
			return nil, fmt.Errorf("autograd: Backward: %w", err)
		}
		t := &task{node: n, ord: len(b.tasks), grads: make([]Value, n.outputs)}
		b.tasks[n] = t
		stack = append(stack, n)
		return t, nil
	}
	for _, r := range roots {
		if _, err := visit(r.Edge.Node); err != nil {
			return err
		}
	}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, e := range n.inputs {
			if e.Node == nil {
				continue
			}
			t, err := visit(e.Node)
			if err != nil {
				return err
			}
			t.deps++
		}
	}
	return nil
}

// checkRunnable fails for a node a backward cannot run.
func (n *Node) checkRunnable() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case n.fn == nil:
		return freed(n, "backward")
	case n.kind == KindOp && n.released:
		return backwardTwice(n)
	}
	return nil
}

// deliver adds g (owned by the engine) to the gradient of slot of t's node.
func (b *backward) deliver(t *task, slot int, g Value) error {
	if t.grads[slot] == nil {
		t.grads[slot] = g
		return nil
	}
	sum, err := b.opts.Arith.Add(t.grads[slot], g)
	t.grads[slot] = sum
	if err != nil {
		return fmt.Errorf("autograd: summing the gradients of output %d of %s: %w", slot, t.node, err)
	}
	return nil
}

// step runs one ready node and hands its input gradients on.
func (b *backward) step(t *task) error {
	n := t.node
	outs, err := b.run(t)
	if err != nil {
		return err
	}
	for i, e := range n.inputs {
		g := outs[i]
		outs[i] = nil
		if e.Node == nil {
			if g != nil {
				g.Release()
			}
			continue
		}
		dst := b.tasks[e.Node]
		if g != nil {
			if err := b.deliver(dst, e.Slot, g); err != nil {
				releaseAll(outs)
				return err
			}
		}
		if dst.deps--; dst.deps == 0 {
			b.ready.push(dst)
		}
	}
	if b.opts.AfterNode != nil {
		b.opts.AfterNode(n)
	}
	return nil
}

// run calls the hooks and the Function of t's node, releases its incoming
// gradients and (unless retained) its saved values, and returns one gradient
// per input edge, owned by the engine.
func (b *backward) run(t *task) ([]Value, error) {
	n := t.node
	fn, gradHooks, postHooks, err := n.begin()
	if err != nil {
		return nil, fmt.Errorf("autograd: Backward: %w", err)
	}
	grads := t.grads
	t.grads = nil
	defer releaseAll(grads)
	arrived := false
	for slot, g := range grads {
		if g == nil {
			continue
		}
		arrived = true
		if grads[slot], err = runGradHooks(gradHooks[slot], g); err != nil {
			return nil, nodeError(n, fmt.Errorf("gradient hook of output %d: %w", slot, err))
		}
	}
	outs := make([]Value, len(n.inputs))
	if arrived {
		c := &Ctx{node: n}
		got, err := fn.Backward(c, grads)
		c.end()
		if err != nil {
			releaseAll(got)
			return nil, nodeError(n, err)
		}
		if len(got) != len(n.inputs) {
			releaseAll(got)
			return nil, nodeError(n, fmt.Errorf("returned %d gradients for %d inputs", len(got), len(n.inputs)))
		}
		copy(outs, got)
		if err := b.checkFinite(n, outs); err != nil {
			releaseAll(outs)
			return nil, err
		}
	}
	for _, h := range postHooks {
		if err := h(n); err != nil {
			releaseAll(outs)
			return nil, nodeError(n, fmt.Errorf("post hook: %w", err))
		}
	}
	if n.kind == KindOp && !b.opts.RetainGraph {
		n.releaseSaved()
	}
	return outs, nil
}

// begin checks that n can run now (a concurrent backward may have consumed
// it since discovery) and snapshots its Function and hooks.
func (n *Node) begin() (Function, [][]GradHook, []PostHook, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case n.fn == nil:
		return nil, nil, nil, freed(n, "backward")
	case n.kind == KindOp && n.released:
		return nil, nil, nil, backwardTwice(n)
	}
	return n.fn, append([][]GradHook(nil), n.gradHooks...), n.postHooks, nil
}

func (b *backward) checkFinite(n *Node, outs []Value) error {
	if !b.opts.DetectAnomaly {
		return nil
	}
	for i, g := range outs {
		if g == nil {
			continue
		}
		bad, err := b.opts.Arith.HasNonFinite(g)
		if err != nil {
			return nodeError(n, fmt.Errorf("checking gradient %d for NaN/Inf: %w", i, err))
		}
		if bad {
			return &AnomalyError{Node: n, Output: i}
		}
	}
	return nil
}

func nodeError(n *Node, err error) error {
	if len(n.site) == 0 {
		return fmt.Errorf("autograd: backward of %s: %w", n, err)
	}
	return fmt.Errorf("autograd: backward of %s: %w%s", n, err, createdAt(n))
}

// releaseGrads releases the gradients still buffered after an error.
func (b *backward) releaseGrads() {
	for _, t := range b.tasks {
		releaseAll(t.grads)
		t.grads = nil
	}
}

func releaseAll(vs []Value) {
	for i, v := range vs {
		if v != nil {
			v.Release()
			vs[i] = nil
		}
	}
}
