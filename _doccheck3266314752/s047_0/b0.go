package p

import (
	gradcheck "github.com/subletml/sublet/tensor/gradcheck"
	tensor "github.com/subletml/sublet/tensor"
)

func _() {
{
//line tensor/gradcheck/gradcheck.go:4
err := gradcheck.Check(dev, func(s *tensor.Scope, in []*tensor.Tensor) *tensor.Tensor {
	return in[0].Tanh().Mul(in[1])
}, []gradcheck.Input{{Shape: []int{2, 3}, Data: a}, {Shape: []int{2, 3}, Data: b}}, gradcheck.Options{})
}
}
