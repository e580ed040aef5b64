package p

import (
	fmt "fmt"
	nn "github.com/subletml/sublet/nn"
	tensor "github.com/subletml/sublet/tensor"
)

func _() {
{
//line docs/gpu.md:183
// trainStep records one SGD step in s and keeps its loss there.
trainStep := func(s *tensor.Scope) *tensor.Tensor {
	c := s.Child()
	defer c.Close()
	loss := nn.CrossEntropyLoss{}.Loss(model.Forward(c.Bind(x)), c.Bind(labels))
	loss.Backward()
	opt.Step()
	opt.ZeroGrad(true)
	return c.Keep(loss)
}
for range 3 { // warm-up: the gradients' and the optimizer's memory exist before the capture
	s := tensor.NewScope()
	trainStep(s)
	s.Close()
}
keep := tensor.NewScope() // the graph's output lives here
defer keep.Close()
var loss *tensor.Tensor
g, err := tensor.CaptureGraph(dev, func() { loss = trainStep(keep) })
if err != nil { // errors.Is(err, tensor.ErrCapture): the step cannot be recorded
	fmt.Println(err)
	return
}
defer g.Release()
for range steps {
	if err := g.Replay(); err != nil { // forward, backward, SGD: one launch
		fmt.Println(err)
		return
	}
	fmt.Println(loss.Item()) // waits for the replay
}

}
}
