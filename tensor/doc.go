// Package tensor is sublet's tensor and autograd core: n-dimensional arrays in device
// memory from the caching allocator, scopes that own them, and every op with its
// backward rule beside its forward.
// docs/pytorch.md maps the PyTorch calls a user reaches for to sublet's.
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
// element type (dtype: F64, F32, F16, BF16, I32, I64, Bool; F64 is computed in float64,
// F16 and BF16 are stored as 16 bits and computed in float32), and its place in the
// graph. A Storage is one
// allocator block of exactly the bytes its tensor asked for. Views (Reshape, View,
// Transpose, Permute, Slice, Expand, Squeeze, Unsqueeze, Detach, Contiguous of a
// contiguous tensor) are new handles over the same storage.
//
// Every op is written once (its checks, its autograd recording, what it saves) and
// computes through a kernels.Backend picked from where its storage lives
// (Storage.Residency): the CPU kernels (package kernels/cpu, with the system BLAS
// SUBLET_BLAS names for float32 products) on host memory (cpu, sim with a backing
// store); kernels.Meta on sim without a backing store (the meta device), where ops
// allocate every output and temporary a real device would and compute nothing, so
// memory at named moments can be checked at full model size in milliseconds (reading
// values there, Item or ToSlice, panics with ErrNoData). On a device without kernels
// an op that computes panics with ErrNoKernels naming the op and the device; what needs
// no kernel works everywhere: views, Detach, To of a contiguous tensor (in every
// direction), FromSlice, ToSlice and Item (which wait for the device).
// The op table (Ops, LookupOp) lists every op with its inputs, what it saves and its
// autocast class.
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
// Modes for a few lines are regions, which own nothing (PyTorch's `with` blocks):
// s.With(tensor.NoGrad()), s.With(tensor.InferenceMode(true)), amp.Autocast(s, dt). The
// ops run inside follow the region's modes and their results belong to s (its owner),
// so a loss computed under autocast is backpropagated after the region closed.
//
// # Types and conversions
//
// An op computes in the type its inputs promote to, PyTorch's rule: F64 beats every
// other type, F32 beats F16 and BF16 (F16 with BF16 gives F32), and an integer tensor
// takes the floating one's type (the binary elementwise ops, Where and Concat; the
// comparisons take any types and give Bool; Sum of an integer or Bool tensor is I64,
// its Mean F32; the other ops take floating tensors only). An F64 op computes in float64 throughout, no F64 value
// going through float32; an F16 or BF16 op computes in float32 and rounds once to its
// type. A gradient comes back in its input's type. The autocast policy (package amp)
// never casts F64 tensors, as PyTorch's leaves float64 alone.
//
// Nothing changes a value silently (docs/dtypes.md has the tables):
//   - Data converts only exactly. FromSlice takes values its dtype holds, ToSlice and
//     Item give values the Go type holds; any other value is an ErrDType error naming
//     it: a float64 0.1 into F32, ToSlice[float32] of an F64 0.1, ToSlice[int] of 2.5,
//     Item of an I64 beyond 2^53. Float64 data makes F64 tensors; to round, say so:
//     Cast, or convert the slice in Go.
//   - Constants (Full, Fill, Arange, and the number of AddScalar, MulScalar, PowScalar,
//     Scale, AddScaled, Addcmul, Addcdiv) follow Go's rule for a constant: rounded to
//     nearest in the type they are used in (float64 in an F64 op, float32 in an F32,
//     F16 or BF16 one), but a finite value that would overflow it, or, for an integer
//     or Bool type, a value that is not one of its values, is an ErrDType error.
//   - Between tensors a type changes only by promotion (above) or Cast, which rounds to
//     nearest once (a float to an integer truncates toward zero and saturates, NaN
//     gives 0).
//
// # Ownership and release (the contract)
//
//   - A Storage counts references. Every live handle over it holds one; so does every
//     tensor a graph node saved for backward (a saved tensor is an unowned handle the
//     node owns). The block returns to the allocator when the count reaches zero.
//   - Every handle is owned by a Scope, or by the caller: parameters (AsParameter),
//     gradients (owned by their leaf), handles a root scope Kept, and the values
//     saved-tensor hooks and gradient hooks receive.
//   - An op runs in a scope, whose modes it follows and whose owner owns its result.
//     Start from the innermost of its inputs' scopes (all others must enclose it; a
//     handle made or bound in a region that is still open counts as the region's).
//     While that scope has exactly one open child, go down to it, and on down the chain
//     of only children: the op runs at its end (routing). A scope on the way with
//     several open children panics with ErrScope, naming them by where they were made:
//     which should own the result is ambiguous. Aside children are never routed into.
//     The owner is the scope itself, or for a region the nearest enclosing scope that
//     owns. An op on a parameter and an activation runs where the activation leads.
//     An op whose inputs have no scope panics with ErrScope: bind one with Scope.Bind.
//     Factories and Bind take their scope explicitly (s.Zeros, s.Randn, FromSlice(s, …))
//     and are not routed. ResultScope says where an op would run.
//   - Scope.Close releases every handle the scope still owns, after closing its open
//     children; from its start, ops no longer route into it. Scope.Keep moves a handle
//     to the parent's owner first (out of all scopes for a root). Layers run in child
//     scopes opened where the op would run (Layer does it for one input), so their
//     temporaries die at the layer boundary; a temporary an op saved for backward
//     lives on in its node, not in the scope.
//   - Release drops a handle: its storage reference, its reference to the node that
//     produced it, and, for the handle that made a leaf require grad, the leaf's
//     gradient. It is idempotent; any other use after Release panics with ErrReleased.
//   - A node's saved tensors are released right after its backward ran (unless the
//     graph is retained), or when the node is freed: when the last handle to its
//     outputs, and to every node downstream of it, is released — by Release, by the
//     scope closing, with or without a backward. A graph that is never released keeps
//     its saved activations: accumulating a loss tensor (not its Item or a Detach) in
//     an evaluation loop keeps every iteration's graph.
//   - Gradients live in the engine only while flowing: after Backward the allocator
//     holds the parameters, their gradients and what the caller kept. A leaf's first
//     gradient is stolen (no copy) when nothing else holds it; later ones are added in
//     place. ZeroGrad(true) returns the gradient's memory to the allocator.
//   - runtime.AddCleanup is only a safety net: a handle the garbage collector finds
//     unreleased is reported by Leaks (count, bytes, allocation site) and its memory is
//     never freed behind the program's back. The net costs one call stack per op, not
//     a cleanup per handle: a scope reports the handles it owns if it is found
//     unclosed, a node the handles it saved if it is never freed, and only handles no
//     scope owns (kept out of a root, parameters, gradients) are watched one by one.
//     Gradients in flight belong to the autograd engine, which releases every one.
//   - What routing cannot see (a loop with no step scope, a factory into the
//     long-lived scope inside the loop) Leaks reports as growth at the second step:
//     each Backward ends a step of the scopes enclosing its tensor, and a scope that
//     gained handles from one allocation site in each of its last two steps is named.
//
// # Why routing (the decision, and what was weighed)
//
// As first built, a result belonged to its inputs' innermost scope. The straight
// translation of a PyTorch loop then failed silently: a step scope around the body
// captured nothing (every result went to the scope of x, memory grew each step), and
// ops inside an autocast scope ran in F32 unless x was bound to it. The fix had to
// make that loop right, or make it fail at the first step, without thread-locals or
// globals (a goroutine's mode must not leak into another's). Weighed:
//
//   - A current scope per goroutine (PyTorch's thread-local modes): Go has no
//     goroutine-local state, and faking one (goroutine ids, a context argument to every
//     op) breaks either the no-globals rule or every signature.
//   - An explicit scope argument to every op, or a refusal of any op on a tensor whose
//     scope has an open child (always bind inputs into the step): deterministic, but
//     the PyTorch loop fails instead of working, and every layer and loss needs a scope
//     in its signature.
//   - Routing to the newest open child: works for the loop, but with two open children
//     it silently picks one, which is the trap again (and goroutine-dependent).
//   - Routing down a chain of only children, an error for several (chosen): the loop
//     works as written; with one child there is nothing to guess, and with several the
//     op fails loudly, naming both. The cost per op is an atomic load per scope on the
//     chain (no lock): Child, With and Close keep each scope's only child in an atomic
//     pointer. Regions (With) owning nothing make `with no_grad():` and
//     `with autocast():` blocks translate line for line, results included.
//
// Consequences: goroutines with their own root scopes never affect each other. Two
// goroutines that share a parent scope each work in an Aside child of it, binding in
// what they read (an op on the shared parent's own tensors would run wherever its
// chain leads, and several open children are an error). Close from another goroutine
// stays allowed and stops routing into the scope at once, but it releases the
// scope's handles under the ops of the goroutine using them: stop that goroutine's
// ops first (see Modes). Layer (and so nn's
// containers, checkpoint and amp) opens its scope where the op would run, so layers
// nest under the step; amp keeps its weight-cast cache in an Aside scope of the
// outermost autocast region; checkpoint's recomputation runs in a root scope of its
// own. A scope's Keep still exists for results that must outlive it.
//
// Memory at named moments is therefore exact: after a forward, the allocator's
// requested bytes are the parameters plus what the ops saved plus what the caller
// holds; after backward, the parameters plus their gradients (plus what was kept);
// after the step's scope closes, nothing of the step. Ops leave no hidden allocation
// alive; each saves only what its backward reads (PyTorch's choices: matmul and Linear
// their inputs; exp, tanh, sigmoid, relu and sqrt their output; Mul the other operand).
// Ops that save only inputs (MatMul, Linear, the binary ops) save them before they
// compute, as PyTorch does, so a saved-tensor hook that fails (checkpoint's early stop)
// stops the op before its kernel runs. An op that fails releases everything it made.
//
// # Modes
//
// Modes are properties of a scope, fixed when it is made (NewScope, Child, With, Aside
// and the Options): grad recording (NoGrad, EnableGrad), inference mode
// (InferenceMode), the random generator (WithGenerator), saved-tensor hooks
// (WithSavedHooks), anomaly mode (WithAnomaly) and the autocast policy (WithAutocast).
// An op follows the modes of the scope it runs in (routing included). There is no
// global or per-goroutine mode: two goroutines with different scopes never affect each
// other. A scope and its handles are used by one goroutine at a time. Close is
// idempotent and may come from another goroutine while that one is between ops or
// releasing handles (each handle is dropped once); not while it runs an op on a
// handle the scope owns, or on its descendants': the op would read and write memory
// the close gave back to the allocator, which may already hold another tensor (a data
// race, reported by the race detector). A watchdog that closes a worker's scope
// stops the worker first (a context it checks between steps), then closes.
//
// Inference mode (torch.inference_mode) records no graph, and what its ops make are
// inference tensors: they count no in-place writes (Version stays 0), and a recorded
// op outside inference mode that would save one for backward panics with ErrGrad,
// naming itself; SetRequiresGrad refuses them. Clone one outside inference mode to use
// it in autograd.
//
// # Errors
//
// Tensor math panics with an *Error naming the op, the shapes, the dtypes and the
// device, wrapping the cause (ErrShape, ErrReleased, ErrScope, an *alloc.OOMError,
// ...): ops, factories, scopes, Backward. Try (TryValue for a function with a result)
// turns such a panic back into an error, so a step can be retried after running out
// of memory; nothing else recovers panics. Math panics because a chain of ops would
// otherwise check an error after each one; what fails for reasons outside the
// program (configuration, files, opening devices) returns an error instead.
//
//doccheck:context var w *tensor.Tensor
//doccheck:context var xs []float32
//doccheck:context var rows, cols int
package tensor
