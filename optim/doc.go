// Package optim is sublet's optimizers: SGD (momentum, dampening, Nesterov, weight
// decay), Adam and AdamW, with PyTorch's update formulas and semantics, over parameter
// groups, and the learning-rate schedulers that drive them.
// docs/pytorch.md maps the PyTorch calls a user reaches for to sublet's.
//
// # Use
//
//	opt, err := optim.NewAdamW(nn.Parameters(model)) // PyTorch's defaults; or pass an AdamWConfig
//	defer opt.Release()   // the optimizer state back to the allocator
//	// ... each step: forward and Backward in a scope, close it, then
//	opt.Step()            // updates in place every parameter that has a gradient
//	opt.ZeroGrad(true)    // drops the gradients: their memory returns to the allocator
//
// NewSGD, NewAdam and NewAdamW take one list of parameters (nn.Parameters(model)) and
// one configuration (none for Adam's and AdamW's defaults). NewSGDGroups,
// NewAdamGroups and NewAdamWGroups take parameter groups (PyTorch's param_groups),
// each with its own hyper-parameters: a smaller learning rate for a pretrained body,
// no weight decay for biases. AddGroup adds one later (add_param_group); LR, SetLR,
// Group and SetGroupConfig read and change a group's hyper-parameters. A parameter
// belongs to one group. StateBytes says what the state holds; amp's GradScaler drives
// an Optimizer for mixed precision.
//
// # Schedulers
//
// Schedulers (NewStepLR, NewLinearLR, NewCosineAnnealingLR, NewLambdaLR, and
// NewSequentialLR and NewChainedScheduler to compose them) set the groups' learning
// rates; call their Step after the optimizer's. They follow
// torch.optim.lr_scheduler exactly: the first scheduler made on an optimizer records
// each group's rate as its initial rate, which every scheduler of the optimizer
// starts from; a constructor runs the first step (epoch 0); Step applies the chainable
// form, so chained schedules multiply and SequentialLR restarts each schedule at its
// milestone from its closed form. A warm-up then cosine decay:
//
//	warm, _ := optim.NewLinearLR(opt, 0.1, 1, 5)
//	cos, _ := optim.NewCosineAnnealingLR(opt, 95) // eta_min: PyTorch's default 0
//	sched, _ := optim.NewSequentialLR(opt, []*optim.LRScheduler{warm, cos}, []int{5})
//	for epoch := range 100 { train(); sched.Step() }
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
//   - SGD keeps momentum buffers only for the parameters of groups whose Momentum is
//     not 0 (made on their first step with momentum).
//   - A parameter without a gradient is skipped (no update, no state), as PyTorch
//     skips a None grad; a zeroed gradient still steps (weight decay and momentum
//     act).
//   - ZeroGrad(true) drops the gradients (their memory returns to the allocator; the
//     next backward steals fresh ones); ZeroGrad(false) zeroes them in place and keeps
//     their memory.
//
// # CUDA graphs
//
// An SGD step can be recorded by tensor.CaptureGraph and replayed. An Adam or AdamW
// step can when its groups are Capturable (AdamConfig.Capturable, PyTorch's
// capturable=True): the learning rate and the step counts then live on the device,
// the kernel computes the bias corrections from them (with the host's bits) and
// advances the counts, and SetLR writes the rate there, so replays follow a scheduler.
// Take a step eagerly before the capture: the state is made on the first one.
//
// Parameters must be F32 leaves that require grad (mixed precision keeps F32 master
// parameters and lets autocast compute in half precision). An optimizer is used by
// one goroutine at a time.
//
//doccheck:context var train func()
package optim
