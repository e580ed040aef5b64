package p

import (
	amp "github.com/subletml/sublet/amp"
	dtype "github.com/subletml/sublet/dtype"
	nn "github.com/subletml/sublet/nn"
)

func _() {
{
//line amp/doc.go:13
ac, err := amp.Autocast(step, dtype.F16) // step: the loop's step scope
// ... the forward ...
loss := nn.CrossEntropyLoss{}.Loss(model.Forward(x), y) // x owned by the data scope
ac.Close()
scaler.Scale(loss).Backward() // the loss belongs to step, not to the region
}
}
