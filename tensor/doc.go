// Package tensor is sublet's tensor and autograd core: n-dimensional arrays in device
// memory from the caching allocator, scopes that own them, and every op with its
// backward rule beside its forward.
// docs/pytorch.md maps the PyTorch calls a user reaches for to sublet's;
// docs/ownership.md has the ownership contract in full and why it is so.
//
// # Use
//
//	s := tensor.NewScope()                                         // owns what is made in it
//	defer s.Close()                                                // releases it all
//	x := tensor.FromSlice(s, dev, dtype.F32, xs, rows, cols)       // values in
//	y := x.MatMul(w).Relu().Sum()                                  // ops panic with *Error on misuse
//	y.Backward()                                                   // gradients into the leaves (w.Grad())
//	v, vs := y.Item(), tensor.ToSlice[float32](x)                  // values out
//	err := tensor.Try(func() { /* a step that may run out of memory */ })
//
// # Tensors and storage
//
// A Tensor is a handle: shape, strides and offset (in elements) over a Storage, an
// element type (F64, F32, F16, BF16, I32, I64, Bool) and its place in the graph. A
// Storage is one allocator block of exactly the bytes its tensor asked for; views
// (Reshape, Transpose, Slice, Expand, Detach, …) are new handles over the same storage.
// Every op is written once (its checks, its recording, what it saves) and computes
// through the kernels.Backend of where its storage lives: the CPU kernels on host
// memory (cpu, sim with a backing store), kernels.Meta on the meta device (sim without
// one: every output allocated, nothing computed, values unreadable: ErrNoData), the
// CUDA kernels on a GPU. The op table (Ops, LookupOp) lists every op with what it
// saves and its autocast class.
//
// # Scopes in a training loop
//
// Scopes own what ops make; the loop opens one per step and closes it, as a PyTorch
// loop lets each iteration's tensors go:
//
//	data := tensor.NewScope()      // lives as long as the data
//	x := tensor.FromSlice(data, dev, dtype.F32, xs, rows, 2)
//	for range steps {
//		step := data.Child()       // data's only open child: ops on x run in it
//		loss := nn.CrossEntropyLoss{}.Loss(model.Forward(x), y)
//		loss.Backward()
//		opt.Step()
//		opt.ZeroGrad(true)
//		step.Close()               // this step's tensors go back to the allocator
//	}
//
// An op runs in the innermost scope of its inputs, and from there down the chain of
// only open children (routing): here, in step. A scope on the way with several open
// children is an ErrScope error naming them; ResultScope says where an op would run.
// Modes for a few lines are regions, which own nothing (PyTorch's `with` blocks):
// s.With(tensor.NoGrad()), s.With(tensor.InferenceMode(true)), amp.Autocast(s, dt);
// their ops' results belong to s, so a loss computed under autocast is
// backpropagated after the region closed.
//
// # Ownership in short
//
//   - Every handle belongs to a scope, or to the caller: parameters (AsParameter),
//     gradients (their leaf's), handles a root scope Kept. Closing a scope releases
//     what it still owns; Release drops one handle (idempotent; any other use after it
//     is an ErrReleased error).
//   - A node's saved tensors go right after its backward ran (unless the graph is
//     retained), or with the last handle to its outputs. After a step's scope closes
//     the allocator holds the parameters, their gradients and the optimizer state:
//     nothing of the step.
//   - Layers run in child scopes (Layer), so temporaries die at layer boundaries.
//   - The garbage collector never frees device memory: Leaks reports handles it found
//     unreleased, and scopes that grow by one allocation site each step.
//
// # Types
//
// An op computes in the type its inputs promote to (dtype.Promote, PyTorch's rule):
// the binary ops, Where and Concat take an integer tensor with a floating one; the
// comparisons take any types and give Bool; Sum of an integer or Bool tensor is I64,
// its Mean F32; the other ops take floating tensors. F64 computes in float64 all the
// way; F16 and BF16 compute in float32 and round once. Data and constants convert
// only exactly or by Go's rule for a constant; nothing changes a value silently
// (docs/dtypes.md has the tables).
//
// # Modes
//
// Modes are properties of a scope, fixed when it is made: grad recording (NoGrad,
// EnableGrad), inference mode (InferenceMode: no graph, inference tensors that cannot
// be saved for backward later), the random generator (WithGenerator), saved-tensor
// hooks (WithSavedHooks), anomaly mode (WithAnomaly) and the autocast policy
// (WithAutocast). There is no global or per-goroutine mode: goroutines with their own
// scopes never affect each other. A scope and its handles are used by one goroutine at
// a time; Close may come from another while that one is between ops.
//
// # Errors
//
// Tensor math panics with an *Error naming the op, the shapes, the dtypes and the
// device, wrapping the cause (ErrShape, ErrIndex, ErrReleased, ErrScope, an
// *alloc.OOMError, …). Try (TryValue for a function with a result) turns such a panic
// back into an error, so a step can be retried after running out of memory; nothing
// else recovers panics. What fails for reasons outside the program (configuration,
// files, opening devices) returns an error instead.
//
//doccheck:context var w *tensor.Tensor
//doccheck:context var xs []float32
//doccheck:context var rows, cols int
package tensor
