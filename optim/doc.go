// Package optim is sublet's optimizers: SGD (momentum, dampening, Nesterov, weight
// decay), Adam and AdamW, with PyTorch's update formulas and semantics.
//
// # Use
//
//	opt, err := optim.NewAdamW(nn.Parameters(model), optim.DefaultAdamW())
//	defer opt.Release()   // the optimizer state back to the allocator
//	... each step: forward and Backward in a scope, close it, then
//	opt.Step()            // updates in place every parameter that has a gradient
//	opt.ZeroGrad(true)    // drops the gradients: their memory returns to the allocator
//
// StateBytes says what the state holds; amp's GradScaler drives an Optimizer for mixed
// precision.
//
// # Ownership and memory
//
//   - An optimizer holds its parameters (owned by their module) and owns its state:
//     SGD's momentum buffers, Adam's first and second moments, each a tensor of its
//     parameter's shape owned by no scope. State is made lazily, on the first Step in
//     which the parameter has a gradient (PyTorch's lazy state), so memory after the
//     first step is parameters + gradients + state (StateBytes), and Release returns
//     the state to the allocator.
//   - Step updates each parameter in place, in one fused pass of kernels/cpu over the
//     parameter, its gradient and its state (tensor's raw accessors): no graph is
//     recorded and nothing is allocated besides the lazy state. On a device that keeps
//     no data (the meta device) it allocates the state and computes nothing, so the
//     memory of a step is checked at full size. Every update bumps the parameter's
//     version, so a graph that saved the old value refuses to backward through it.
//   - A parameter without a gradient is skipped (no update, no state), as PyTorch
//     skips a None grad; a zeroed gradient still steps (weight decay and momentum
//     act).
//   - ZeroGrad(true) drops the gradients (their memory returns to the allocator; the
//     next backward steals fresh ones); ZeroGrad(false) zeroes them in place and keeps
//     their memory.
//
// Parameters must be F32 leaves that require grad (mixed precision keeps F32 master
// parameters and lets autocast compute in half precision). An optimizer is used by
// one goroutine at a time.
package optim
