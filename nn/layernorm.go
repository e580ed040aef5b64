package nn

import "github.com/subletml/sublet/tensor"

// DefaultLayerNormEps is the eps NewLayerNorm sets, PyTorch's default.
const DefaultLayerNormEps = 1e-5

// LayerNorm normalizes over the last dimension to zero mean and unit (biased)
// variance, then scales by Weight and shifts by Bias (torch.nn.LayerNorm over one
// dimension). Recorded, it saves its input and two floats per row.
type LayerNorm struct {
	Weight, Bias *tensor.Tensor // [n] each
	Eps          float64
}

// NewLayerNorm returns a LayerNorm over n features: weight ones, bias zeros, eps
// DefaultLayerNormEps.
func NewLayerNorm(init Init, n int) *LayerNorm {
	return construct(&LayerNorm{Eps: DefaultLayerNormEps}, func(l *LayerNorm) {
		l.Weight = init.parameter("nn.LayerNorm", func(t *tensor.Tensor) { t.Fill(1) }, n)
		l.Bias = init.parameter("nn.LayerNorm", func(t *tensor.Tensor) { t.Fill(0) }, n)
	})
}

// Forward normalizes x [..., n].
func (l *LayerNorm) Forward(x *tensor.Tensor) *tensor.Tensor {
	return tensor.LayerNorm(x, l.Weight, l.Bias, l.Eps)
}

// NamedParameters returns "weight" and "bias".
func (l *LayerNorm) NamedParameters() []Parameter {
	return []Parameter{{"weight", l.Weight}, {"bias", l.Bias}}
}

// SetTraining does nothing: LayerNorm is the same in both modes.
func (l *LayerNorm) SetTraining(bool) {}

// Release releases the weight, the bias and their gradients.
func (l *LayerNorm) Release() { releaseAll(l.Weight, l.Bias) }
