// Command ckptamp measures gradient checkpointing and mixed precision together against
// each alone and against neither, the combination the seeds credit with the largest
// saving: a stack of Linear layers, one training step's forward and backward, and the
// memory after the forward (what the graph keeps for backward) and at the peak.
//
// The default is PyTorch's measurement in docs/checkpoint.md (16 × Linear(1024→1024)
// with biases, batch 1024, an input that requires grad, 4 segments, F16 autocast), on
// the meta device, so the table also gives what PyTorch 2.11 measured for the same on
// the H200. With a batch
// much larger than the width, activations dominate and the peaks drop too.
//
//	go run ./examples/ckptamp                    # PyTorch's sizes, beside its figures
//	go run ./examples/ckptamp -batch 8192        # activation-dominated: the peaks drop
//	go run ./examples/ckptamp -device cpu -width 64 -batch 256
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/amp"
	"github.com/subletml/sublet/checkpoint"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/examples/internal/demo"
	"github.com/subletml/sublet/internal/units"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/tensor"
)

func main() { os.Exit(demo.Status("ckptamp", run(os.Args[1:], os.Stdout), os.Stderr)) }

const mib = 1 << 20

// config is what the flags set.
type config struct {
	device                        string
	depth, width, batch, segments int
	seed                          uint64
}

func parseFlags(args []string, out io.Writer) (config, error) {
	var c config
	fs := demo.Flags("ckptamp", out)
	demo.DeviceFlag(fs, &c.device, "sim")
	fs.IntVar(&c.depth, "depth", 16, "Linear layers")
	fs.IntVar(&c.width, "width", 1024, "their width")
	fs.IntVar(&c.batch, "batch", 1024, "batch size")
	fs.IntVar(&c.segments, "segments", 4, "checkpoint segments")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the parameters and the input")
	if err := demo.Parse(fs, args); err != nil {
		return c, err
	}
	if c.depth < 1 || c.width < 1 || c.batch < 1 || c.segments < 2 || c.segments > c.depth {
		return c, fmt.Errorf("need -depth, -width, -batch ≥ 1 and 2 ≤ -segments ≤ -depth")
	}
	return c, nil
}

// way is one configuration of the step.
type way struct {
	name     string
	segments int  // 0: no checkpointing
	mixed    bool // F16 autocast
}

// cost is one way's memory, in bytes requested beyond the parameters and the input.
type cost struct {
	way
	// kept is what the forward left for backward (the autocast region closed); peak is
	// the most held during forward and backward; grads the gradients after backward.
	kept, peak, grads int64
}

// torch is PyTorch 2.11's figures on the H200 for the default sizes (docs/checkpoint.md),
// in MiB:
// held after the forward, and the peak of forward and backward, above the start.
var torch = map[string][2]float64{
	"F32":                     {64, 84.06},
	"checkpointed":            {28, 84.06},
	"F16 autocast":            {66, 80.06},
	"checkpointed + autocast": {22, 76.06},
}

// run parses args, measures the four ways and prints the table.
func run(args []string, out io.Writer) error {
	c, err := parseFlags(args, out)
	if err != nil {
		return err
	}
	dev, a, _, err := demo.Open(c.device)
	if err != nil {
		return err
	}
	var costs []cost
	if err := demo.Try(dev, func() error { costs, err = measureAll(c, dev, a); return err }); err != nil {
		return err
	}
	report(out, c, dev, costs)
	return demo.Drain(a)
}

func ways(c config) []way {
	return []way{{"F32", 0, false}, {"checkpointed", c.segments, false}, {"F16 autocast", 0, true}, {"checkpointed + autocast", c.segments, true}}
}

// measureAll measures each way on a fresh model.
func measureAll(c config, dev device.Device, a *alloc.Allocator) ([]cost, error) {
	var costs []cost
	for _, w := range ways(c) {
		k, err := measure(c, dev, a, w)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", w.name, err)
		}
		costs = append(costs, k)
	}
	return costs, nil
}

// measure runs one step the way w says and records its memory.
func measure(c config, dev device.Device, a *alloc.Allocator, w way) (cost, error) {
	k := cost{way: w}
	init := nn.Init{Device: dev, Gen: tensor.NewGenerator(c.seed)}
	m := nn.NewSequential()
	layers := make([]checkpoint.Layer, c.depth)
	for i := range c.depth {
		l := nn.NewLinear(init, c.width, c.width, true)
		m.Children, layers[i] = append(m.Children, l), l
	}
	defer m.Release()
	s := tensor.NewScope(tensor.WithGenerator(tensor.NewGenerator(c.seed + 1)))
	defer s.Close()
	x := s.Randn(dev, dtype.F32, c.batch, c.width).SetRequiresGrad(true)
	held := func() int64 { return demo.Read(a).Tensors() }
	start := held()
	a.ResetPeakStats()

	fwd := s
	if w.mixed {
		var err error
		if fwd, err = amp.Autocast(s, dtype.F16); err != nil {
			return k, err
		}
	}
	in := fwd.Bind(x)
	var y *tensor.Tensor
	if w.segments > 0 {
		y = checkpoint.Sequential(layers, w.segments, in)
	} else {
		y = m.Forward(in)
	}
	if w.mixed {
		y = fwd.Keep(y)
		fwd.Close()
	}
	k.kept = held() - start
	y.Cast(dtype.F32).Sum().Backward()
	k.peak = demo.Read(a).PeakTensors() - start
	k.grads = nn.GradBytes(m) + x.Grad().Bytes()
	return k, nil
}

// againstTorch says how the costs compare with PyTorch's figures for the same sizes:
// what the forward keeps to the byte, the peaks at or below.
func againstTorch(costs []cost) string {
	same, atOrBelow := true, true
	for _, k := range costs {
		t := torch[k.name]
		same = same && k.kept == int64(t[0]*mib) // whole MiB
		atOrBelow = atOrBelow && float64(k.peak)/mib <= t[1]+0.005
	}
	switch {
	case same && atOrBelow:
		return ": what the forward keeps is PyTorch's for every way, the peaks at or below PyTorch's"
	case same:
		return ": what the forward keeps is PyTorch's for every way"
	}
	return ""
}

func report(out io.Writer, c config, dev device.Device, costs []cost) {
	fmt.Fprintf(out, "sublet examples/ckptamp on %s: %d × Linear(%d→%d) with biases, batch %d, %d checkpoint segments; one activation is %s in F32\n",
		dev.Name(), c.depth, c.width, c.width, c.batch, c.segments, units.Bytes(int64(c.batch*c.width*4)))
	spec := c.depth == 16 && c.width == 1024 && c.batch == 1024 && c.segments == 4
	header := []string{"", "kept after forward", "peak"}
	if spec {
		header = append(header, "PyTorch: after forward", "PyTorch: peak")
	}
	var rows [][]string
	for _, k := range costs {
		r := []string{k.name, units.Bytes(k.kept), units.Bytes(k.peak)}
		if spec {
			t := torch[k.name]
			r = append(r, fmt.Sprintf("%.2f MiB", t[0]), fmt.Sprintf("%.2f MiB", t[1]))
		}
		rows = append(rows, r)
	}
	fmt.Fprintln(out, "memory of one forward and backward, above the parameters and the input:")
	demo.Table(out, "  ", header, rows)
	plain, both := costs[0], costs[3]
	fmt.Fprintf(out, "together they keep %.0f%% of what plain F32 keeps for backward (checkpointing alone %.0f%%, autocast alone %.0f%%)\n",
		100*float64(both.kept)/float64(plain.kept), 100*float64(costs[1].kept)/float64(plain.kept), 100*float64(costs[2].kept)/float64(plain.kept))
	if mixed := costs[2]; mixed.kept >= plain.kept {
		fmt.Fprintf(out, "autocast alone keeps as much or more: beside its F16 activations, backward needs the F16 casts of the weights (%s), and at this size a weight weighs as much as an activation\n",
			units.Bytes(int64(c.depth*c.width*c.width*2)))
	}
	samePeak := true
	for _, k := range costs {
		samePeak = samePeak && k.peak == plain.peak
	}
	if samePeak {
		fmt.Fprintf(out, "the peak comes at the end of backward, where the %s of gradients are alive whatever the way: it drops only when activations outweigh them (a batch much larger than the width)\n",
			units.Bytes(plain.grads))
	} else {
		fmt.Fprintf(out, "the peaks drop too (checkpointed + autocast %.0f%% of F32's): the activations, kept or recomputed, outweigh the %s of gradients\n",
			100*float64(both.peak)/float64(plain.peak), units.Bytes(plain.grads))
	}
	if spec {
		fmt.Fprintf(out, "(PyTorch 2.11 on the H200, docs/checkpoint.md)%s\n", againstTorch(costs))
	}
}
