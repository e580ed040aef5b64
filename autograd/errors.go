package autograd

import (
	"errors"
	"fmt"
)

// ErrBackwardTwice is returned (wrapped, naming the node) by a backward that
// reaches a node whose saved values an earlier backward released, and by
// Saved.Get after its value was released.
var ErrBackwardTwice = errors.New("trying to backward through the graph a second time " +
	"(or directly access saved tensors after they have already been freed). " +
	"Saved intermediate values of the graph are freed when you call Backward(). " +
	"Specify RetainGraph=true if you need to backward through the graph a second time " +
	"or if you need to access saved tensors after calling backward")

// ErrFreed is returned (wrapped, naming the node) when a node is used after
// its last reference was released.
var ErrFreed = errors.New("node was freed: the last reference to its graph was released; " +
	"keep a handle to the graph's output (or Retain the node) while you still use it")

// ErrModifiedInPlace is returned (wrapped, naming the node, the saved value
// and both versions) by Saved.Get when a Versioned value was written in place
// after it was saved.
var ErrModifiedInPlace = errors.New("one of the variables needed for gradient computation " +
	"has been modified by an inplace operation")

// backwardTwice and freed are the errors of a consumed or freed node. They do not
// name the package: the exported call that returns them does, once, also when it
// wraps them (Backward, NewNode).
func backwardTwice(n *Node) error {
	return fmt.Errorf("node %s: %w", n, ErrBackwardTwice)
}

func freed(n *Node, what string) error {
	return fmt.Errorf("%s on node %s: %w", what, n, ErrFreed)
}
