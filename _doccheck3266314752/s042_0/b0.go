package p

import (
	nn "github.com/subletml/sublet/nn"
	optim "github.com/subletml/sublet/optim"
)

func _() {
{
//line optim/doc.go:8
opt, err := optim.NewAdamW(nn.Parameters(model)) // PyTorch's defaults; or pass an AdamWConfig
defer opt.Release()   // the optimizer state back to the allocator
// ... each step: forward and Backward in a scope, close it, then
opt.Step()            // updates in place every parameter that has a gradient
opt.ZeroGrad(true)    // drops the gradients: their memory returns to the allocator
}
}
