// Package autograd is sublet's reverse-mode engine over abstract graph nodes.
//
// It imports no other sublet package. It declares the node, the saved-value
// handle, the hook and gradient-arithmetic interfaces and the engine; the
// tensor package implements the nodes (one Function per op, beside its
// forward) and the values (tensor handles). Gradients, saved values and packed
// objects are opaque Values to this package: it only moves and releases them.
//
// # Use
//
// Programs do not call it: package tensor records every op into it and runs it from
// Tensor.Backward. Import it to write nodes of your own (NewNode, Node.Save, Backward;
// the package example is a Mul op end to end) or hooks (SavedHooks, GradHook).
//
// # Graph
//
// A Node is one recorded op. Its input edges point to the node that produced
// each forward input and to which output slot of it; an input that does not
// require grad has the zero Edge. A node has one or more output slots, a
// name (the op, used in every error), an optional creation Site and a
// sequence number from a Clock. Leaves are KindAccumulate nodes: no inputs,
// their Function folds the incoming gradient into the leaf's .grad.
//
// # Ownership and release (the contract)
//
// Nodes are reference counted; references are explicit, never the GC's:
//
//   - NewNode returns a node holding one reference, owned by the caller (the
//     tensor package hands it to the output tensor handle; every further
//     handle to an output of the node takes another with Retain).
//   - Every input edge of a node holds one reference to the producer node,
//     taken by NewNode and dropped when the consumer is freed.
//   - Backward holds a reference to each root for its duration, so a
//     concurrent Release of the user's handles cannot free a running graph.
//   - Release drops one reference. At zero the node is freed: its saved values
//     are released (if backward has not done so), its hooks and Function are
//     dropped, and its edges' references are released, freeing producers in
//     turn. A subgraph shared by two losses is therefore freed only when both
//     are released. Retain or hooks on a freed node return ErrFreed.
//
// Saved values (Node.Save) are owned by their node and released exactly once:
// right after the node's backward ran when the backward does not retain the
// graph, or when the node is freed, whichever comes first. A node whose saved
// values were released by backward is "released": every later backward that
// reaches it, and every Saved.Get on it, fails with ErrBackwardTwice naming
// the node. As in PyTorch, a node that saved nothing is never consumed: a
// later backward may run it again.
// Accumulate nodes are never released by backward; they live with their leaf.
// A saved Value must not hold a node reference (save the data, not the graph
// handle): a node saving its own output would otherwise keep itself alive,
// the cycle PyTorch avoids the same way. A saved Value that is Versioned is
// checked at Get: a write in place since Save fails with ErrModifiedInPlace.
//
// Gradients flowing through the engine are Values the engine owns. Every
// intermediate gradient is released (or consumed by Arith.Add) as soon as it
// has been used: a node's incoming gradients right after its Function
// returns, unless the Function took one (set its entry to nil: a leaf's
// accumulator keeps the first gradient it gets so). After Backward returns, the engine holds no Value: only what the
// accumulate nodes kept (the leaves' .grad) and what hooks kept remain.
//
// Saved-tensor hooks (SavedHooks) transform what a node saves: Pack at save
// time (it takes the value and returns what the graph stores), Unpack at each
// Get (it returns a fresh value released right after the node's backward,
// even when the graph is retained). Checkpointing (pack keeps nothing, unpack
// recomputes) and offload to host memory (pack copies to host, unpack copies
// back) are built on them.
//
// # Order
//
// Backward counts, for every node reachable from the roots, the edges that
// lead to it, and runs a node once all of them have delivered (gradients for
// the same output slot are summed first). Among ready nodes it runs
// accumulate nodes first (so a leaf's gradient is folded in and freed at
// once), then the highest sequence number, then the node discovered first. A
// node that no gradient reached (its consumers returned nil for it) is not
// called, nor are its hooks, but it is consumed like the others.
// The order of runs, and so of releases, is therefore a function of the graph
// alone: memory at named moments is deterministic.
//
// # Restricted backwards and Grad
//
// Options.Inputs restricts a backward to the nodes from which one of the given
// edges is reachable (backward(inputs=)); the other reachable nodes do not run,
// keep their saved values and are not consumed. Options.Capture (and Grad,
// built on it) takes the gradients arriving at those edges instead of letting
// their nodes consume them (torch.autograd.grad): a node of the edges runs its
// Function only when another input lies upstream of it, so leaves' accumulators
// do not run. The dependency counts, the order and the releases are those of
// the restricted graph, so memory at named moments stays a function of the
// graph and the inputs.
//
// # Concurrency
//
// There is no package-level mutable state, no grad mode and no thread-local:
// options travel in Options, saved hooks in the arguments of Save, sequence
// numbers in an explicit Clock. Backward keeps its per-call state in its own
// frame, so backwards over disjoint graphs run concurrently. Shared nodes
// (leaves used by two graphs, retained subgraphs) guard their state with a
// per-node mutex; the Functions of shared nodes must be safe for concurrent
// calls themselves.
//
// # Errors
//
// Every failure is a returned error, naming the node where there is one:
// ErrBackwardTwice,
// ErrFreed, ErrModifiedInPlace, *AnomalyError (a non-finite gradient under Options.DetectAnomaly,
// with the op's creation Site) and errors returned by Functions, hooks and
// Arith, wrapped with the node that failed. The package never panics on
// behalf of its callers.
package autograd
