// Command mlp trains a multilayer perceptron on a seeded synthetic classification set
// (interleaved spirals) and shows where the device memory goes: each epoch's loss,
// test accuracy and allocator figures, then the allocator's summary, a leak check, and
// the bytes left once training is over: exactly the parameters and the optimizer's
// state.
//
//	go run ./examples/mlp                      # cpu, defaults: about ten seconds
//	go run ./examples/mlp -device sim-backed   # a simulated GPU with real data
//	go run ./examples/mlp -device sim          # a simulated GPU without data (memory only)
//	go run ./examples/mlp -optimizer sgd -lr 0.1 -hidden 256,256 -epochs 10
package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/examples/internal/demo"
	"github.com/subletml/sublet/examples/internal/toy"
	"github.com/subletml/sublet/internal/units"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/optim"
	"github.com/subletml/sublet/tensor"
)

func main() { os.Exit(demo.Status("mlp", run(os.Args[1:], os.Stdout), os.Stderr)) }

// config is what the flags set.
type config struct {
	device      string
	samples     int
	classes     int
	hidden      []int
	epochs      int
	batch       int
	lr          float64
	optimizer   string
	momentum    float64
	weightDecay float64
	dropout     float64
	seed        uint64
}

func parseFlags(args []string, out io.Writer) (config, error) {
	var c config
	fs := demo.Flags("mlp", out)
	demo.DeviceFlag(fs, &c.device, "")
	fs.IntVar(&c.samples, "samples", 3000, "points in the data set (a fifth of them held out for testing)")
	fs.IntVar(&c.classes, "classes", 3, "spiral arms (classes)")
	hidden := fs.String("hidden", "128,128", "hidden layer widths, comma-separated")
	fs.IntVar(&c.epochs, "epochs", 20, "passes over the training set")
	fs.IntVar(&c.batch, "batch", 32, "batch size")
	fs.Float64Var(&c.lr, "lr", 0, "learning rate (0: 0.01 for adam and adamw, 0.1 for sgd)")
	fs.StringVar(&c.optimizer, "optimizer", "adam", "adam, adamw or sgd")
	fs.Float64Var(&c.momentum, "momentum", 0.9, "SGD momentum")
	fs.Float64Var(&c.weightDecay, "weight-decay", 0, "weight decay (0 for adamw means its default, 0.01)")
	fs.Float64Var(&c.dropout, "dropout", 0, "dropout probability after each hidden layer")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the data, the initial parameters, the shuffling and dropout")
	if err := demo.Parse(fs, args); err != nil {
		return c, err
	}
	var err error
	if c.hidden, err = units.ParseInts("-hidden", *hidden); err != nil {
		return c, err
	}
	switch {
	case c.samples < 10 || c.classes < 2 || c.epochs < 1 || c.batch < 1:
		return c, fmt.Errorf("need -samples ≥ 10, -classes ≥ 2, -epochs ≥ 1 and -batch ≥ 1")
	case c.lr < 0 || c.dropout < 0 || c.dropout >= 1:
		return c, fmt.Errorf("need -lr ≥ 0 and 0 ≤ -dropout < 1")
	}
	return c, nil
}

// newOptimizer makes the optimizer the flags name; a learning rate of 0 takes the
// example's default for it.
func newOptimizer(c config, params []*tensor.Tensor) (optim.Optimizer, error) {
	lr := func(def float64) float64 {
		if c.lr == 0 {
			return def
		}
		return c.lr
	}
	switch c.optimizer {
	case "adam", "adamw":
		ac := optim.DefaultAdam()
		ac.LR, ac.WeightDecay = lr(0.01), c.weightDecay
		if c.optimizer == "adam" {
			return optim.NewAdam(params, ac)
		}
		if ac.WeightDecay == 0 {
			ac.WeightDecay = optim.DefaultAdamW().WeightDecay
		}
		return optim.NewAdamW(params, ac)
	case "sgd":
		return optim.NewSGD(params, optim.SGDConfig{LR: lr(0.1), Momentum: c.momentum, WeightDecay: c.weightDecay})
	}
	return nil, fmt.Errorf("-optimizer %q: want adam, adamw or sgd", c.optimizer)
}

// run parses args, trains and reports on stdout.
func run(args []string, stdout io.Writer) error {
	c, err := parseFlags(args, stdout)
	if err != nil {
		return err
	}
	dev, a, hasData, err := demo.Open(c.device)
	if err != nil {
		return err
	}
	return demo.Try(dev, func() error { return train(c, dev, a, hasData, stdout) })
}

// train trains the model and prints the report. Tensor math panics (out of memory, no
// kernels) reach run through demo.Try; the deferred releases run on the way.
func train(c config, dev device.Device, a *alloc.Allocator, hasData bool, out io.Writer) error {
	data := toy.Spirals(c.seed, c.samples, c.classes)
	trainSet, testSet := data.Split(c.samples * 4 / 5)
	sizes := append(append([]int{data.Dim}, c.hidden...), c.classes)
	gen := tensor.NewGenerator(c.seed)
	model := nn.NewMLP(nn.Init{Device: dev, Gen: gen}, nn.MLPConfig{Sizes: sizes, Dropout: c.dropout})
	defer model.Release()
	opt, err := newOptimizer(c, nn.Parameters(model))
	if err != nil {
		return err
	}
	defer opt.Release()

	params := nn.ParameterBytes(model)
	fmt.Fprintf(out, "sublet examples/mlp: %d spiral arms, %d points (%d train, %d test), MLP %s (%d parameters, %s), %s %s, batch %d, %d epochs on %s\n",
		c.classes, c.samples, trainSet.Len(), testSet.Len(), units.JoinInts(sizes, "-"), params/4, units.Bytes(params), c.optimizer, describe(opt), c.batch, c.epochs, dev.Name())
	if !hasData {
		fmt.Fprintf(out, "%s keeps no data: ops allocate their results and compute nothing, so only the memory figures are real\n", dev.Name())
	}

	shuffle := rand.New(rand.NewPCG(c.seed, 2))
	var xb []float32
	var lb []int64
	acc := 0.0
	for epoch := 1; epoch <= c.epochs; epoch++ {
		model.SetTraining(true)
		perm := shuffle.Perm(trainSet.Len())
		sum, steps := 0.0, 0
		for b := 0; b < len(perm); b += c.batch {
			xb, lb = trainSet.Batch(perm[b:min(b+c.batch, len(perm))], xb, lb)
			loss := step(dev, gen, model, opt, xb, lb, hasData)
			sum += loss
			steps++
		}
		var testLoss float64
		testLoss, acc = evaluate(dev, model, testSet, hasData)
		m := demo.Read(a)
		fmt.Fprintf(out, "epoch %3d/%d  %s  %s  allocated %s (peak %s)  reserved %s\n", epoch, c.epochs,
			figure("loss", sum/float64(steps), hasData), figure("test loss", testLoss, hasData)+"  "+figure("test accuracy", acc, hasData),
			units.Bytes(m.Allocated), units.Bytes(m.PeakAllocated), units.Bytes(m.Reserved))
	}
	if hasData {
		fmt.Fprintf(out, "final test accuracy %.3f (chance %.3f)\n", acc, 1/float64(c.classes))
	}

	state := opt.StateBytes()
	m := demo.Read(a)
	requested := m.Tensors()
	fmt.Fprint(out, m.BackendLine())
	fmt.Fprintf(out, "after training: %d bytes requested = parameters %d + %s state %d (gradients dropped by ZeroGrad(true), activations by their scopes)\n",
		requested, params, c.optimizer, state)
	if requested != params+state {
		return fmt.Errorf("the allocator holds %d bytes, not parameters + optimizer state = %d: something leaked", requested, params+state)
	}
	fmt.Fprintln(out, a.Summary(true))

	runtime.GC()
	runtime.GC() // cleanups run after the cycle that found the handles
	if leaks := tensor.Leaks(); len(leaks) > 0 {
		for _, l := range leaks {
			fmt.Fprintf(out, "LEAK: %d handles, %d bytes on %s, made at\n%s\n", l.Count, l.Bytes, l.Device, l.Site)
		}
		return fmt.Errorf("%d allocation sites leaked tensor handles", len(leaks))
	}
	fmt.Fprintln(out, "leak check: every tensor handle was released (tensor.Leaks is empty)")

	opt.Release()
	model.Release()
	if err := demo.Drain(a); err != nil {
		return err
	}
	fmt.Fprintln(out, "after releasing the model and the optimizer and emptying the cache: 0 bytes allocated, 0 reserved")
	return nil
}

// step runs one training step on a batch and returns its loss (0 without data): the
// forward and backward in a scope that closes before the optimizer steps, so only the
// parameters, their gradients and the optimizer state are alive during Step, and only
// the parameters and the state after ZeroGrad(true).
func step(dev device.Device, gen *tensor.Generator, model nn.Module, opt optim.Optimizer, x []float32, labels []int64, hasData bool) float64 {
	s := tensor.NewScope(tensor.WithGenerator(gen))
	n := len(labels)
	xt := tensor.FromSlice(s, dev, dtype.F32, x, n, len(x)/n)
	lt := tensor.FromSlice(s, dev, dtype.I64, labels)
	loss := nn.CrossEntropyLoss{}.Loss(model.Forward(xt), lt)
	loss.Backward()
	v := 0.0
	if hasData {
		v = loss.Item()
	}
	s.Close()
	opt.Step()
	opt.ZeroGrad(true)
	return v
}

// evaluate returns the loss and accuracy on d, computed under NoGrad in evaluation
// mode: no graph, and each layer's temporaries die at its boundary.
func evaluate(dev device.Device, model nn.Module, d toy.Dataset, hasData bool) (loss, accuracy float64) {
	model.SetTraining(false)
	s := tensor.NewScope(tensor.NoGrad())
	defer s.Close()
	logits := model.Forward(tensor.FromSlice(s, dev, dtype.F32, d.X, d.Len(), d.Dim))
	l := nn.CrossEntropyLoss{}.Loss(logits, tensor.FromSlice(s, dev, dtype.I64, d.Labels))
	pred := logits.Argmax(1)
	if !hasData {
		return 0, 0
	}
	correct := 0
	for i, p := range tensor.ToSlice[int64](pred) {
		if p == d.Labels[i] {
			correct++
		}
	}
	return l.Item(), float64(correct) / float64(d.Len())
}

// describe names an optimizer's hyper-parameters.
func describe(o optim.Optimizer) string {
	switch o := o.(type) {
	case *optim.SGD:
		c := o.Config()
		return fmt.Sprintf("lr %g momentum %g weight decay %g", c.LR, c.Momentum, c.WeightDecay)
	case *optim.Adam:
		c := o.Config()
		return fmt.Sprintf("lr %g betas (%g, %g) eps %g weight decay %g", c.LR, c.Beta1, c.Beta2, c.Eps, c.WeightDecay)
	}
	return ""
}

// figure formats a named value, or says there is none on a device without data.
func figure(name string, v float64, hasData bool) string {
	if !hasData {
		return name + " -"
	}
	return fmt.Sprintf("%s %.4f", name, v)
}
