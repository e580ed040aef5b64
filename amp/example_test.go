package amp_test

import (
	"fmt"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/amp"
	"github.com/subletml/sublet/device/cpu"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/optim"
	"github.com/subletml/sublet/tensor"
)

// Under an autocast scope a Linear runs in float16 (its F32 weight is cast once and
// cached for the region), a softmax gives float32, and the loss is float32. The
// GradScaler multiplies the loss before backward so that float16 gradients do not
// underflow, and divides the gradients again before the optimizer steps.
func Example() {
	dev, _ := cpu.New(cpu.Options{})
	a, _ := alloc.For(dev)
	lin := nn.NewLinear(nn.Init{Device: dev, Gen: tensor.NewGenerator(1)}, 4, 3, true)
	opt, _ := optim.NewSGD(nn.Parameters(lin), optim.SGDConfig{LR: 0.1})
	scaler, _ := amp.NewGradScaler(amp.ScalerConfig{})

	s := tensor.NewScope()
	ac, _ := amp.Autocast(s, dtype.F16)
	x := tensor.FromSlice(ac, dev, dtype.F32, []float32{1, 2, 3, 4, 5, 6, 7, 8}, 2, 4) // made in the autocast scope
	y := lin.Forward(x)
	p := y.Softmax(1)
	loss := nn.MSELoss{}.Loss(p, ac.Zeros(dev, dtype.F32, 2, 3))
	fmt.Println("input", x.DType(), "linear", y.DType(), "softmax", p.DType(), "loss", loss.DType())
	fmt.Println("weight-cast cache:", amp.CacheBytes(ac), "bytes (the F16 weight and bias)")

	scaler.Scale(loss).Backward()
	fmt.Println("weight gradient", lin.Weight.Grad().DType(), "scaled by", scaler.GetScale())
	stepped, _ := scaler.Step(opt) // unscales, finds no Inf or NaN, steps
	_ = scaler.Update()
	fmt.Println("stepped:", stepped, "scale now", scaler.GetScale())
	s.Close() // closes the autocast scope: the cache and the step's tensors go
	opt.ZeroGrad(true)

	fmt.Println("held:", a.Stats().RequestedBytes[alloc.StatAll].Current, "bytes, the parameters")
	opt.Release()
	lin.Release()
	// Output:
	// input float32 linear float16 softmax float32 loss float32
	// weight-cast cache: 30 bytes (the F16 weight and bias)
	// weight gradient float32 scaled by 65536
	// stepped: true scale now 65536
	// held: 60 bytes, the parameters
}

// The scaler's state machine: a step whose gradients hold an Inf or a NaN is skipped
// (parameters and optimizer state untouched) and the scale backs off by half; after
// GrowthInterval good steps in a row it doubles. Here an input beyond float16's range
// (65504) overflows in the autocast Linear.
func ExampleGradScaler() {
	dev, _ := cpu.New(cpu.Options{})
	lin := nn.NewLinear(nn.Init{Device: dev, Gen: tensor.NewGenerator(1)}, 2, 1, true)
	opt, _ := optim.NewSGD(nn.Parameters(lin), optim.SGDConfig{LR: 0.01})
	scaler, _ := amp.NewGradScaler(amp.ScalerConfig{InitScale: 1024, GrowthInterval: 2})

	for i, v := range []float32{1, 1e5, 1, 1} {
		s := tensor.NewScope()
		ac, _ := amp.Autocast(s, dtype.F16)
		x := tensor.FromSlice(ac, dev, dtype.F32, []float32{v, v}, 1, 2)
		loss := lin.Forward(x).Sum()
		scaler.Scale(loss).Backward()
		stepped, err := scaler.Step(opt)
		if err == nil {
			err = scaler.Update()
		}
		fmt.Printf("iteration %d: input %g stepped %v, scale %g %v\n", i, v, stepped, scaler.GetScale(), err)
		s.Close()
		opt.ZeroGrad(true)
	}
	opt.Release()
	lin.Release()
	// Output:
	// iteration 0: input 1 stepped true, scale 1024 <nil>
	// iteration 1: input 100000 stepped false, scale 512 <nil>
	// iteration 2: input 1 stepped true, scale 512 <nil>
	// iteration 3: input 1 stepped true, scale 1024 <nil>
}
