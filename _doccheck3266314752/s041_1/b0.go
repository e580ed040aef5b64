package p

import (
	nn "github.com/subletml/sublet/nn"
	tensor "github.com/subletml/sublet/tensor"
)

//line nn/doc.go:28
type MLP struct {
	nn.Base
	FC1, FC2 *nn.Linear
	Drop     *nn.Dropout
}

func (m *MLP) Forward(x *tensor.Tensor) *tensor.Tensor {
	return m.FC2.Forward(m.Drop.Forward(m.FC1.Forward(x).Relu()))
}

func NewMLP(init nn.Init, in, hidden, out int) *MLP {
	return nn.Build(&MLP{
		FC1:  nn.NewLinear(init, in, hidden, true),
		FC2:  nn.NewLinear(init, hidden, out, true),
		Drop: nn.NewDropout(0.1),
	})
}
