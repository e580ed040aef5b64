package p

import (
	nn "github.com/subletml/sublet/nn"
	optim "github.com/subletml/sublet/optim"
	tensor "github.com/subletml/sublet/tensor"
)

func _() {
{
//line nn/doc.go:8
model := nn.NewMLP(nn.Init{Device: dev, Gen: tensor.NewGenerator(1)}, nn.MLPConfig{Sizes: []int{784, 256, 10}})
defer model.Release()                          // parameters and gradients back to the allocator
opt, err := optim.NewAdam(nn.Parameters(model), optim.DefaultAdam())
s := tensor.NewScope()                         // one scope per step
loss := nn.CrossEntropyLoss{}.Loss(model.Forward(x), labels) // x, labels owned by s
loss.Backward()
s.Close()                                      // the step's tensors go
opt.Step()
}
}
