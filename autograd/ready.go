package autograd

import "container/heap"

// task is the per-backward state of one reachable node.
type task struct {
	node   *Node
	ord    int     // discovery order; breaks ties between equal priorities
	deps   int     // edges from reachable nodes that have not delivered yet
	grads  []Value // per output slot, summed as contributions arrive
	queued bool    // pushed on the ready queue (a node runs once)
}

// before is the run order of ready nodes (see the package doc).
func (t *task) before(u *task) bool {
	ta, ua := t.node.kind == KindAccumulate, u.node.kind == KindAccumulate
	if ta != ua {
		return ta
	}
	if !ta && t.node.seq != u.node.seq {
		return t.node.seq > u.node.seq
	}
	return t.ord < u.ord
}

// readyQueue holds the nodes whose dependencies have all delivered.
type readyQueue []*task

func (q readyQueue) Len() int           { return len(q) }
func (q readyQueue) Less(i, j int) bool { return q[i].before(q[j]) }
func (q readyQueue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *readyQueue) Push(x any)        { *q = append(*q, x.(*task)) }
func (q *readyQueue) Pop() any {
	old := *q
	t := old[len(old)-1]
	*q = old[:len(old)-1]
	return t
}

func (q *readyQueue) push(t *task) { heap.Push(q, t) }
func (q *readyQueue) pop() *task   { return heap.Pop(q).(*task) }
