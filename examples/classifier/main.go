// Command classifier is the program a PyTorch user writes first, written with sublet
// from its documentation: a classifier of its own (a struct of layers, nn.Base), AdamW
// with a cosine schedule, F16 autocast with a GradScaler, gradient clipping after the
// scaler's Unscale, a checkpointed middle block; each epoch an evaluation under
// inference mode whose accuracy is computed on the device (Argmax, Eq, Mean); at the
// end the model saved as safetensors and loaded into a fresh one, which predicts the
// same. Memory is flat: after every epoch the allocator holds the data, the parameters
// and AdamW's state, to the byte.
//
//	go run ./examples/classifier
//	go run ./examples/classifier -epochs 20 -device sim-backed
package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/amp"
	"github.com/subletml/sublet/data"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/examples/internal/demo"
	"github.com/subletml/sublet/examples/internal/toy"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/optim"
	"github.com/subletml/sublet/safetensors"
	"github.com/subletml/sublet/tensor"
)

func main() { os.Exit(demo.Status("classifier", run(os.Args[1:], os.Stdout), os.Stderr)) }

// config is what the flags set.
type config struct {
	device                string
	epochs, batch, width  int
	points, classes, test int
	lr, clip              float64
	seed                  uint64
	save                  string
}

func parseFlags(args []string, out io.Writer) (config, error) {
	var c config
	fs := demo.Flags("classifier", out)
	demo.DeviceFlag(fs, &c.device, "cpu")
	fs.IntVar(&c.epochs, "epochs", 12, "epochs")
	fs.IntVar(&c.batch, "batch", 64, "batch size")
	fs.IntVar(&c.width, "width", 64, "width of the hidden layers")
	fs.IntVar(&c.points, "points", 3000, "points of the spirals, training and test")
	fs.IntVar(&c.test, "test", 600, "of them, the test points")
	fs.IntVar(&c.classes, "classes", 3, "spiral arms: the classes")
	fs.Float64Var(&c.lr, "lr", 0.01, "AdamW's learning rate at the start of the cosine schedule")
	fs.Float64Var(&c.clip, "clip", 1, "the gradients' largest total norm (clip_grad_norm_)")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the data and the parameters")
	fs.StringVar(&c.save, "save", "", "the safetensors file to save the model to (default: a temporary one)")
	if err := demo.Parse(fs, args); err != nil {
		return c, err
	}
	if c.epochs < 1 || c.batch < 1 || c.width < 1 || c.classes < 2 || c.test < 1 || c.points <= c.test {
		return c, fmt.Errorf("need -epochs, -batch, -width, -test ≥ 1, -classes ≥ 2 and -points > -test")
	}
	return c, nil
}

// run trains, evaluates, saves and reloads, printing each epoch's figures.
func run(args []string, out io.Writer) error {
	c, err := parseFlags(args, out)
	if err != nil {
		return err
	}
	dev, a, hasData, err := demo.Open(c.device)
	if err != nil {
		return err
	}
	if !hasData {
		return fmt.Errorf("-device %s keeps no data; the example reads the loss and the accuracy (use cpu or sim-backed)", c.device)
	}
	if c.save == "" {
		dir, err := os.MkdirTemp("", "classifier")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		c.save = filepath.Join(dir, "classifier.safetensors")
	}
	if err := demo.Try(dev, func() error { _, err := train(c, dev, a, out); return err }); err != nil {
		return err
	}
	return demo.Drain(a)
}

// result is what a run measured.
type result struct {
	accuracy []float64 // after each epoch, on the test points
	held     []int64   // bytes tensors hold after each epoch
	steps    int       // optimizer steps asked for
	want     int64     // the data, the parameters and AdamW's two moments
	skipped  int       // steps the scaler skipped for an Inf or a NaN
	same     bool      // the reloaded model predicts every test point as the trained one
}

// train is the program: the loop a PyTorch user writes, line for line.
func train(c config, dev device.Device, a *alloc.Allocator, out io.Writer) (result, error) {
	var r result
	points := toy.Spirals(c.seed, c.points, c.classes)
	trainSet, testSet := points.Split(c.points - c.test)

	model := NewClassifier(nn.Init{Device: dev, Gen: tensor.NewGenerator(c.seed)}, c.width, c.classes)
	defer model.Release()
	cfg := optim.DefaultAdamW()
	cfg.LR = c.lr
	opt, err := optim.NewAdamW(nn.Parameters(model), cfg)
	if err != nil {
		return r, err
	}
	defer opt.Release()
	sched, err := optim.NewCosineAnnealingLR(opt, c.epochs)
	if err != nil {
		return r, err
	}
	scaler, err := amp.NewGradScaler()
	if err != nil {
		return r, err
	}

	held := tensor.NewScope() // the test set, for the whole run
	defer held.Close()
	testX := tensor.FromSlice(held, dev, dtype.F32, testSet.X, testSet.Len(), 2)
	testY := tensor.FromSlice(held, dev, dtype.I64, testSet.Labels)
	r.want = testX.Bytes() + testY.Bytes() + 3*nn.ParameterBytes(model)
	fmt.Fprintf(out, "classifier 2-%d-%d-%d-%d (%d parameters, middle block checkpointed), AdamW lr %g with a cosine schedule, "+
		"F16 autocast with a GradScaler, gradients clipped to norm %g, batch %d, %d epochs on %s\n",
		c.width, c.width, c.width, c.classes, parameters(model), c.lr, c.clip, c.batch, c.epochs, dev.Name())

	sampler := data.Shuffle{N: trainSet.Len(), Batch: c.batch, Seed: c.seed}
	bx, by := make([]float32, 0, 2*c.batch), make([]int64, 0, c.batch)
	for epoch := range c.epochs {
		batches, err := sampler.Batches(epoch)
		if err != nil {
			return r, err
		}
		var sum float64
		for _, idx := range batches {
			step := held.Child() // owns everything the step computes
			bx, by = trainSet.Batch(idx, bx, by)
			x := tensor.FromSlice(step, dev, dtype.F32, bx, len(idx), 2)
			y := tensor.FromSlice(step, dev, dtype.I64, by)

			ac, err := amp.Autocast(step, dtype.F16) // with torch.autocast("cuda", torch.float16):
			if err != nil {
				return r, err
			}
			loss := nn.CrossEntropyLoss{}.Loss(model.Forward(x), y)
			ac.Close()

			scaler.Scale(loss).Backward()
			if err := scaler.Unscale(opt); err != nil { // the gradients' true values, to clip
				return r, err
			}
			nn.ClipGradNorm(step, nn.Parameters(model), c.clip)
			stepped, err := scaler.Step(opt)
			if err != nil {
				return r, err
			}
			r.steps++
			if !stepped {
				r.skipped++
			}
			if err := scaler.Update(); err != nil {
				return r, err
			}
			opt.ZeroGrad(true)
			sum += loss.Item()
			step.Close() // the step's memory goes back here
		}
		sched.Step()

		acc := evaluate(held, model, testX, testY)
		r.accuracy = append(r.accuracy, acc)
		r.held = append(r.held, demo.Read(a).Tensors()) // less the kernels' own (the cuBLAS workspace on a GPU)
		fmt.Fprintf(out, "epoch %2d  loss %.4f  test accuracy %.4f  lr %.5f  scale %g  held %d bytes\n",
			epoch+1, sum/float64(len(batches)), acc, sched.LastLR()[0], scaler.GetScale(), r.held[epoch])
		if r.held[epoch] != r.want {
			return r, fmt.Errorf("epoch %d: %d bytes held, want %d (the test set, the parameters and AdamW's state)", epoch+1, r.held[epoch], r.want)
		}
	}

	if err := safetensors.SaveModuleFile(c.save, model, nil); err != nil {
		return r, err
	}
	fresh := NewClassifier(nn.Init{Device: dev, Gen: tensor.NewGenerator(c.seed + 2)}, c.width, c.classes)
	defer fresh.Release()
	if err := safetensors.LoadModuleFile(c.save, fresh); err != nil {
		return r, err
	}
	r.same = samePredictions(held, model, fresh, testX)
	var names []string
	for _, p := range fresh.NamedParameters() {
		names = append(names, p.Name)
	}
	fmt.Fprintf(out, "saved %s (%v) and loaded it into a fresh model: the same predictions on all %d test points: %v\n",
		filepath.Base(c.save), names, testSet.Len(), r.same)
	fmt.Fprintf(out, "%d of %d steps skipped by the scaler (an Inf or a NaN in the F16 gradients)\n", r.skipped, r.steps)
	return r, nil
}

// evaluate is the share of the points x whose class is y, in evaluation mode (dropout
// off) and under inference mode (no graph), both only for the evaluation.
func evaluate(s *tensor.Scope, model nn.Module, x, y *tensor.Tensor) float64 {
	model.SetTraining(false)
	defer model.SetTraining(true)
	eval := s.Child(tensor.InferenceMode(true)) // with torch.inference_mode():
	defer eval.Close()
	return model.Forward(x).Argmax(1).Eq(y).Mean().Item()
}

// samePredictions reports whether a and b classify every point of x alike.
func samePredictions(s *tensor.Scope, a, b nn.Module, x *tensor.Tensor) bool {
	eval := s.Child(tensor.InferenceMode(true))
	defer eval.Close()
	return a.Forward(x).Argmax(1).Ne(b.Forward(x).Argmax(1)).Sum().Item() == 0
}

// parameters counts the elements of m's parameters.
func parameters(m nn.Module) int {
	n := 0
	for _, p := range nn.Parameters(m) {
		n += p.Numel()
	}
	return n
}
