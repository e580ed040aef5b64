package main

import (
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/optim"
	"github.com/subletml/sublet/tensor"
)

// train is the loop the README shows: a model, an optimizer, a scope for the data and
// one per step. onStep sees each step's loss once its scope closed; it returns the
// accuracy at the end.
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

// accuracy is the share of points model classifies as y says, computed on the device
// in a no-grad child scope of s, which releases what it made when it closes.
func accuracy(s *tensor.Scope, model nn.Module, x, y *tensor.Tensor) float64 {
	eval := s.Child(tensor.NoGrad())
	defer eval.Close()
	return model.Forward(x).Argmax(1).Eq(y).Mean().Item()
}

// xor is 64 points on a grid over [-1, 1]², labelled 1 where the coordinates have the
// same sign.
func xor() ([]float32, []int64) {
	var xs []float32
	var labels []int64
	for i := range 8 {
		for j := range 8 {
			a, b := float32(i)/3.5-1, float32(j)/3.5-1
			xs = append(xs, a, b)
			label := int64(0)
			if a*b > 0 {
				label = 1
			}
			labels = append(labels, label)
		}
	}
	return xs, labels
}
