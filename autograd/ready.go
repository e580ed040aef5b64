package autograd

// task is the per-backward state of one reachable node. Its index in
// backward.tasks is its discovery order, which breaks ties between equal
// priorities.
type task struct {
	node   *Node
	deps   int32 // edges from reachable nodes that have not delivered yet
	grad   int32 // its gradients, one per output slot, start at backward.grads[grad]
	queued bool  // pushed on the ready queue (a node runs once)
	// active says the node takes part (every node without Options.Inputs, else
	// those that lead to an input edge); runs that it calls its Function.
	active, runs bool
	captures     []capture // the input edges of Options.Inputs at this node, under Capture
}

// capture is one input edge whose gradient a Grad takes: output slot of the
// task's node, Options.Inputs[input].
type capture struct {
	slot, input int
}

// before is the run order of ready nodes (see the package doc).
func (b *backward) before(i, j int32) bool {
	t, u := b.tasks[i].node, b.tasks[j].node
	ta, ua := t.kind == KindAccumulate, u.kind == KindAccumulate
	if ta != ua {
		return ta
	}
	if !ta && t.seq != u.seq {
		return t.seq > u.seq
	}
	return i < j
}

// push queues task i, whose dependencies have all delivered (a binary heap
// in b.ready ordered by before).
func (b *backward) push(i int32) {
	b.tasks[i].queued = true
	q := append(b.ready, i)
	for k := len(q) - 1; k > 0; {
		p := (k - 1) / 2
		if !b.before(q[k], q[p]) {
			break
		}
		q[k], q[p] = q[p], q[k]
		k = p
	}
	b.ready = q
}

// pop removes and returns the task to run next.
func (b *backward) pop() int32 {
	q := b.ready
	top := q[0]
	last := len(q) - 1
	q[0] = q[last]
	q = q[:last]
	for k := 0; ; {
		m, l, r := k, 2*k+1, 2*k+2
		if l < len(q) && b.before(q[l], q[m]) {
			m = l
		}
		if r < len(q) && b.before(q[r], q[m]) {
			m = r
		}
		if m == k {
			break
		}
		q[k], q[m] = q[m], q[k]
		k = m
	}
	b.ready = q
	return top
}
