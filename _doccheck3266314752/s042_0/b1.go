package p

import (
	optim "github.com/subletml/sublet/optim"
)

func _() {
{
//line optim/doc.go:34
warm, _ := optim.NewLinearLR(opt, 0.1, 1, 5)
cos, _ := optim.NewCosineAnnealingLR(opt, 95) // eta_min: PyTorch's default 0
sched, _ := optim.NewSequentialLR(opt, []*optim.LRScheduler{warm, cos}, []int{5})
for epoch := range 100 { train(); sched.Step() }
}
}
