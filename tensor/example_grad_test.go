package tensor_test

import (
	"fmt"

	"github.com/subletml/sublet/device/cpu"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
)

// Gradients returned rather than accumulated (torch.autograd.grad): d/dx Σ x²·w = 2xw,
// d/dw = x², and the leaves' own gradients stay as they were.
func ExampleGrad() {
	dev, _ := cpu.New(cpu.Options{Capacity: 64 << 20})
	s := tensor.NewScope()
	defer s.Close()
	x := tensor.FromSlice(s, dev, dtype.F32, []float32{1, 2, 3}).SetRequiresGrad(true)
	w := tensor.FromSlice(s, dev, dtype.F32, []float32{0.5, -1, 2}).SetRequiresGrad(true)
	y := x.Mul(x).Mul(w).Sum()
	g := tensor.Grad([]*tensor.Tensor{y}, []*tensor.Tensor{x, w}, tensor.GradOptions{})
	fmt.Println(tensor.ToSlice[float32](g[0]), tensor.ToSlice[float32](g[1]), x.Grad() == nil)
	// Output: [1 -4 12] [1 4 9] true
}
