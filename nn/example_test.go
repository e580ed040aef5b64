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

// TwoLayer is a module of one's own: a struct of layers embedding nn.Base.
type TwoLayer struct {
	nn.Base
	Hidden *nn.Linear
	Head   *nn.Linear `nn:"classifier"` // named as the Python attribute is
	Scale  *tensor.Tensor
}

func (m *TwoLayer) Forward(x *tensor.Tensor) *tensor.Tensor {
	return m.Head.Forward(m.Hidden.Forward(x).Relu()).Mul(m.Scale)
}

// A module written as a struct: Build finds its parameters in its fields, named as
// PyTorch names the attributes of the same nn.Module, its own parameter first.
func ExampleBuild() {
	dev, _ := cpu.New(cpu.Options{})
	init := nn.Init{Device: dev, Gen: tensor.NewGenerator(1)}
	m := nn.Build(&TwoLayer{
		Hidden: nn.NewLinear(init, 4, 8, true),
		Head:   nn.NewLinear(init, 8, 2, false),
		Scale:  init.Param(func(t *tensor.Tensor) { t.Fill(1) }, 2),
	})
	defer m.Release()
	for _, p := range m.NamedParameters() {
		fmt.Println(p.Name, p.Tensor.Shape())
	}
	s := tensor.NewScope(tensor.NoGrad())
	defer s.Close()
	fmt.Println(m.Forward(s.Ones(dev, dtype.F32, 3, 4)).Shape())
	// Output:
	// scale [2]
	// hidden.weight [8 4]
	// hidden.bias [8]
	// classifier.weight [2 8]
	// [3 2]
}
