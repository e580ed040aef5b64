package gradcheck_test

import (
	"fmt"

	"github.com/subletml/sublet/device/cpu"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/gradcheck"
)

// Check an expression's gradients against finite differences: nil when every element
// agrees. ReLU has no derivative at 0 (backward says 0, the central difference ½), so
// a check there fails and says where.
func Example() {
	dev, _ := cpu.New(cpu.Options{})
	f := func(s *tensor.Scope, in []*tensor.Tensor) *tensor.Tensor {
		return in[0].Tanh().Mul(in[1]).Sum(1)
	}
	err := gradcheck.Check(dev, f, []gradcheck.Input{
		{Shape: []int{2, 3}, Data: []float64{-1, -0.5, 0, 0.5, 1, 2}},
		{Shape: []int{2, 3}, Data: []float64{3, 1, 4, 1, 5, 9}},
	}, gradcheck.Options{})
	fmt.Println("tanh·w:", err)

	relu := func(s *tensor.Scope, in []*tensor.Tensor) *tensor.Tensor { return in[0].Relu() }
	err = gradcheck.Check(dev, relu, []gradcheck.Input{{Shape: []int{3}, Data: []float64{-1, 0, 1}}}, gradcheck.Options{})
	fmt.Println("relu at -1, 0, 1 fails:", err != nil)
	// Output:
	// tanh·w: <nil>
	// relu at -1, 0, 1 fails: true
}
