package optim_test

import (
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
)

// param makes an F32 parameter holding data.
func param(d device.Device, data ...float32) *tensor.Tensor {
	s := tensor.NewScope()
	defer s.Close()
	return tensor.FromSlice(s, d, dtype.F32, data).AsParameter()
}

// setGrad gives p the gradient g (through a backward of Σ p·g), replacing any.
func setGrad(d device.Device, p *tensor.Tensor, g ...float32) {
	p.ZeroGrad(true)
	s := tensor.NewScope()
	defer s.Close()
	p.Mul(tensor.FromSlice(s, d, dtype.F32, g)).Sum().Backward()
}

func vals(t *tensor.Tensor) []float32 { return tensor.ToSlice[float32](t) }
