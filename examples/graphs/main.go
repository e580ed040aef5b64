// Command graphs trains a small MLP with SGD twice from the same start: once step by
// step (eager), once with one step captured as a CUDA graph (tensor.CaptureGraph) and
// replayed, which runs the whole step's kernels with one launch and none of the host's
// per-op work. It prints each run's losses, steps per second and device allocations per
// step, and checks that both runs end with the same parameters bit for bit.
//
// Both runs first take the same warm-up steps eagerly, so that the gradients' and the
// optimizer's memory exist before the capture, as PyTorch asks too. The graph's inputs
// (the batch) live outside it and its output (the loss) is kept from the capture: each
// replay overwrites it, and reading it waits for the replay.
//
// On a device that cannot record graphs (cpu, sim) the capture fails with
// tensor.ErrCapture: the example says so and trains eagerly only.
//
//	go run ./examples/graphs
//	go run ./examples/graphs -device cuda:0 -steps 2000
package main

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"time"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/examples/internal/demo"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/optim"
	"github.com/subletml/sublet/tensor"
)

func main() { os.Exit(demo.Status("graphs", run(os.Args[1:], os.Stdout), os.Stderr)) }

// warmup is how many eager steps each run takes before it is timed (or captured).
const warmup = 3

func run(args []string, out io.Writer) error {
	var devName string
	fs := demo.Flags("graphs", out)
	demo.DeviceFlag(fs, &devName, "cpu")
	steps := fs.Int("steps", 200, "timed training steps of each run")
	if err := demo.Parse(fs, args); err != nil {
		return err
	}
	if *steps < 1 {
		return fmt.Errorf("-steps %d: want at least 1", *steps)
	}
	dev, a, hasData, err := demo.Open(devName)
	if err != nil {
		return err
	}
	if !hasData {
		return fmt.Errorf("-device %s keeps no data: graphs compares values; use cpu, sim-backed or cuda:0", devName)
	}
	fmt.Fprintf(out, "graphs on %s: MLP 784-256-256-10, batch 64, SGD with momentum, %d steps after %d warm-up steps\n", dev.Name(), *steps, warmup)

	eager, err := newRun(dev)
	if err != nil {
		return err
	}
	defer eager.release()
	eagerLosses, eagerRate, eagerAllocs, err := eager.train(a, *steps, nil)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "eager: loss %.4f -> %.4f, %.0f steps/s, %.1f device allocations per step\n",
		eagerLosses[0], eagerLosses[len(eagerLosses)-1], eagerRate, eagerAllocs)

	graphed, err := newRun(dev)
	if err != nil {
		return err
	}
	defer graphed.release()
	losses, rate, allocs, err := graphed.train(a, *steps, func() (*tensor.Graph, *tensor.Tensor, error) { return graphed.capture(dev) })
	if errors.Is(err, tensor.ErrCapture) {
		fmt.Fprintf(out, "graph: %v\n", demo.FirstLine(err))
		return drain(out, a, eager, graphed)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "graph: loss %.4f -> %.4f, %.0f steps/s (%.1fx eager), %.1f device allocations per step\n",
		losses[0], losses[len(losses)-1], rate, rate/eagerRate, allocs)
	if !slices.Equal(losses, eagerLosses) {
		return fmt.Errorf("the replayed steps' losses differ from the eager steps': %v against %v", losses, eagerLosses)
	}
	same, err := sameParameters(eager.model, graphed.model)
	if err != nil {
		return err
	}
	if !same {
		return errors.New("the parameters after the replayed steps differ from those after the eager steps")
	}
	fmt.Fprintln(out, "losses and parameters of both runs: identical bit for bit")
	return drain(out, a, eager, graphed)
}

// trainRun is one run: a model, its optimizer and a batch on the device.
type trainRun struct {
	model    *nn.Sequential
	opt      *optim.SGD
	data     *tensor.Scope // the batch, and the graph's loss
	x, y     *tensor.Tensor
	released bool
}

func newRun(dev device.Device) (*trainRun, error) {
	r := &trainRun{data: tensor.NewScope()}
	err := tensor.Try(func() {
		r.model = nn.NewMLP(nn.Init{Device: dev, Gen: tensor.NewGenerator(1)}, nn.MLPConfig{Sizes: []int{784, 256, 256, 10}})
		rng := rand.New(rand.NewPCG(2, 3))
		x := make([]float32, 64*784)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		y := make([]int64, 64)
		for i := range y {
			y[i] = rng.Int64N(10)
		}
		r.x, r.y = tensor.FromSlice(r.data, dev, dtype.F32, x, 64, 784), tensor.FromSlice(r.data, dev, dtype.I64, y, 64)
	})
	if err != nil {
		r.data.Close()
		if r.model != nil {
			r.model.Release()
		}
		return nil, err
	}
	if r.opt, err = optim.NewSGD(nn.Parameters(r.model), optim.SGDConfig{LR: 0.01, Momentum: 0.9}); err != nil {
		r.release()
		return nil, err
	}
	return r, nil
}

// step records one training step in s, returning its loss kept in s.
func (r *trainRun) step(s *tensor.Scope) *tensor.Tensor {
	c := s.Child()
	defer c.Close()
	loss := nn.CrossEntropyLoss{}.Loss(r.model.Forward(c.Bind(r.x)), c.Bind(r.y))
	loss.Backward()
	r.opt.Step()
	r.opt.ZeroGrad(true)
	return c.Keep(loss)
}

// capture records one step as a graph; its loss is kept in r.data.
func (r *trainRun) capture(dev device.Device) (*tensor.Graph, *tensor.Tensor, error) {
	var loss *tensor.Tensor
	g, err := tensor.CaptureGraph(dev, func() { loss = r.step(r.data) })
	return g, loss, err
}

// train takes the warm-up steps, then steps timed steps, eager or, with capture, as
// replays of the step it captures; it returns the timed steps' losses, steps per
// second and device allocations per step.
func (r *trainRun) train(a *alloc.Allocator, steps int, capture func() (*tensor.Graph, *tensor.Tensor, error)) (losses []float64, rate, allocs float64, err error) {
	eagerStep := func() (float64, error) {
		return tensor.TryValue(func() float64 {
			s := tensor.NewScope()
			defer s.Close()
			return r.step(s).Item()
		})
	}
	for range warmup {
		if _, err := eagerStep(); err != nil {
			return nil, 0, 0, err
		}
	}
	next := eagerStep
	if capture != nil {
		g, loss, err := capture()
		if err != nil {
			return nil, 0, 0, err
		}
		defer func() { err = errors.Join(err, g.Release()) }()
		next = func() (float64, error) {
			if err := g.Replay(); err != nil {
				return 0, err
			}
			return tensor.TryValue(loss.Item)
		}
	}
	before := a.Stats().NumDeviceAlloc
	start := time.Now()
	for range steps {
		l, err := next()
		if err != nil {
			return nil, 0, 0, err
		}
		losses = append(losses, l)
	}
	rate = float64(steps) / time.Since(start).Seconds()
	return losses, rate, float64(a.Stats().NumDeviceAlloc-before) / float64(steps), nil
}

// sameParameters reports whether a and b hold the same parameter values, bit for bit.
func sameParameters(a, b *nn.Sequential) (bool, error) {
	return tensor.TryValue(func() bool {
		pb := nn.Parameters(b)
		for i, p := range nn.Parameters(a) {
			if !slices.Equal(tensor.ToSlice[float32](p), tensor.ToSlice[float32](pb[i])) {
				return false
			}
		}
		return true
	})
}

// release gives back the run's memory; releasing again does nothing.
func (r *trainRun) release() {
	if r.released {
		return
	}
	r.released = true
	r.data.Close()
	if r.opt != nil {
		r.opt.Release()
	}
	r.model.Release()
}

// drain releases both runs and prints what the allocator holds then.
func drain(out io.Writer, a *alloc.Allocator, runs ...*trainRun) error {
	for _, r := range runs {
		r.release()
	}
	m := demo.Read(a)
	fmt.Fprintf(out, "%safter both runs: tensors hold %d bytes\n", m.BackendLine(), m.Tensors())
	if m.Tensors() != 0 {
		return fmt.Errorf("tensors hold %d bytes after both runs were released: something leaked", m.Tensors())
	}
	return demo.Drain(a)
}
