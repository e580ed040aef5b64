package optim_test

import (
	"fmt"

	"github.com/subletml/sublet/device/cpu"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/optim"
	"github.com/subletml/sublet/tensor"
)

// Two parameter groups (a small rate for a pretrained body, a larger one for a new
// head) under three epochs of linear warm-up from a tenth of the rate, then cosine
// annealing to 0 over five.
func ExampleNewSequentialLR() {
	dev, _ := cpu.New(cpu.Options{Capacity: 64 << 20})
	s := tensor.NewScope()
	body := s.Keep(s.Zeros(dev, dtype.F32, 4)).AsParameter()
	head := s.Keep(s.Zeros(dev, dtype.F32, 2)).AsParameter()
	s.Close()
	opt, _ := optim.NewSGDGroups(
		optim.SGDGroup{Params: []*tensor.Tensor{body}, SGDConfig: optim.SGDConfig{LR: 0.01, Momentum: 0.9}},
		optim.SGDGroup{Params: []*tensor.Tensor{head}, SGDConfig: optim.SGDConfig{LR: 0.1, Momentum: 0.9}})
	warm, _ := optim.NewLinearLR(opt, 0.1, 1, 3)
	cos, _ := optim.NewCosineAnnealingLR(opt, 5) // eta_min 0, PyTorch's default
	sched, _ := optim.NewSequentialLR(opt, []*optim.LRScheduler{warm, cos}, []int{3})
	for epoch := range 9 {
		// train one epoch, opt.Step() for each batch, then:
		fmt.Printf("epoch %d: lr %.4f %.4f\n", epoch, opt.LR(0), opt.LR(1))
		sched.Step()
	}
	opt.Release()
	body.Release()
	head.Release()
	// Output:
	// epoch 0: lr 0.0010 0.0100
	// epoch 1: lr 0.0040 0.0400
	// epoch 2: lr 0.0070 0.0700
	// epoch 3: lr 0.0100 0.1000
	// epoch 4: lr 0.0090 0.0905
	// epoch 5: lr 0.0065 0.0655
	// epoch 6: lr 0.0035 0.0345
	// epoch 7: lr 0.0010 0.0095
	// epoch 8: lr 0.0000 0.0000
}
