package optim_test

import (
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
)

// param makes an F32 parameter holding data.
func param(d device.Device, data ...float32) *tensor.Tensor { return paramOf(d, dtype.F32, data) }

// paramOf makes a parameter of dt holding data.
func paramOf[T tensor.Elem](d device.Device, dt dtype.DType, data []T) *tensor.Tensor {
	s := tensor.NewScope()
	defer s.Close()
	return tensor.FromSlice(s, d, dt, data).AsParameter()
}

// setGrad gives p the gradient g (through a backward of Σ p·g, in p's type), replacing
// any.
func setGrad[T tensor.Elem](d device.Device, p *tensor.Tensor, g ...T) {
	p.ZeroGrad(true)
	s := tensor.NewScope()
	defer s.Close()
	p.Mul(tensor.FromSlice(s, d, p.DType(), g)).Sum().Backward()
}

func vals(t *tensor.Tensor) []float32 { return tensor.ToSlice[float32](t) }
