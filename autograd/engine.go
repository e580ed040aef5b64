package autograd

import (
	"errors"
	"fmt"
	"sync"
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
	// Inputs, when not empty, restricts the backward to the part of the graph
	// that leads to these edges (PyTorch's backward(inputs=) and
	// torch.autograd.grad): only nodes from which one of them is reachable
	// run, the others are left as they are (their saved values stay). Without
	// Capture the nodes of the edges run too, so leaves accumulate and the
	// hooks of other outputs (a retained gradient) see their gradients.
	Inputs []Edge
	// Capture, with Inputs, is handed the gradient of Inputs[i] (summed over its
	// uses, after the gradient hooks of that output slot) instead of letting
	// the edge's node consume it: torch.autograd.grad. A node of the edges runs
	// its Function only if another input edge is reachable from it, so a leaf's
	// accumulator never runs. Capture owns g from the call on, also on error;
	// it is called after the node's Function, and not for an edge no gradient
	// reached. Each edge must appear once in Inputs.
	Capture func(i int, g Value) error
}

// Backward runs the graph reachable from roots in reverse, feeding each
// reachable node the sum of the gradients of its outputs and handing its
// input gradients on along its edges, until the accumulate nodes have folded
// them into the leaves. See the package doc for the order and what is
// released when. On error the nodes already run stay consumed; the others
// keep their saved values and every gradient the engine held is released.
func Backward(roots []Root, opts Options) (err error) {
	b := engines.Get().(*backward)
	b.opts = opts
	defer b.recycle()
	err = b.start(roots)
	defer func() {
		for _, n := range b.retained {
			err = errors.Join(err, n.Release())
		}
	}()
	for err == nil && len(b.ready) > 0 {
		err = b.step(b.pop())
	}
	return err
}

// backward is the state of one Backward call; one goroutine uses it. Its map and
// slices are kept from call to call (engines), so that a training loop's backward
// grows none of them.
type backward struct {
	opts     Options
	index    map[*Node]int32 // task of each reachable node
	tasks    []task          // in discovery order
	grads    []Value         // the gradients buffered for every task's slots
	ready    []int32         // heap of the tasks ready to run (see push)
	stack    []*Node         // discover's nodes still to walk
	retained []*Node         // the roots' nodes, held for the call (start)
	ctx      Ctx             // reused by every run
}

// engines holds the states of finished backwards, emptied, with the room they grew.
var engines = sync.Pool{New: func() any { return &backward{index: make(map[*Node]int32)} }}

// recycle releases the gradients b still holds (those of an unfinished backward),
// empties b and gives it back to engines.
func (b *backward) recycle() {
	releaseAll(b.grads)
	clear(b.index)
	clear(b.tasks)
	clear(b.retained)
	b.opts = Options{}
	b.tasks, b.grads, b.ready, b.retained = b.tasks[:0], b.grads[:0], b.ready[:0], b.retained[:0]
	clear(b.ctx.outs)
	b.ctx = Ctx{unpacked: b.ctx.unpacked[:0], outs: b.ctx.outs[:0]}
	engines.Put(b)
}

// gradsOf returns the gradient slots of task i.
func (b *backward) gradsOf(i int32) []Value {
	t := &b.tasks[i]
	end := t.grad + t.node.outputs
	return b.grads[t.grad:end:end]
}

// start checks the roots, retains their nodes (in b.retained, for release at
// the end), counts dependencies, seeds the gradients and queues the first nodes.
// It owns the seeds: on error each is released.
func (b *backward) start(roots []Root) (err error) {
	seeded := 0
	defer func() {
		for _, r := range roots[seeded:] {
			if r.Grad != nil {
				r.Grad.Release()
			}
		}
	}()
	if b.opts.Arith == nil {
		return errors.New("autograd: Backward: nil Options.Arith; the tensor package supplies gradient arithmetic")
	}
	if len(roots) == 0 {
		return errors.New("autograd: Backward: no roots")
	}
	for i, r := range roots {
		if err := checkRoot(i, r); err != nil {
			return err
		}
		if err := r.Edge.Node.retain(); err != nil {
			return fmt.Errorf("autograd: Backward: root %d: %w", i, err)
		}
		b.retained = append(b.retained, r.Edge.Node)
	}
	if err := b.discover(roots); err != nil {
		return err
	}
	if err := b.restrict(); err != nil {
		return err
	}
	for _, r := range roots {
		seeded++
		i := b.index[r.Edge.Node]
		if !b.tasks[i].active {
			r.Grad.Release()
			continue
		}
		if err := b.deliver(i, r.Edge.Slot, r.Grad); err != nil {
			return err
		}
	}
	for _, r := range roots {
		// Once, also when several roots share the node.
		if i := b.index[r.Edge.Node]; b.tasks[i].active && b.tasks[i].deps == 0 && !b.tasks[i].queued {
			b.push(i)
		}
	}
	return nil
}

func checkRoot(i int, r Root) error {
	switch {
	case r.Edge.Node == nil:
		return fmt.Errorf("autograd: Backward: root %d does not require grad and has no node", i)
	case r.Grad == nil:
		return fmt.Errorf("autograd: Backward: root %d (%s): nil gradient; seed it (ones for a scalar loss)", i, r.Edge.Node)
	case r.Edge.Slot < 0 || r.Edge.Slot >= int(r.Edge.Node.outputs):
		return fmt.Errorf("autograd: Backward: root %d: slot %d of %s, which has %d outputs",
			i, r.Edge.Slot, r.Edge.Node, r.Edge.Node.outputs)
	}
	return nil
}

// discover walks every node reachable from the roots, counting the edges
// into each.
func (b *backward) discover(roots []Root) error {
	stack := b.stack[:0]
	defer func() { b.stack = stack[:0] }()
	visit := func(n *Node) (int32, error) {
		if i, ok := b.index[n]; ok {
			return i, nil
		}
		i := int32(len(b.tasks))
		b.index[n] = i
		b.tasks = append(b.tasks, task{node: n, grad: int32(len(b.grads))})
		b.grads = append(b.grads, make([]Value, n.outputs)...)
		stack = append(stack, n)
		return i, nil
	}
	for _, r := range roots {
		if _, err := visit(r.Edge.Node); err != nil {
			return err
		}
	}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack[len(stack)-1] = nil // b.stack keeps no node past the call
		stack = stack[:len(stack)-1]
		for _, e := range n.inputs {
			if e.Node == nil {
				continue
			}
			i, err := visit(e.Node)
			if err != nil {
				return err
			}
			b.tasks[i].deps++
		}
	}
	return nil
}

// restrict decides which discovered nodes take part (all of them without
// Options.Inputs) and which run their Function, then fails before anything
// runs if one that would was consumed or freed.
func (b *backward) restrict() error {
	in := b.opts.Inputs
	if len(in) == 0 {
		for i := range b.tasks {
			b.tasks[i].active, b.tasks[i].runs = true, true
		}
		return b.checkRunnable()
	}
	if b.opts.Capture != nil {
		seen := make(map[Edge]int, len(in))
		for k, e := range in {
			if e.Node == nil {
				return fmt.Errorf("autograd: Backward: input %d does not require grad and has no node", k)
			}
			if j, dup := seen[e]; dup {
				return fmt.Errorf("autograd: Backward: inputs %d and %d are the same edge (slot %d of %s)", j, k, e.Slot, e.Node)
			}
			seen[e] = k
		}
	}
	target := make([]bool, len(b.tasks))
	for k, e := range in {
		if e.Node == nil {
			return fmt.Errorf("autograd: Backward: input %d does not require grad and has no node", k)
		}
		i, ok := b.index[e.Node]
		if !ok {
			continue // not reached from the roots: it gets no gradient
		}
		target[i] = true
		if b.opts.Capture != nil {
			b.tasks[i].captures = append(b.tasks[i].captures, capture{slot: e.Slot, input: k})
		}
	}
	// Producers after their consumers (Kahn's order over the discovered edges),
	// so that walking it backwards sees every input of a node before the node.
	deps := make([]int32, len(b.tasks))
	for i := range b.tasks {
		deps[i] = b.tasks[i].deps
	}
	var order []int32
	for i := range b.tasks {
		if deps[i] == 0 {
			order = append(order, int32(i))
		}
	}
	for k := 0; k < len(order); k++ {
		for _, e := range b.tasks[order[k]].node.inputs {
			if e.Node == nil {
				continue
			}
			j := b.index[e.Node]
			if deps[j]--; deps[j] == 0 {
				order = append(order, j)
			}
		}
	}
	for k := len(order) - 1; k >= 0; k-- {
		t := &b.tasks[order[k]]
		upstream := false
		for _, e := range t.node.inputs {
			if e.Node != nil && b.tasks[b.index[e.Node]].active {
				upstream = true
				break
			}
		}
		t.active = upstream || target[order[k]]
		t.runs = upstream || (target[order[k]] && b.opts.Capture == nil)
	}
	// Only edges between nodes that take part deliver.
	for i := range b.tasks {
		b.tasks[i].deps = 0
	}
	for i := range b.tasks {
		if !b.tasks[i].active {
			continue
		}
		for _, e := range b.tasks[i].node.inputs {
			if e.Node != nil && b.tasks[b.index[e.Node]].active {
				b.tasks[b.index[e.Node]].deps++
			}
		}
	}
	return b.checkRunnable()
}

// checkRunnable fails for the first node that would run its Function but
// cannot.
func (b *backward) checkRunnable() error {
	for _, t := range b.tasks {
		if !t.runs {
			continue
		}
		if err := t.node.checkRunnable(); err != nil {
			return fmt.Errorf("autograd: Backward: %w", err)
		}
	}
	return nil
}

// checkRunnable fails for a node a backward cannot run.
func (n *Node) checkRunnable() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.runnableLocked()
}

func (n *Node) runnableLocked() error {
	switch {
	case n.fn == nil:
		return freed(n, "backward")
	case n.kind == KindOp && n.released:
		return backwardTwice(n)
	}
	return nil
}

// deliver adds g (owned by the engine) to the gradient of slot of task i.
func (b *backward) deliver(i int32, slot int, g Value) error {
	grads := b.gradsOf(i)
	if grads[slot] == nil {
		grads[slot] = g
		return nil
	}
	sum, err := b.opts.Arith.Add(grads[slot], g)
	grads[slot] = sum
	if err != nil {
		return fmt.Errorf("autograd: summing the gradients of output %d of %s: %w", slot, b.tasks[i].node, err)
	}
	return nil
}

// step runs ready task i and hands its input gradients on.
func (b *backward) step(i int32) error {
	n := b.tasks[i].node
	outs, err := b.run(i)
	if err != nil {
		return err
	}
	for k, e := range n.inputs {
		var g Value
		if outs != nil {
			g, outs[k] = outs[k], nil
		}
		if e.Node == nil {
			if g != nil {
				g.Release()
			}
			continue
		}
		dst := b.index[e.Node]
		if !b.tasks[dst].active {
			if g != nil {
				g.Release()
			}
			continue
		}
		if g != nil {
			if err := b.deliver(dst, e.Slot, g); err != nil {
				releaseAll(outs)
				return err
			}
		}
		if b.tasks[dst].deps--; b.tasks[dst].deps == 0 {
			b.push(dst)
		}
	}
	if b.opts.AfterNode != nil {
		b.opts.AfterNode(n)
	}
	return nil
}

// run calls the hooks and the Function of task i's node, releases its
// incoming gradients and (unless retained) its saved values, and returns one
// gradient per input edge, owned by the engine. A node no gradient reached
// is not run (no Function, no hooks) and returns nil, but is consumed all the
// same.
func (b *backward) run(i int32) ([]Value, error) {
	t := &b.tasks[i]
	n := t.node
	fn, gradHooks, postHooks, err := n.begin(t.runs)
	if err != nil {
		return nil, fmt.Errorf("autograd: Backward: %w", err)
	}
	grads := b.gradsOf(i)
	defer releaseAll(grads)
	arrived := false
	for slot, g := range grads {
		if g == nil {
			continue
		}
		arrived = true
		if gradHooks == nil {
			continue
		}
		if grads[slot], err = runGradHooks(gradHooks[slot], g); err != nil {
			return nil, nodeError(n, fmt.Errorf("gradient hook of output %d: %w", slot, err))
		}
	}
	var outs []Value
	if arrived && t.runs {
		if outs, err = b.call(n, fn, grads); err != nil {
			return nil, err
		}
		for _, h := range postHooks {
			if err := h(n); err != nil {
				releaseAll(outs)
				return nil, nodeError(n, fmt.Errorf("post hook: %w", err))
			}
		}
	}
	for _, c := range t.captures {
		g := grads[c.slot]
		if g == nil {
			continue
		}
		grads[c.slot] = nil
		if err := b.opts.Capture(c.input, g); err != nil {
			releaseAll(outs)
			return nil, nodeError(n, fmt.Errorf("capturing the gradient of input %d: %w", c.input, err))
		}
	}
	if t.runs && n.kind == KindOp && !b.opts.RetainGraph {
		n.releaseSaved()
	}
	return outs, nil
}

// call runs fn and checks what it returned; on error it has released it.
func (b *backward) call(n *Node, fn Function, grads []Value) ([]Value, error) {
	b.ctx.node = n
	outs, err := fn.Backward(&b.ctx, grads)
	b.ctx.end()
	switch {
	case err != nil:
		err = nodeError(n, err)
	case len(outs) != len(n.inputs):
		err = nodeError(n, fmt.Errorf("returned %d gradients for %d inputs", len(outs), len(n.inputs)))
	default:
		err = b.checkFinite(n, outs)
	}
	if err != nil {
		releaseAll(outs)
		return nil, err
	}
	return outs, nil
}

// begin checks that n can run now when it will run its Function (a
// concurrent backward may have consumed it since discovery) and snapshots its
// Function and hooks.
func (n *Node) begin(runs bool) (Function, [][]GradHook, []PostHook, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.runnableLocked(); err != nil && runs {
		return nil, nil, nil, err
	}
	if n.hooks == nil {
		return n.fn, nil, nil, nil
	}
	var gradHooks [][]GradHook
	if n.hooks.grad != nil {
		gradHooks = append(gradHooks, n.hooks.grad...)
	}
	return n.fn, gradHooks, n.hooks.post, nil
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
	if n.site == nil {
		return fmt.Errorf("autograd: backward of %s: %w", n, err)
	}
	return fmt.Errorf("autograd: backward of %s: %w%s", n, err, createdAt(n))
}

func releaseAll(vs []Value) {
	for i, v := range vs {
		if v != nil {
			v.Release()
			vs[i] = nil
		}
	}
}
