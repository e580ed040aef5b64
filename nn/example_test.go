package nn_test

import (
	"fmt"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device/cpu"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/tensor"
)

// Build a model, look at its parameters, run it. The parameters belong to the model
// (Release gives their memory back); the input and the result belong to the caller's
// scope, which here records no graph (evaluation).
func Example() {
	dev, _ := cpu.New(cpu.Options{})
	a, _ := alloc.For(dev)
	model := nn.NewMLP(nn.Init{Device: dev, Gen: tensor.NewGenerator(1)}, nn.MLPConfig{Sizes: []int{2, 16, 3}})
	for _, p := range model.NamedParameters() {
		fmt.Println(p.Name, p.Tensor.Shape())
	}
	fmt.Println("parameter bytes:", nn.ParameterBytes(model))

	s := tensor.NewScope(tensor.NoGrad())
	x := tensor.FromSlice(s, dev, dtype.F32, []float32{0.5, -1, 2, 0.25}, 2, 2) // a batch of two points
	logits := model.Forward(x)
	fmt.Println("logits:", logits.Shape(), "class of each point:", tensor.ToSlice[int64](logits.Argmax(1)))
	s.Close()
	fmt.Println("after the scope:", a.Stats().RequestedBytes[alloc.StatAll].Current, "bytes requested (the parameters)")

	model.Release()
	fmt.Println("after Release:", a.Stats().RequestedBytes[alloc.StatAll].Current)
	// Output:
	// 0.weight [16 2]
	// 0.bias [16]
	// 2.weight [3 16]
	// 2.bias [3]
	// parameter bytes: 396
	// logits: [2 3] class of each point: [1 1]
	// after the scope: 396 bytes requested (the parameters)
	// after Release: 0
}
