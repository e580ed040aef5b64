// Command checkpoint shows gradient checkpointing making a model fit: a deep residual
// MLP whose training step needs more memory than a simulated GPU has runs out of
// memory there, and trains on the same device once checkpoint.Sequential keeps only
// the segment boundaries and recomputes the rest during backward.
//
// It first measures one training step both ways on the meta device (a simulated GPU
// without data: exact memory, no compute), picks a device capacity between the two
// peaks (or takes -capacity), then on a simulated GPU of that capacity with data:
// tries a plain step and prints the out-of-memory error, and trains with
// checkpointing, printing the loss and the peak. With -device cuda the same runs on a
// GPU whose allocator is capped at that capacity by its memory fraction (PyTorch's
// set_per_process_memory_fraction), the cuBLAS workspace on top.
//
//	go run ./examples/checkpoint                  # 16 blocks of width 64, batch 8192: a few seconds
//	go run ./examples/checkpoint -segments 2 -steps 40
//	go run ./examples/checkpoint -capacity 96     # a device big enough for both
//	go run ./examples/checkpoint -device cuda:0   # on the GPU
package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"strings"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/checkpoint"
	"github.com/subletml/sublet/device"
	cudadev "github.com/subletml/sublet/device/cuda"
	"github.com/subletml/sublet/device/named"
	"github.com/subletml/sublet/device/sim"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/examples/internal/demo"
	"github.com/subletml/sublet/examples/internal/toy"
	"github.com/subletml/sublet/internal/units"
	"github.com/subletml/sublet/kernels/cuda"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/optim"
	"github.com/subletml/sublet/tensor"
)

func main() { os.Exit(demo.Status("checkpoint", run(os.Args[1:], os.Stdout), os.Stderr)) }

const mib = 1 << 20

// config is what the flags set.
type config struct {
	depth, width, classes, batch int
	segments                     int
	steps                        int
	lr                           float64
	capacityMiB                  int64
	seed                         uint64
	device                       string
}

func parseFlags(args []string, out io.Writer) (config, error) {
	var c config
	fs := demo.Flags("checkpoint", out)
	fs.IntVar(&c.depth, "depth", 16, "residual blocks (each Linear(width→width) + ReLU + the skip)")
	fs.IntVar(&c.width, "width", 64, "features")
	fs.IntVar(&c.classes, "classes", 4, "classes of the synthetic task")
	fs.IntVar(&c.batch, "batch", 8192, "batch size (one activation is batch × width × 4 bytes)")
	fs.IntVar(&c.segments, "segments", 0, "checkpoint segments over the depth+1 layers (0: the nearest integer to √(depth+1))")
	fs.IntVar(&c.steps, "steps", 20, "training steps with checkpointing")
	fs.Float64Var(&c.lr, "lr", 3e-3, "Adam learning rate")
	fs.Int64Var(&c.capacityMiB, "capacity", 0, "device capacity in MiB (0: between the two peaks measured on the meta device)")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the data and the initial parameters")
	fs.StringVar(&c.device, "device", "sim", "sim (a simulated GPU of the capacity) or cuda[:N] (a GPU capped at it)")
	if err := demo.Parse(fs, args); err != nil {
		return c, err
	}
	if c.depth < 1 || c.width < 1 || c.classes < 2 || c.batch < 1 || c.steps < 1 || c.lr <= 0 || c.capacityMiB < 0 {
		return c, errors.New("need -depth, -width, -batch, -steps ≥ 1, -classes ≥ 2, -lr > 0 and -capacity ≥ 0")
	}
	if c.segments == 0 {
		c.segments = int(math.Round(math.Sqrt(float64(c.depth + 1))))
	}
	if c.device != "sim" && !strings.HasPrefix(c.device, "cuda") {
		return c, fmt.Errorf("-device %q: want sim or cuda[:N]", c.device)
	}
	if c.segments < 2 || c.segments > c.depth+1 {
		return c, fmt.Errorf("-segments %d: want 2 to %d (1 segment is no checkpointing)", c.segments, c.depth+1)
	}
	return c, nil
}

// run parses args, measures, trains and reports on out.
func run(args []string, out io.Writer) error {
	c, err := parseFlags(args, out)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "sublet examples/checkpoint: %d residual blocks of Linear(%d→%d)+ReLU and a head to %d classes, batch %d, Adam lr %g\n",
		c.depth, c.width, c.width, c.classes, c.batch, c.lr)
	fmt.Fprintf(out, "one activation is %s; %d segments over the %d layers:%s\n",
		units.Bytes(int64(c.batch*c.width*4)), c.segments, c.depth+1, describe(c.depth+1, c.segments))

	plain, err := measure(c, 1)
	if err != nil {
		return fmt.Errorf("measuring on the meta device: %w", err)
	}
	ckpt, err := measure(c, c.segments)
	if err != nil {
		return fmt.Errorf("measuring on the meta device: %w", err)
	}
	fmt.Fprintln(out, "two training steps on the meta device (exact memory, no compute):")
	fmt.Fprintf(out, "  without checkpointing: peak %s allocated, %s reserved from the device\n", units.Bytes(plain.allocated), units.Bytes(plain.reserved))
	fmt.Fprintf(out, "  with %d segments:       peak %s allocated, %s reserved from the device\n", c.segments, units.Bytes(ckpt.allocated), units.Bytes(ckpt.reserved))

	capacity := c.capacityMiB * mib
	if capacity == 0 {
		// What the checkpointed steps reserved is enough for them (the allocator asks
		// the device for the same segments); less than the plain steps' live blocks
		// cannot hold those.
		capacity = roundUp(ckpt.reserved, 2*mib)
		if capacity >= plain.allocated {
			return fmt.Errorf("checkpointing saves too little at this size (%s reserved with it, %s allocated without): "+
				"use a larger -batch or -depth, or set -capacity", units.Bytes(ckpt.reserved), units.Bytes(plain.allocated))
		}
	}
	dev, a, err := openDevice(c, capacity, out)
	if err != nil {
		return err
	}
	err = demo.Try(dev, func() error { return train(c, dev, a, capacity, plain, out) })
	if _, isGPU := dev.(*cudadev.Device); isGPU {
		// The GPU is the process's: lift the cap for whoever uses it next.
		return errors.Join(err, a.SetMemoryFraction(1))
	}
	if err != nil {
		return err
	}
	return demo.Drain(a)
}

// openDevice returns the device c names, holding capacity bytes: a simulated GPU of
// that capacity, or a GPU whose allocator's memory fraction caps it there (plus what
// the cuBLAS workspace will take).
func openDevice(c config, capacity int64, out io.Writer) (device.Device, *alloc.Allocator, error) {
	if c.device == "sim" {
		dev, err := sim.New(sim.Options{Capacity: capacity, Backing: true})
		if err != nil {
			return nil, nil, err
		}
		a, err := alloc.For(dev)
		fmt.Fprintf(out, "device: %s, a simulated GPU of %s with data\n", dev.Name(), units.Bytes(capacity))
		return dev, a, err
	}
	dev, err := named.Open(c.device)
	if err != nil {
		return nil, nil, err
	}
	g, ok := dev.(*cudadev.Device)
	if !ok {
		return nil, nil, fmt.Errorf("-device %s is not a GPU", c.device)
	}
	a, err := alloc.For(dev)
	if err != nil {
		return nil, nil, err
	}
	p := g.Properties()
	ws := cuda.WorkspaceBytes(os.Getenv(cuda.WorkspaceEnv), p.ComputeMajor, p.ComputeMinor)
	_, total, err := dev.MemInfo()
	if err != nil {
		return nil, nil, err
	}
	if err := a.SetMemoryFraction(float64(capacity+ws) / float64(total)); err != nil {
		return nil, nil, err
	}
	fmt.Fprintf(out, "device: %s (%s), its allocator capped at %s by the memory fraction, plus %s for the cuBLAS workspace\n",
		dev.Name(), p.Name, units.Bytes(capacity), units.Bytes(ws))
	return dev, a, nil
}

// usage is the peak memory of the steps measured.
type usage struct {
	allocated, reserved int64
}

// measure runs two training steps with k segments (1: no checkpointing) on a fresh
// meta device and returns the allocator's peaks.
func measure(c config, k int) (usage, error) {
	dev, a, _, err := demo.Open("sim")
	if err != nil {
		return usage{}, err
	}
	var u usage
	err = demo.Try(dev, func() error {
		t := newTrainer(c, dev)
		defer t.release()
		for range 2 {
			t.step(k)
		}
		m := demo.Read(a)
		u = usage{m.PeakAllocated, m.PeakReserved}
		return nil
	})
	return u, err
}

// trainer is the model, its optimizer and the batch on one device.
type trainer struct {
	dev     device.Device
	m       *model
	opt     *optim.Adam
	data    *tensor.Scope // owns the batch
	x, y    *tensor.Tensor
	gen     *tensor.Generator
	hasData bool
}

func newTrainer(c config, dev device.Device) *trainer {
	gen := tensor.NewGenerator(c.seed)
	m := newModel(nn.Init{Device: dev, Gen: gen}, c.depth, c.width, c.classes)
	ac := optim.DefaultAdam()
	ac.LR = c.lr
	opt, err := optim.NewAdam(m.params(), ac)
	if err != nil {
		m.release()
		panic(&tensor.Error{Op: "newTrainer", Msg: "making the optimizer", Err: err})
	}
	xs, labels := toy.NewTeacher(c.seed, c.width, c.classes).Batch(rand.New(rand.NewPCG(c.seed, 3)), c.batch)
	data := tensor.NewScope(tensor.NoGrad())
	t := &trainer{dev: dev, m: m, opt: opt, data: data, gen: gen,
		x: tensor.FromSlice(data, dev, dtype.F32, xs, c.batch, c.width), y: tensor.FromSlice(data, dev, dtype.I64, labels)}
	t.hasData = m.head.Weight.Storage().Residency() != device.Meta
	return t
}

// step runs one training step with k segments and returns the loss (0 without
// data). The forward and backward run in a scope that is closed before the optimizer
// steps, also when they run out of memory.
func (t *trainer) step(k int) float64 {
	s := tensor.NewScope(tensor.WithGenerator(t.gen))
	defer s.Close()
	logits := checkpoint.Sequential(t.m.layers(), k, s.Bind(t.x))
	loss := tensor.CrossEntropy(logits, s.Bind(t.y))
	loss.Backward()
	v := 0.0
	if t.hasData {
		v = loss.Item()
	}
	s.Close()
	t.opt.Step()
	t.opt.ZeroGrad(true)
	return v
}

func (t *trainer) release() {
	t.data.Close()
	t.opt.Release()
	t.m.release()
}

// train tries a plain step on dev (of capacity bytes), then trains with
// checkpointing, and reports; plain is what the plain steps need.
func train(c config, dev device.Device, a *alloc.Allocator, capacity int64, plain usage, out io.Writer) error {
	t := newTrainer(c, dev)
	defer t.release()
	params := nn.ParameterBytes(t.m.head)
	for _, b := range t.m.blocks {
		params += nn.ParameterBytes(b.lin)
	}
	base := params + t.x.Bytes() + t.y.Bytes()

	a.ResetPeakStats()
	err := tensor.Try(func() { t.step(1) })
	var oom *alloc.OOMError
	if !errors.As(err, &oom) {
		if err == nil {
			return fmt.Errorf("the plain step fit in %s: nothing to show (lower -capacity)", units.Bytes(capacity))
		}
		return err
	}
	fmt.Fprintf(out, "without checkpointing the first step runs out of memory at %s allocated:\n  %v\n",
		units.Bytes(demo.Read(a).PeakAllocated), err)
	t.opt.ZeroGrad(true)
	if got := demo.Read(a).Tensors(); got != base {
		return fmt.Errorf("after the failed step the allocator holds %d bytes, not the parameters and the batch (%d)", got, base)
	}

	a.ResetPeakStats()
	fmt.Fprintf(out, "with checkpointing (%d segments):\n", c.segments)
	var first, last float64
	for i := 1; i <= c.steps; i++ {
		last = t.step(c.segments)
		if i == 1 {
			first = last
		}
		if i == 1 || i == c.steps || i%5 == 0 {
			m := demo.Read(a)
			fmt.Fprintf(out, "  step %3d  loss %.4f  peak %s allocated, %s reserved\n", i, last, units.Bytes(m.PeakAllocated), units.Bytes(m.PeakReserved))
		}
	}
	m := demo.Read(a)
	fmt.Fprintf(out, "loss %.4f → %.4f in %d steps; peak %s allocated of %s (without checkpointing: %s)\n",
		first, last, c.steps, units.Bytes(m.PeakAllocated), units.Bytes(capacity), units.Bytes(plain.allocated))

	state := t.opt.StateBytes()
	requested := m.Tensors() // less the cuBLAS workspace, on a GPU
	fmt.Fprint(out, m.BackendLine())
	fmt.Fprintf(out, "after training: %d bytes requested = parameters %d + batch %d + Adam state %d\n",
		requested, params, base-params, state)
	if requested != base+state {
		return fmt.Errorf("the allocator holds %d bytes, not parameters + batch + optimizer state = %d: something leaked", requested, base+state)
	}
	return nil
}

// describe lists the segments checkpoint.Sequential makes of n layers (parseFlags
// checked k).
func describe(n, k int) string {
	segs, err := checkpoint.Segments(n, k)
	if err != nil {
		panic(err)
	}
	var b strings.Builder
	for _, sg := range segs {
		kind := "plain"
		if sg.Checkpointed {
			kind = "checkpointed"
		}
		fmt.Fprintf(&b, " [%d,%d) %s", sg.Start, sg.End, kind)
	}
	return b.String()
}

func roundUp(n, to int64) int64 { return (n + to - 1) / to * to }
