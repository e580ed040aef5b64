package main

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/amp"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/examples/internal/demo"
	"github.com/subletml/sublet/examples/internal/toy"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/optim"
	"github.com/subletml/sublet/tensor"
)

// result is what one run measured.
type result struct {
	name    string
	losses  []float64 // per step
	skipped []int     // the steps skipped for an Inf or a NaN
	scales  []float64 // the scale after each step
	last    memory    // the last step's memory
	left    int64     // bytes tensors hold after training: parameters + optimizer state
	kernels string    // demo.Memory.BackendLine after training
	params  int64
	state   int64
}

// memory is one step's memory, in bytes beyond what was held when it began (the
// parameters, the optimizer state and the batch).
type memory struct {
	forward int64 // held after forward and loss: activations, and the cache under autocast
	cache   int64 // the weight-cast cache then
	saved   int64 // held once the autocast region closed and the logits went: what the graph saved
	peak    int64 // the most held during the step
}

// train runs c's training on a fresh device, in mixed precision or in F32, printing
// progress, and checks that it left nothing. Tensor math panics (out of memory) come
// back as errors.
func train(c config, mixed bool, out io.Writer) (result, error) {
	dev, al, err := openDevice(c)
	if err != nil {
		return result{}, err
	}
	var r result
	if err := demo.Try(dev, func() error { r, err = trainOn(c, mixed, dev, al, out); return err }); err != nil {
		return r, err
	}
	return r, demo.Drain(al)
}

func trainOn(c config, mixed bool, dev device.Device, al *alloc.Allocator, out io.Writer) (result, error) {
	r := result{name: "F32"}
	if mixed {
		r.name = "AMP F16"
	}
	sizes := []int{c.features}
	for range c.layers {
		sizes = append(sizes, c.hidden)
	}
	model := nn.NewMLP(nn.Init{Device: dev, Gen: tensor.NewGenerator(c.seed)}, nn.MLPConfig{Sizes: append(sizes, c.classes)})
	defer model.Release()
	opt, err := optim.NewSGD(nn.Parameters(model), optim.SGDConfig{LR: c.lr, Momentum: 0.9})
	if err != nil {
		return r, err
	}
	defer opt.Release()
	scaler, err := amp.NewGradScaler(amp.ScalerConfig{InitScale: c.initScale, GrowthInterval: c.growthInterval, Disabled: !mixed})
	if err != nil {
		return r, err
	}

	fmt.Fprintf(out, "\n%s run on %s\n", r.name, dev.Name())
	teacher, data := toy.NewTeacher(c.seed, c.features, c.classes), rand.New(rand.NewPCG(c.seed, 0xa3b))
	for i := 1; i <= c.steps; i++ {
		x, labels := teacher.Batch(data, c.batch)
		before := scaler.GetScale()
		loss, stepped, m, err := step(al, dev, model, opt, scaler, x, labels, mixed)
		if err != nil {
			return r, fmt.Errorf("%s step %d: %w", r.name, i, err)
		}
		after := scaler.GetScale()
		r.losses, r.scales, r.last = append(r.losses, loss), append(r.scales, after), m
		switch {
		case !stepped:
			r.skipped = append(r.skipped, i)
			fmt.Fprintf(out, "step %3d  loss %.4f  Inf/NaN in the gradients: step skipped, scale %s -> %s\n", i, loss, power(before), power(after))
		case after != before:
			fmt.Fprintf(out, "step %3d  loss %.4f  %d good steps in a row: scale %s -> %s\n", i, loss, c.growthInterval, power(before), power(after))
		case i == 1 || i%c.every == 0 || i == c.steps:
			fmt.Fprintf(out, "step %3d  loss %.4f", i, loss)
			if mixed {
				fmt.Fprintf(out, "  scale %s", power(after))
			}
			fmt.Fprintln(out)
		}
	}
	r.params, r.state = nn.ParameterBytes(model), opt.StateBytes()
	// On a GPU the cuBLAS workspace stays in the allocator too: it is not the model's.
	m := demo.Read(al)
	r.left, r.kernels = m.Tensors(), m.BackendLine()
	return r, nil
}

// step is one training step on a batch: forward and loss (under F16 autocast when
// mixed), backward of the scaled loss, the scaler's step and update, and the
// gradients dropped. Everything the step made is released when it returns.
func step(al *alloc.Allocator, dev device.Device, model nn.Module, opt optim.Optimizer, scaler *amp.GradScaler,
	x []float32, labels []int64, mixed bool) (loss float64, stepped bool, m memory, err error) {
	s := tensor.NewScope()
	defer s.Close()
	xb := tensor.FromSlice(s, dev, dtype.F32, x, len(labels), len(x)/len(labels))
	yb := tensor.FromSlice(s, dev, dtype.I64, labels)
	held := func() int64 { return demo.Read(al).Tensors() }
	al.ResetPeakStats()
	start := held()

	fwd := s
	if mixed {
		if fwd, err = amp.Autocast(s, dtype.F16); err != nil {
			return 0, false, m, err
		}
	}
	// In the autocast region the ops on xb run under its policy; their results belong
	// to s, so the loss outlives the region (torch.autocast's `with` block).
	logits := model.Forward(xb)
	l := nn.CrossEntropyLoss{}.Loss(logits, yb)
	m.forward, m.cache = held()-start, amp.CacheBytes(fwd)
	if mixed {
		fwd.Close()
	}
	logits.Release() // the loss saved what its backward reads (under autocast, an F32 cast)
	m.saved = held() - start

	scaler.Scale(l).Backward()
	if stepped, err = scaler.Step(opt); err != nil {
		return 0, false, m, err
	}
	if err = scaler.Update(); err != nil {
		return 0, false, m, err
	}
	m.peak = demo.Read(al).PeakTensors() - start
	opt.ZeroGrad(true)
	return l.Item(), stepped, m, nil
}

// report prints the comparison of the two runs.
func report(out io.Writer, c config, f32, mixed result) {
	mean := func(v []float64) float64 {
		n := min(len(v), c.every)
		sum := 0.0
		for _, x := range v[len(v)-n:] {
			sum += x
		}
		return sum / float64(n)
	}
	fmt.Fprintf(out, "\nloss over the last %d steps: F32 %.4f, AMP F16 %.4f (first step: %.4f and %.4f)\n",
		min(c.steps, c.every), mean(f32.losses), mean(mixed.losses), f32.losses[0], mixed.losses[0])
	fmt.Fprintf(out, "AMP: %d of %d steps skipped (steps %v), scale %s -> %s\n",
		len(mixed.skipped), c.steps, mixed.skipped, power(c.initScale), power(mixed.scales[len(mixed.scales)-1]))

	fmt.Fprintf(out, "\nmemory of the last step, bytes beyond the parameters, optimizer state and batch:\n")
	var rows [][]string
	row := func(name string, a, b int64) {
		ratio := "-"
		if a > 0 {
			ratio = fmt.Sprintf("%.1f%%", 100*float64(b)/float64(a))
		}
		rows = append(rows, []string{name, fmt.Sprint(a), fmt.Sprint(b), ratio})
	}
	row("held after forward and loss", f32.last.forward, mixed.last.forward)
	row("  of which the weight-cast cache", f32.last.cache, mixed.last.cache)
	row("saved for backward (region closed, logits released)", f32.last.saved, mixed.last.saved)
	row("peak during the step", f32.last.peak, mixed.last.peak)
	demo.Table(out, "", []string{"", "F32", "AMP F16", "AMP/F32"}, rows)
	fmt.Fprintln(out, "(the peak comes during backward: what the graph saved, still alive, beside the gradients backward makes; the parameters' gradients are F32 in both runs)")
	for _, r := range []result{f32, mixed} {
		fmt.Fprint(out, r.kernels)
		fmt.Fprintf(out, "%s after training: %d bytes requested = parameters %d + optimizer state %d\n", r.name, r.left, r.params, r.state)
	}
}

// power writes a scale as a power of two when it is one.
func power(s float64) string {
	if frac, exp := math.Frexp(s); frac == 0.5 {
		return fmt.Sprintf("2^%d", exp-1)
	}
	return fmt.Sprintf("%g", s)
}
