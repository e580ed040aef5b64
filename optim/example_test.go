package optim_test

import (
	"fmt"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device/cpu"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/optim"
	"github.com/subletml/sublet/tensor"
)

// The training loop: each step's forward and backward run in a scope of their own,
// closed before the optimizer steps; ZeroGrad(true) then gives the gradients' memory
// back. Here SGD with momentum fits y = 2x + 1.
func Example() {
	dev, _ := cpu.New(cpu.Options{})
	a, _ := alloc.For(dev)
	model := nn.NewLinear(nn.Init{Device: dev, Gen: tensor.NewGenerator(1)}, 1, 1, true)
	opt, _ := optim.NewSGD(nn.Parameters(model), optim.SGDConfig{LR: 0.1, Momentum: 0.5})
	xs := []float32{-1, -0.5, 0, 0.5, 1}
	ys := []float32{-1, 0, 1, 2, 3}

	for step := 1; step <= 20; step++ {
		s := tensor.NewScope()
		x := tensor.FromSlice(s, dev, dtype.F32, xs, 5, 1)
		y := tensor.FromSlice(s, dev, dtype.F32, ys, 5, 1)
		loss := nn.MSELoss{}.Loss(model.Forward(x), y)
		loss.Backward()
		if step%5 == 0 {
			fmt.Printf("step %d loss %.6f\n", step, loss.Item())
		}
		s.Close()
		opt.Step()
		opt.ZeroGrad(true)
	}
	fmt.Printf("w %.3f b %.3f\n", model.Weight.Item(), model.Bias.Item())
	fmt.Println("held:", a.Stats().RequestedBytes[alloc.StatAll].Current, "bytes = parameters", nn.ParameterBytes(model), "+ momentum", opt.StateBytes())

	opt.Release()
	model.Release()
	fmt.Println("after Release:", a.Stats().RequestedBytes[alloc.StatAll].Current)
	// Output:
	// step 5 loss 0.995364
	// step 10 loss 0.041176
	// step 15 loss 0.000537
	// step 20 loss 0.000000
	// w 2.001 b 1.000
	// held: 16 bytes = parameters 8 + momentum 8
	// after Release: 0
}
