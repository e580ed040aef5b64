package checkpoint_test

import (
	"fmt"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/checkpoint"
	"github.com/subletml/sublet/device/sim"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/tensor"
)

// Sixteen Linear+ReLU layers of width 256 on a batch of 4096, without and with
// checkpoint.Sequential in 4 segments: what the forward keeps for backward, and the
// peak of the step (the segments' forwards run again during backward). The meta
// device (sim without data) makes the memory exact without computing anything.
func Example() {
	dev, _ := sim.New(sim.Options{})
	a, _ := alloc.For(dev) // the allocator tensors on dev use
	sizes := make([]int, 17)
	for i := range sizes {
		sizes[i] = 256
	}
	model := nn.NewMLP(nn.Init{Device: dev, Gen: tensor.NewGenerator(1)}, nn.MLPConfig{Sizes: sizes})
	var layers []checkpoint.Layer
	for _, m := range model.Children {
		layers = append(layers, m)
	}
	mib := func(n int64) float64 { return float64(n) / (1 << 20) }
	held := func() int64 { return a.Stats().RequestedBytes[alloc.StatAll].Current }
	params := held()
	fmt.Printf("parameters %.1f MiB\n", mib(params))

	for _, segments := range []int{0, 4} {
		a.ResetPeakStats()
		s := tensor.NewScope()
		x := s.Empty(dev, dtype.F32, 4096, 256) // 4 MiB, as each layer's output
		var out *tensor.Tensor
		if segments == 0 {
			out = model.Forward(x)
		} else {
			out = checkpoint.Sequential(layers, segments, x)
		}
		loss := out.Sum()
		fmt.Printf("segments %d: after forward %4.1f MiB beyond the parameters", segments, mib(held()-params))
		loss.Backward()
		fmt.Printf(", step peak %4.1f MiB\n", mib(a.Stats().RequestedBytes[alloc.StatAll].Peak-params))
		s.Close()
		for _, p := range nn.Parameters(model) {
			p.ZeroGrad(true)
		}
	}
	model.Release()
	fmt.Println("at the end:", held())
	// Output:
	// parameters 4.0 MiB
	// segments 0: after forward 68.0 MiB beyond the parameters, step peak 76.3 MiB
	// segments 4: after forward 36.0 MiB beyond the parameters, step peak 44.3 MiB
	// at the end: 0
}
