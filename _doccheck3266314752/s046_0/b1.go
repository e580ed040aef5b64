package p

import (
	dtype "github.com/subletml/sublet/dtype"
	nn "github.com/subletml/sublet/nn"
	tensor "github.com/subletml/sublet/tensor"
)

func _() {
{
//line tensor/doc.go:35
data := tensor.NewScope()      // lives as long as the data
x := tensor.FromSlice(data, dev, dtype.F32, xs, rows, 2)
for range steps {
	step := data.Child()       // data's only open child: ops on x run in it
	loss := nn.CrossEntropyLoss{}.Loss(model.Forward(x), y)
	loss.Backward()
	opt.Step()
	opt.ZeroGrad(true)
	step.Close()               // this step's tensors go back to the allocator
}
}
}
