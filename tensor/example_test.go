package tensor_test

import (
	"errors"
	"fmt"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device/cpu"
	"github.com/subletml/sublet/device/sim"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
)

// A training step of a one-layer classifier, the way nn's layers use the package:
// parameters belong to their owner, the step's tensors to the step's scope, a layer's
// temporaries to its child scope; the optimizer updates in place. On the meta device
// (sim without backing store) the memory is real and nothing is computed.
func Example() {
	dev, _ := sim.New(sim.Options{Capacity: 1 << 40})
	al, _ := alloc.For(dev)
	live := func() int64 { return al.Stats().RequestedBytes[alloc.StatAll].Current }

	// Parameters: made in a scratch scope, then owned by the caller.
	init := tensor.NewScope(tensor.NoGrad())
	g := tensor.NewGenerator(1)
	w := init.Empty(dev, dtype.F32, 10, 1024).AsParameter() // [out, in]
	w.FillUniform(g, -0.03, 0.03)
	b := init.Zeros(dev, dtype.F32, 10).AsParameter()
	init.Close()
	fmt.Println("parameters:", live())

	step := tensor.NewScope()
	x := step.Empty(dev, dtype.F32, 4096, 1024)
	labels := step.Zeros(dev, dtype.I64, 4096)
	logits := tensor.Layer(x, func(x *tensor.Tensor) *tensor.Tensor {
		return tensor.Linear(x, w, b).Relu() // the Linear output dies with the layer
	})
	loss := tensor.CrossEntropy(logits, labels)
	fmt.Println("after forward:", live()) // + x, labels, ReLU out (held, and saved), lse (and the count), loss
	loss.Backward()
	fmt.Println("after backward:", live()) // - lse, + gradients (x, labels, logits, loss still held)
	step.Close()
	fmt.Println("after the step:", live()) // parameters and gradients

	for _, p := range []*tensor.Tensor{w, b} {
		p.AddScaled(-0.1, p.Grad()) // in place, recorded nowhere
		p.ZeroGrad(true)
	}
	fmt.Println("after the update:", live())
	w.Release()
	b.Release()
	fmt.Println("at the end:", live())
	// Output:
	// parameters: 41000
	// after forward: 17031216
	// after backward: 17055828
	// after the step: 82000
	// after the update: 41000
	// at the end: 0
}

// TryValue turns the panic of tensor math back into an error and gives the function's
// result otherwise: a step that runs out of memory is retried with a smaller batch.
// (Constructors, configuration, files and devices return errors themselves.)
func ExampleTryValue() {
	dev, _ := sim.New(sim.Options{Capacity: 64 << 20}) // meta: memory only
	step := func(batch int) float64 {
		s := tensor.NewScope()
		defer s.Close()
		x := s.Empty(dev, dtype.F32, batch, 1024)
		return float64(x.Exp().Tanh().Bytes())
	}
	for _, batch := range []int{16384, 4096} {
		bytes, err := tensor.TryValue(func() float64 { return step(batch) })
		var oom *alloc.OOMError
		if errors.As(err, &oom) {
			fmt.Printf("batch %d: out of memory (%d bytes asked)\n", batch, oom.Requested)
			continue
		}
		fmt.Printf("batch %d: %.0f bytes per activation\n", batch, bytes)
	}
	// Output:
	// batch 16384: out of memory (67108864 bytes asked)
	// batch 4096: 16777216 bytes per activation
}

// The first steps: values in (FromSlice), an op, values out (ToSlice, Item), and a
// gradient. A leaf that requires grad collects its gradient in Grad; every tensor the
// scope made is released when it closes.
func ExampleFromSlice() {
	dev, _ := cpu.New(cpu.Options{})
	s := tensor.NewScope()
	defer s.Close()
	x := tensor.FromSlice(s, dev, dtype.F32, []float32{1, 2, 3, 4, 5, 6}, 2, 3).SetRequiresGrad(true)
	y := x.Mul(x).Sum() // Σ x²
	fmt.Println("x", x.Shape(), tensor.ToSlice[float32](x))
	fmt.Println("y", y.Item())
	y.Backward()
	fmt.Println("dy/dx", tensor.ToSlice[float32](x.Grad()))
	fmt.Println("rows summed", tensor.ToSlice[float32](x.Sum(1)))
	// Output:
	// x [2 3] [1 2 3 4 5 6]
	// y 91
	// dy/dx [2 4 6 8 10 12]
	// rows summed [6 15]
}

// The 2-norm of a tensor in one pass over it, and its gradient x/‖x‖ (a gradient
// clipper's and a normaliser's building block).
func ExampleTensor_Norm() {
	dev, _ := cpu.New(cpu.Options{})
	s := tensor.NewScope()
	defer s.Close()
	x := tensor.FromSlice(s, dev, dtype.F32, []float32{3, 0, 4, 0}, 2, 2).SetRequiresGrad(true)
	n := x.Norm()
	fmt.Println("norm", n.Item())
	n.Backward()
	fmt.Println("d norm/dx", tensor.ToSlice[float32](x.Grad()))
	// Output:
	// norm 5
	// d norm/dx [0.6 0 0.8 0]
}
