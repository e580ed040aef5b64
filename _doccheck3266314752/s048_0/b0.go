package p

import (
	amp "github.com/subletml/sublet/amp"
	dtype "github.com/subletml/sublet/dtype"
	nn "github.com/subletml/sublet/nn"
	tensor "github.com/subletml/sublet/tensor"
)

func _() {
{
//line README.md:125
data := tensor.NewScope() // the data set and the run's other long-lived tensors
defer data.Close()
for range steps {
	step := data.Child()                   // owns everything the step computes
	ac, _ := amp.Autocast(step, dtype.F16) // `with torch.autocast(...)`: a region
	loss := nn.CrossEntropyLoss{}.Loss(model.Forward(x), y) // under autocast, belongs to step
	ac.Close()                             // no Keep: a region owns nothing
	scaler.Scale(loss).Backward()
	// ... scaler.Step(opt), scaler.Update(), opt.ZeroGrad(true)
	eval := step.Child(tensor.NoGrad()) // frees its results at Close;
	// ...                              // step.With(tensor.NoGrad()) would keep them in step
	eval.Close()
	step.Close() // the step's memory goes back here
}

}
}
