// Package nn is sublet's layers and losses: modules that own their parameters and run
// their forward in scopes, so that a step's memory is exactly what the contract of
// package tensor says it is.
// docs/pytorch.md maps the PyTorch calls a user reaches for to sublet's.
//
// # Use
//
//	model := nn.NewMLP(nn.Init{Device: dev, Gen: tensor.NewGenerator(1)}, nn.MLPConfig{Sizes: []int{784, 256, 10}})
//	defer model.Release()                          // parameters and gradients back to the allocator
//	opt, err := optim.NewAdam(nn.Parameters(model), optim.DefaultAdam())
//	s := tensor.NewScope()                         // one scope per step
//	loss := nn.CrossEntropyLoss{}.Loss(model.Forward(x), labels) // x, labels owned by s
//	loss.Backward()
//	s.Close()                                      // the step's tensors go
//	opt.Step()
//
// Layers (Linear, LayerNorm, Embedding, Dropout, ReLU, GELU, Tanh) compose with
// NewSequential; SetTraining(false) before evaluating.
//
// # Your own modules
//
// A model of your own is a struct of layers, as a subclass of torch.nn.Module is a
// class with layers as attributes: embed Base, write Forward, make it with Build.
// Base finds the parameters and children in the exported fields and names them as
// PyTorch names the same attributes ("FC1" is "fc1", or the name of an `nn:"name"`
// tag), so a model saved with package safetensors loads into its PyTorch twin:
//
//	type MLP struct {
//		nn.Base
//		FC1, FC2 *nn.Linear
//		Drop     *nn.Dropout
//	}
//
//	func (m *MLP) Forward(x *tensor.Tensor) *tensor.Tensor {
//		return m.FC2.Forward(m.Drop.Forward(m.FC1.Forward(x).Relu()))
//	}
//
//	func NewMLP(init nn.Init, in, hidden, out int) *MLP {
//		return nn.Build(&MLP{
//			FC1:  nn.NewLinear(init, in, hidden, true),
//			FC2:  nn.NewLinear(init, hidden, out, true),
//			Drop: nn.NewDropout(0.1),
//		})
//	}
//
// NamedParameters gives fc1.weight, fc1.bias, fc2.weight, fc2.bias; SetTraining
// reaches Drop; Release releases them all. Fields may be layers, Sequentials, modules
// of your own (their Base is built with the parent's), slices of them (ModuleList),
// and *tensor.Tensor parameters made with Init.Param; see Base for the rules. Forward
// runs in the caller's scope: a block wrapped in tensor.Layer(x, block.Forward) frees
// its temporaries when it returns, as Sequential does for each child, and
// checkpoint.Checkpoint(block.Forward, x) recomputes it in backward.
// examples/classifier is a whole program.
//
// # Ownership
//
//   - A module owns its parameters. They are leaves made with tensor's AsParameter:
//     no scope owns them, they require grad, and their gradients belong to them.
//     Module.Release releases every parameter and its gradient (the memory returns to
//     the allocator); it is idempotent, and the module cannot run afterwards.
//   - Forward takes an input owned by a scope (the caller's) and returns a result
//     owned where an op on the input puts it: that scope, or the step scope (or
//     region) open in it, whose modes the ops follow: grad recording, the random
//     generator Dropout draws from, autocast (see tensor's package doc). To evaluate
//     without recording, run the forward in a NoGrad child or region
//     (s.Child(tensor.NoGrad()), s.With(tensor.NoGrad())).
//   - Containers (Sequential, and MLP, which is one) run each child with tensor.Layer,
//     in a child scope, and release each intermediate result as soon as the next child
//     has consumed it. Temporaries therefore die at layer boundaries: what outlives a
//     layer is its result and what a recorded op saved for backward, which lives in the
//     graph, not in a scope. After a recorded forward the allocator holds the
//     parameters, the saved activations and what the caller holds; under NoGrad it
//     holds, at its peak, the parameters, the caller's tensors and one layer's input
//     and output. A Linear and the ReLU after it run as one layer and one op
//     (tensor.LinearActivation, the ReLU in the product's epilogue on cuda), which
//     saves what the two saved and never holds the product before the ReLU.
//   - Losses (CrossEntropyLoss, MSELoss, BCELoss, BCEWithLogitsLoss, behind the Loss
//     interface) take a prediction and a target owned by scopes; the loss belongs where
//     an op on them puts it.
//   - ClipGradNorm and ClipGradValue clip the gradients of a list of parameters in
//     place (torch.nn.utils.clip_grad_norm_ and clip_grad_value_), computing on the
//     gradients' devices: the total norm ClipGradNorm returns is a tensor owned by the
//     scope it is given, and nothing is read back unless its finiteness is checked.
//
// # Modes
//
// Modules start in training mode. SetTraining(false) switches Dropout off (eval
// mode); it changes nothing else, as in PyTorch: grad recording is a scope mode, not
// a module mode.
//
// # Initialization
//
// Parameters are drawn as PyTorch draws them, from an explicit tensor.Generator in
// Init (there is no global generator): Linear's weight and bias uniform in
// ±1/√fan_in (kaiming_uniform_ with a=√5, and the bias bound), Embedding's weight
// standard normal, LayerNorm's weight ones and bias zeros. Two modules built from
// generators with the same seed and state are identical.
//
// A module is used by one goroutine at a time (its parameters are written in place by
// optimizers); two goroutines may each train their own modules at once.
package nn
