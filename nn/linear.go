package nn

import (
	"math"

	"github.com/subletml/sublet/tensor"
)

// Linear is y = x·Wᵀ + b (torch.nn.Linear): Weight is [out, in], Bias [out] or nil.
type Linear struct {
	Weight, Bias *tensor.Tensor
}

// NewLinear makes a Linear layer from in to out features, with a bias when bias is
// set, initialized as PyTorch does: weight and bias uniform in ±1/√in (a zero bias
// when in is 0), drawn from init.Gen (weight first).
func NewLinear(init Init, in, out int, bias bool) *Linear {
	bound := 0.0
	if in > 0 {
		bound = 1 / math.Sqrt(float64(in))
	}
	return construct(&Linear{}, func(l *Linear) {
		l.Weight = init.uniform("nn.Linear", bound, out, in)
		if bias {
			l.Bias = init.uniform("nn.Linear", bound, out)
		}
	})
}

// Forward returns x·Wᵀ + b for x [..., in]; it is [..., out]. Recorded, it saves x
// (for the weight's gradient); the weight needs no copy.
func (l *Linear) Forward(x *tensor.Tensor) *tensor.Tensor {
	return tensor.Linear(x, l.Weight, l.Bias)
}

// ForwardActivation returns act(x·Wᵀ + b), Forward followed by ReLU (act
// tensor.ActRelu), in one op (tensor.LinearActivation), which folds the activation
// into the product where the backend can. Recorded, it saves what the two layers
// would: x and the ReLU's output.
func (l *Linear) ForwardActivation(x *tensor.Tensor, act tensor.Activation) *tensor.Tensor {
	return tensor.LinearActivation(x, l.Weight, l.Bias, act)
}

// NamedParameters returns "weight" and, when there is one, "bias".
func (l *Linear) NamedParameters() []Parameter {
	ps := []Parameter{{"weight", l.Weight}}
	if l.Bias != nil {
		ps = append(ps, Parameter{"bias", l.Bias})
	}
	return ps
}

// SetTraining does nothing: Linear is the same in both modes.
func (l *Linear) SetTraining(bool) {}

// Release releases the weight, the bias and their gradients.
func (l *Linear) Release() { releaseAll(l.Weight, l.Bias) }
