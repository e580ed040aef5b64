package nn_test

import (
	"errors"
	"fmt"
	"math"

	"github.com/subletml/sublet/device/cpu"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/tensor"
)

// Gradients (3, 4) and (12) have a total 2-norm of 13; clipping to 6.5 halves them
// (less the 1e-6 PyTorch adds to the norm).
func ExampleClipGradNorm() {
	dev, _ := cpu.New(cpu.Options{Capacity: 64 << 20})
	s := tensor.NewScope()
	defer s.Close()
	a := s.Keep(s.Zeros(dev, dtype.F32, 2)).AsParameter()
	b := s.Keep(s.Zeros(dev, dtype.F32, 1)).AsParameter()
	defer a.Release()
	defer b.Release()
	loss := s.Bind(a).Mul(tensor.FromSlice(s, dev, dtype.F32, []float32{3, 4})).Sum().
		Add(s.Bind(b).Mul(tensor.FromSlice(s, dev, dtype.F32, []float32{12})).Sum())
	loss.Backward()
	total := nn.ClipGradNorm(s, []*tensor.Tensor{a, b}, 6.5) // clip_grad_norm_([a, b], 6.5)
	fmt.Printf("norm %.4f, gradients %.4f %.4f\n", total.Item(), tensor.ToSlice[float32](a.Grad()), tensor.ToSlice[float32](b.Grad()))
	// Output: norm 13.0000, gradients [1.5000 2.0000] [6.0000]
}

// A gradient holding an Inf: with ErrorIfNonfinite, ClipGradNorm fails as PyTorch
// raises, leaving the gradients alone; tensor.Try gives the failure as an error.
func ExampleClipGradNorm_errorIfNonfinite() {
	dev, _ := cpu.New(cpu.Options{Capacity: 64 << 20})
	s := tensor.NewScope()
	defer s.Close()
	a := s.Keep(s.Zeros(dev, dtype.F32, 2)).AsParameter()
	defer a.Release()
	s.Bind(a).Mul(tensor.FromSlice(s, dev, dtype.F32, []float32{3, float32(math.Inf(1))})).Sum().Backward()
	err := tensor.Try(func() { nn.ClipGradNorm(s, []*tensor.Tensor{a}, 1, nn.ClipOptions{ErrorIfNonfinite: true}) })
	fmt.Println(errors.Is(err, nn.ErrNonFiniteNorm), tensor.ToSlice[float32](a.Grad()))
	// Output: true [3 +Inf]
}
