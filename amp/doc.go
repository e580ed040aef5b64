// Package amp is automatic mixed precision: autocast scopes, in which products run in
// float16 or bfloat16 and range-sensitive ops in float32, and the GradScaler, which
// scales the loss so that float16 gradients neither underflow nor go unnoticed when
// they overflow. It follows torch.amp (docs/autocast.md) op for op.
// docs/pytorch.md maps the PyTorch calls a user reaches for to sublet's.
//
// # Autocast
//
// Autocast(parent, dt) makes a region of parent (tensor.Scope.With: it owns nothing)
// whose ops consult the policy before they run (tensor.Autocast). It is PyTorch's
// `with torch.autocast(...)` block:
//
//	ac, err := amp.Autocast(step, dtype.F16) // step: the loop's step scope
//	// ... the forward ...
//	loss := nn.CrossEntropyLoss{}.Loss(model.Forward(x), y) // x owned by the data scope
//	ac.Close()
//	scaler.Scale(loss).Backward() // the loss belongs to step, not to the region
//
// While the region is the only open child of step, the ops on step's tensors (and on
// those of the scopes above, down the chain) run in it; their results belong to step. Eligible inputs are floating tensors (F32, F16, BF16) on
// any device; integer inputs (labels, indices) and F64 tensors are never cast
// (PyTorch's is_autocast_eligible leaves float64 alone: it is asked for explicitly), and
// an op on an F64 input computes in F64. By op, with PyTorch's CUDA lists on every
// device:
//
//   - MatMul, Linear: every floating input is cast to dt (weights through the cache).
//   - Exp, Log, Pow, PowScalar, LayerNorm, MSE, CrossEntropy: every floating input is
//     cast to F32, so the result is F32.
//   - Softmax, LogSoftmax, Sum, SumKeep, SumTo: the result is F32, computed from the
//     input as it is, without an F32 copy of it (tensor.AutocastOutput). The explicit
//     forms (SoftmaxAs, SumAs, …) keep the type they are given.
//   - every other op (Add, Mul, Relu, Mean, Max, Concat, views, Dropout, …) runs in
//     its inputs' types; tensor promotes mixed operands (F16 with F32 gives F32).
//
// The cast is an op of the graph (tensor records it in the op's scope), so the op
// saves its low-precision inputs for backward and each gradient is cast back to its
// input's type: master weights stay F32 and so do their gradients. An explicit Cast is
// never changed. A cast is a temporary of its op, released when the op returns
// (what the op saved holds its own reference).
//
// # Regions and the weight-cast cache
//
// An autocast scope made inside another joins its region (Enabled(false) scopes too);
// the outermost one owns the region's weight-cast cache, kept in an Aside scope of it
// (ops are never routed there). Invariants:
//
//   - A cast is cached iff its target is the scope's autocast type and its source is
//     an F32 leaf that requires grad and covers its storage (a parameter, not a view),
//     and the scope's cache is enabled, and the op's scope is not in inference mode
//     (tensor.InferenceMode: PyTorch stopped caching there, its issue 158232; the cache
//     is neither filled nor read). Other inputs are cast on every use. (A model input
//     that is a leaf requiring grad is cached too, as PyTorch's rule does.)
//
//   - The cache holds one cast per (weight, type). It is made by a scope that always
//     records the graph, so a cast first made under NoGrad carries gradients to its
//     weight when a recording op reuses it (PyTorch issues 65766 and 112583). A
//     weight changed in place since (its version moved) is cast again.
//
//   - The cache is released when the outermost autocast scope closes (CacheBytes
//     reports its size until then). Casts a recorded op saved stay in the graph until
//     backward releases them: for a Linear, the weight's cast; a bias's cast is not
//     saved and dies with the cache.
//
//   - A scope nested with Enabled(false) runs ops in their inputs' types. A scope made
//     with tensor.WithAutocast(nil) leaves autocast altogether: an autocast scope
//     inside it starts a region (and cache) of its own.
//
//   - A cached cast serves every graph built in the region: its node saved nothing,
//     so any number of backwards (one after the other, interleaved with forwards, or
//     from several goroutines) run through it to the weight.
//
// Scopes stay independent across goroutines; the cache of one region is shared by its
// scopes under a mutex.
//
// # GradScaler
//
// GradScaler is torch.amp.GradScaler, state machine and numbers included (docs/autocast.md):
// scale 2^16, growth 2 after 2000 good steps, backoff 0.5, all configurable. Per
// optimizer and iteration: Unscale at most once, before Step; Step at most once; then
// one Update for all optimizers. Misuse returns errors with PyTorch's messages: before
// the first Scale, Unscale, Step, Update and UpdateTo refuse (ErrNotScaled), instead
// of dividing gradients that were never scaled.
// Invariants:
//
//   - The scale changes only in Update (or UpdateTo), so every optimizer of an
//     iteration sees the same one; it never becomes +Inf.
//   - Unscale multiplies by float32(1/float64(S)) and flags Inf and NaN per optimizer,
//     checking every gradient before it is touched; F16 gradients are refused first.
//   - A step skipped for an Inf or a NaN leaves the optimizer's parameters and state
//     untouched; the gradients stay unscaled for inspection.
//   - The scaler holds no device memory: scale and tracker live on the host.
package amp
