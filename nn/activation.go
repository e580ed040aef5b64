package nn

import "github.com/subletml/sublet/tensor"

// stateless is the part of Module that parameterless, mode-less layers share.
type stateless struct{}

// NamedParameters returns none.
func (stateless) NamedParameters() []Parameter { return nil }

// SetTraining does nothing: the layer is the same in both modes.
func (stateless) SetTraining(bool) {}

// Release does nothing: the layer holds no memory.
func (stateless) Release() {}

// ReLU is max(x, 0). Recorded, it saves its output.
type ReLU struct{ stateless }

// Forward returns max(x, 0).
func (ReLU) Forward(x *tensor.Tensor) *tensor.Tensor { return x.Relu() }

// folds implements foldable.
func (ReLU) folds() tensor.Activation { return tensor.ActRelu }

// foldable is an activation layer a Sequential runs in one op with the Linear before
// it (tensor.LinearActivation); folds returns that op's activation.
type foldable interface {
	folds() tensor.Activation
}

// GELU is x·Φ(x) (torch.nn.GELU); Tanh selects the tanh approximation
// (approximate="tanh").
type GELU struct {
	stateless
	Tanh bool
}

// Forward returns GELU(x).
func (g GELU) Forward(x *tensor.Tensor) *tensor.Tensor {
	if g.Tanh {
		return x.GeluTanh()
	}
	return x.Gelu()
}

// Tanh is tanh x. Recorded, it saves its output.
type Tanh struct{ stateless }

// Forward returns tanh x.
func (Tanh) Forward(x *tensor.Tensor) *tensor.Tensor { return x.Tanh() }
