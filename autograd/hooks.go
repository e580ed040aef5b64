package autograd

import "fmt"

// GradHook sees the gradient of one output slot of a node, summed over all
// its uses, before the node runs: the register_hook of the tensor that is
// that output (slot 0 of a leaf's accumulate node for a leaf). It returns nil
// to keep g, or a replacement, which the engine then owns (it releases g).
// g stays the engine's: a hook that keeps it (retain_grad) takes its own
// reference, and never returns g itself.
type GradHook func(g Value) (Value, error)

// PostHook runs after the node's Function returned, before its saved values
// are released. On an accumulate node that is after the gradient was folded
// into the leaf: the post-accumulate-grad hook.
type PostHook func(n *Node) error

// AddGradHook adds h to the hooks of output slot; hooks run in the order
// they were added.
func (n *Node) AddGradHook(slot int, h GradHook) error {
	if slot < 0 || slot >= int(n.outputs) {
		return fmt.Errorf("autograd: AddGradHook on %s: slot %d, node has %d outputs", n, slot, n.outputs)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.fn == nil {
		return fmt.Errorf("autograd: %w", freed(n, "AddGradHook"))
	}
	if n.hooks == nil {
		n.hooks = new(nodeHooks)
	}
	if n.hooks.grad == nil {
		n.hooks.grad = make([][]GradHook, n.outputs)
	}
	n.hooks.grad[slot] = append(n.hooks.grad[slot], h)
	return nil
}

// AddPostHook adds h to the node's post hooks, run in the order added.
func (n *Node) AddPostHook(h PostHook) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.fn == nil {
		return fmt.Errorf("autograd: %w", freed(n, "AddPostHook"))
	}
	if n.hooks == nil {
		n.hooks = new(nodeHooks)
	}
	n.hooks.post = append(n.hooks.post, h)
	return nil
}

// nodeHooks are a node's hooks, apart from it: most nodes have none.
type nodeHooks struct {
	grad [][]GradHook // per output slot; nil until the first
	post []PostHook
}

// runGradHooks passes g through the hooks of slot and returns what the
// engine owns afterwards (g or its replacement), also on error.
func runGradHooks(hooks []GradHook, g Value) (Value, error) {
	for _, h := range hooks {
		r, err := h(g)
		if err != nil {
			return g, err
		}
		if r != nil {
			g.Release()
			g = r
		}
	}
	return g, nil
}
