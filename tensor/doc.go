// Package tensor is sublet's tensor and autograd core: n-dimensional arrays in device
// memory from the caching allocator, scopes that own them, and every op with its
// backward rule beside its forward.
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
// (cuda for now) an op that computes panics with ErrNoKernels naming the op and the
// device; what needs no kernel works everywhere: views, Detach, To of a contiguous
// tensor (in every direction), FromSlice, ToSlice and Item (which wait for the device).
// The op table (Ops, LookupOp) lists every op with its inputs, what it saves and its
// autocast class.
//
// # Types and conversions
//
// An op computes in the type its inputs promote to, PyTorch's rule: F64 beats every
// other type, F32 beats F16 and BF16 (F16 with BF16 gives F32), and an integer tensor
// takes the floating one's type (the binary elementwise ops and Concat; the other ops
// take floating tensors only). An F64 op computes in float64 throughout, no F64 value
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
//     Scale, AddScaled) follow Go's rule for a constant: rounded to nearest in the type
//     they are used in (float64 in an F64 op, float32 in an F32, F16 or BF16 one),
//     but a finite value that would overflow it, or, for an integer or Bool type, a
//     value that is not one of its values, is an ErrDType error.
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
//   - An op's result belongs to the innermost scope among its inputs' scopes (all
//     others must enclose it), and follows that scope's modes. An op on a parameter and
//     an activation lands in the activation's scope. An op whose inputs have no scope
//     panics with ErrScope: bind one with Scope.Bind. Factories take their scope
//     explicitly (s.Zeros, s.Randn, FromSlice(s, …)).
//   - Scope.Close releases every handle the scope still owns, after closing its open
//     children. Scope.Keep moves a handle to the parent first (out of all scopes for a
//     root). Layers run in child scopes (Layer does it for one input), so their
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
// Modes are properties of a scope, fixed when it is made (NewScope, Child and the
// Options): grad recording (NoGrad, EnableGrad), the random generator (WithGenerator),
// saved-tensor hooks (WithSavedHooks), anomaly mode (WithAnomaly) and the autocast
// policy (WithAutocast). There is no global or per-goroutine mode: two goroutines
// with different scopes never affect each other. A scope and its handles are used by
// one goroutine at a time; Close is idempotent and safe from any goroutine.
//
// # Errors
//
// Tensor math panics with an *Error naming the op, the shapes, the dtypes and the
// device, wrapping the cause (ErrShape, ErrReleased, an *alloc.OOMError, ...). Try
// turns such a panic back into an error, so a step can be retried after running out
// of memory; nothing else recovers panics.
package tensor
