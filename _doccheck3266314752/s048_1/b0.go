package p

import (
	device "github.com/subletml/sublet/device"
	dtype "github.com/subletml/sublet/dtype"
	nn "github.com/subletml/sublet/nn"
	optim "github.com/subletml/sublet/optim"
	tensor "github.com/subletml/sublet/tensor"
)

//line README.md:72
func train(dev device.Device, steps int, onStep func(step int, loss float64) error) (float64, error) {
	model := nn.NewMLP(nn.Init{Device: dev, Gen: tensor.NewGenerator(1)}, nn.MLPConfig{Sizes: []int{2, 16, 2}})
	defer model.Release()
	cfg := optim.DefaultAdam()
	cfg.LR = 0.05
	opt, err := optim.NewAdam(nn.Parameters(model), cfg)
	if err != nil {
		return 0, err
	}
	defer opt.Release()

	data := tensor.NewScope() // owns the data set for the whole run
	defer data.Close()
	xs, labels := xor()
	x := tensor.FromSlice(data, dev, dtype.F32, xs, len(labels), 2)
	y := tensor.FromSlice(data, dev, dtype.I64, labels)
	for i := 1; i <= steps; i++ {
		step := data.Child() // data's only open child: it owns what the step computes
		loss := nn.CrossEntropyLoss{}.Loss(model.Forward(x), y)
		loss.Backward()
		opt.Step()
		opt.ZeroGrad(true)
		l := loss.Item()
		step.Close() // the step's tensors go back to the allocator here
		if err := onStep(i, l); err != nil {
			return 0, err
		}
	}
	return accuracy(data, model, x, y), nil
}

