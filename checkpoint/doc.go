// Package checkpoint trades compute, or host memory, for device memory: Checkpoint
// runs a function of tensors without keeping what its ops save for backward, and runs
// it again during backward to regenerate those tensors (torch.utils.checkpoint with
// use_reentrant=False), selectively with a Policy; Sequential does it to a stack of
// layers (checkpoint_sequential); SaveOnCPU keeps what the ops of a scope save in host
// memory instead (torch.autograd.graph.save_on_cpu).
//
// # Use
//
//	out := checkpoint.Checkpoint(block.Forward, x) // block.Forward runs again in backward
//	y := checkpoint.Sequential(layers, 4, x)       // checkpoint_sequential: 4 segments
//	outs := checkpoint.CheckpointN(func(in []*tensor.Tensor) []*tensor.Tensor {
//		return []*tensor.Tensor{in[0].Mul(in[1]), in[1].Tanh()} // several tensors in and out
//	}, x, y)
//
// x belongs to a recording scope; the results belong to it too. Config adds options
// (Config.Checkpoint, Config.CheckpointN, SequentialWith); nn's modules are Layers.
// docs/pytorch.md maps PyTorch's checkpointing calls to these.
//
// # How
//
// Checkpoint runs the function in a child scope whose saved-tensor hooks (package
// autograd's SavedHooks, a scope mode) are the checkpoint's frame. The graph is
// recorded as usual, so gradients flow through the function's own nodes; only what
// those nodes save changes: Pack records the tensor's shape, dtype and device,
// releases the tensor and returns a holder. Unpack, when a backward first needs one of
// the function's saved tensors, re-runs the function in a recording scope of its own
// whose hooks hand the i-th tensor saved to the i-th holder, then gives the backward
// the one it asked for. Sequential splits a list of layers into segments exactly as
// PyTorch's checkpoint_sequential does and checkpoints all but the last.
//
// # What is kept, and when recomputed tensors die (the invariants)
//
//   - After a recorded forward a checkpoint keeps its inputs (one reference to each
//     input's data, outside the graph) and nothing else of the function: every
//     tensor the function's ops saved was released when they saved it, every
//     temporary when the function's scope closed. The results belong to the caller.
//   - The inputs are kept while a holder is live, that is while a node of the
//     function that saved something is live: they are released with the last holder,
//     after the backward that consumes the function's nodes or when the graph is
//     released, whichever comes first. Under saved-tensor hooks of the calling scope
//     (an enclosing checkpoint, an offload) the inputs are kept through those hooks,
//     as tensors an op saved there would be: so checkpoints nest, and recomputing an
//     inner checkpoint first recomputes the enclosing ones whose saved tensors it
//     needs.
//   - A recompute happens when a backward unpacks a holder that holds no recomputed
//     tensor: in one backward, the first unpack of the frame. It regenerates the
//     tensor of every live holder (those whose nodes a backward already consumed take
//     none) and stops as soon as no later holder lacks a tensor (early stop): that save
//     fails, so the op making it aborts (tensor's ops save their inputs before they
//     compute: a segment's last Linear is not recomputed at all) and the rest of the
//     function does not run. (Sequential lets a segment keep its result where the
//     next one keeps it anyway: docs/checkpoint.md.) Its own graph, scope and
//     temporaries are released before the backward goes on: what stays are the
//     regenerated tensors.
//   - A regenerated tensor is handed to the backward by the unpack, which releases it
//     when the node that read it has run, also when the graph is retained: a second
//     backward recomputes again. A holder the graph releases takes its tensor along.
//     A tensor regenerated for a node the backward does not run (a retained graph
//     backpropagated from another of the function's results) stays with its holder
//     until the next recompute replaces it or the graph releases the holder.
//     So during backward a checkpointed segment of s ops adds at most the tensors its
//     ops save (minus the input, already kept) and they go one node at a time.
//   - The recompute runs with the generator state the scope's generator had when
//     Checkpoint was called (the state around it is restored afterwards, as
//     torch.random.fork_rng does) and with the call scope's autocast policy and
//     anomaly mode, so dropout masks and casts match the forward. Only the scope's
//     generator is restored: a generator set on a scope inside the function is not.
//   - The determinism check compares each regenerated tensor's shape, dtype and
//     device with the forward's, and the counts; a difference fails the backward with
//     an error wrapping ErrNondeterministic, with PyTorch's wording. An input modified
//     in place since the forward fails it too.
//   - In a scope that records no graph, Checkpoint just runs the function (in a
//     child scope): nothing is kept for a backward that cannot happen.
//
// # Selective checkpointing
//
// With Config.Policy (SaveOps names the ops) the checkpoint is selective, as
// PyTorch's create_selective_checkpoint_contexts: the frame is also the scope's
// tensor.OpCache. In the forward every op that a result can be reused for is numbered
// and, when the policy says Save, a reference to its result's data is kept. The
// recomputation numbers its ops the same way and hands each kept result to its op,
// which copies it into its own result instead of running its kernels, then records
// and saves as usual, so the recomputation saves what the forward saved (the
// determinism check holds) and the early stop works as before.
//
//   - After a recorded forward a selective checkpoint keeps its inputs and the kept
//     results: those are the memory the policy trades for compute. A recomputation
//     takes each kept result as its op reaches it (the op's copy replaces it: PyTorch
//     pops it from its storage); those an early stop did not reach are released with
//     the inputs, with the last holder.
//   - So the function is backpropagated once, as in PyTorch: a later recomputation
//     that reaches an op whose kept result was taken fails the backward with an error
//     wrapping ErrExtraBackward, PyTorch's "Trying to backward an extra time". Without
//     a Policy a retained graph can be backpropagated any number of times.
//   - The policy is asked in the forward only, of every op but views, factories and
//     the ops that save something they compute besides their result (LayerNorm,
//     CrossEntropy, Dropout, Max), which are always recomputed.
//   - An op of another name where the forward kept a result, or a kept result
//     modified in place since the forward, fails the backward (ErrNondeterministic
//     for the first).
//   - Kept results are held directly, not through an enclosing scope's saved-tensor
//     hooks.
//
// # Concurrency
//
// A frame is used by the goroutine running its forward and then by the goroutine
// running a backward through it; the holders' state is guarded by the frame's mutex,
// so a graph released from another goroutine is safe. The generator is shared with
// the scope: other goroutines drawing from it during a recompute see the restored
// state, so give each goroutine its own generator, as package tensor says.
//
// # Errors
//
// Misuse at the call (inputs without a scope, a result not computed in the function's
// scope, a segment count outside [1, len(layers)]) panics with a *tensor.Error, as
// tensor math does; tensor.Try turns it back into an error. Failures of a recompute
// (a mismatch, an input modified in place, an error of the function) fail the
// backward: tensor's Backward panics with a *tensor.Error wrapping them.
//
//doccheck:context var block *nn.Sequential
//doccheck:context var layers []checkpoint.Layer
package checkpoint
