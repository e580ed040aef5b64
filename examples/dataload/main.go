// Command dataload trains an MLP on batches from package data's loader three ways and
// compares their throughput: batches collated in new Go slices by Next itself (no
// prefetch), the same prefetched on the loader's goroutine, and prefetched into
// buffers of the pinned-host caching allocator (alloc/pinned), which are reused from
// batch to batch and, on a GPU, page-locked, so that the copies to the device are
// asynchronous and overlap the training steps (pin_memory=True in PyTorch's
// DataLoader).
//
// The data set is synthetic "images": each sample's pixels are drawn from its own seed
// when the loader asks for it, as a decoder would make them, and labelled by a fixed
// random projection. All three ways see the same batches in the same order, so they
// train the same model; only the time differs.
//
//	go run ./examples/dataload                      # cpu: a few seconds
//	go run ./examples/dataload -device cuda:0       # pinned memory and asynchronous copies
//	go run ./examples/dataload -samples 16384 -prefetch 4
package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"time"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/alloc/pinned"
	"github.com/subletml/sublet/data"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/examples/internal/demo"
	"github.com/subletml/sublet/examples/internal/toy"
	"github.com/subletml/sublet/internal/units"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/optim"
	"github.com/subletml/sublet/tensor"
)

func main() { os.Exit(demo.Status("dataload", run(os.Args[1:], os.Stdout), os.Stderr)) }

// config is what the flags set.
type config struct {
	device                    string
	samples, batch, prefetch  int
	features, hidden, classes int
	lr                        float64
	seed                      uint64
}

func parseFlags(args []string, out io.Writer) (config, error) {
	var c config
	fs := demo.Flags("dataload", out)
	demo.DeviceFlag(fs, &c.device, "cpu")
	fs.IntVar(&c.samples, "samples", 4096, "samples in the data set (one epoch each way)")
	fs.IntVar(&c.batch, "batch", 64, "batch size")
	fs.IntVar(&c.prefetch, "prefetch", 2, "batches the loader's goroutine makes ahead")
	fs.IntVar(&c.features, "features", 784, "values per sample (28×28 pixels)")
	fs.IntVar(&c.hidden, "hidden", 256, "width of the MLP's hidden layer")
	fs.IntVar(&c.classes, "classes", 10, "classes")
	fs.Float64Var(&c.lr, "lr", 0.05, "SGD learning rate (momentum 0.9)")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the data, the order and the parameters")
	if err := demo.Parse(fs, args); err != nil {
		return c, err
	}
	if c.samples < 1 || c.batch < 1 || c.prefetch < 1 || c.features < 1 || c.hidden < 1 || c.classes < 2 || !(c.lr > 0) {
		return c, fmt.Errorf("need -samples, -batch, -prefetch, -features, -hidden ≥ 1, -classes ≥ 2 and -lr > 0")
	}
	return c, nil
}

// images is the synthetic data set: sample i is drawn from its own seed when asked.
type images struct {
	n    int
	seed uint64
	t    *toy.Teacher
}

func (d images) Len() int      { return d.n }
func (d images) Features() int { return d.t.Features }
func (d images) Sample(i int, x []float32) (int64, error) {
	return d.t.Point(rand.New(rand.NewPCG(d.seed, uint64(i))), x), nil
}

// way is one way of loading.
type way struct {
	name     string
	pinned   bool
	prefetch int
}

// outcome is what one epoch measured.
type outcome struct {
	way
	elapsed time.Duration
	stats   data.Stats
	// async is whether the copies were asynchronous; hostAllocs the host buffers taken
	// from the system (pinned) or made (Go slices: two per batch).
	async      bool
	hostAllocs int64
	// loss is the mean training loss of the epoch (0 without data); left the bytes
	// requested on the device after it: the parameters and the momentum.
	loss float64
	left int64
}

// run parses args, runs an epoch each way and prints the comparison.
func run(args []string, out io.Writer) error {
	c, err := parseFlags(args, out)
	if err != nil {
		return err
	}
	dev, a, hasData, err := demo.Open(c.device)
	if err != nil {
		return err
	}
	ds := images{n: c.samples, seed: c.seed, t: toy.NewTeacher(c.seed, c.features, c.classes)}
	fmt.Fprintf(out, "sublet examples/dataload on %s: %d samples of %d values (%s a batch of %d), MLP %d-%d-%d, one epoch each way\n",
		dev.Name(), c.samples, c.features, units.Bytes(int64(c.batch*(c.features*4+8))), c.batch, c.features, c.hidden, c.classes)
	if !hasData {
		fmt.Fprintf(out, "%s keeps no data: batches are collated and moved, the steps compute nothing\n", dev.Name())
	}
	ways := []way{
		{"Go slices, made by Next", false, 0},
		{fmt.Sprintf("Go slices, prefetch %d", c.prefetch), false, c.prefetch},
		{fmt.Sprintf("pinned, prefetch %d", c.prefetch), true, c.prefetch},
	}
	var outs []outcome
	for _, w := range ways {
		var o outcome
		if err := demo.Try(dev, func() error { o, err = epoch(c, dev, a, ds, w, hasData); return err }); err != nil {
			return fmt.Errorf("%s: %w", w.name, err)
		}
		outs = append(outs, o)
	}
	report(out, c, outs, hasData)
	return demo.Drain(a)
}

// epoch trains a fresh model for one epoch on batches loaded the way w says.
func epoch(c config, dev device.Device, a *alloc.Allocator, ds images, w way, hasData bool) (outcome, error) {
	o := outcome{way: w}
	model := nn.NewMLP(nn.Init{Device: dev, Gen: tensor.NewGenerator(c.seed)}, nn.MLPConfig{Sizes: []int{c.features, c.hidden, c.classes}})
	defer model.Release()
	opt, err := optim.NewSGD(nn.Parameters(model), optim.SGDConfig{LR: c.lr, Momentum: 0.9})
	if err != nil {
		return o, err
	}
	defer opt.Release()
	cfg := data.Config{Device: dev, Prefetch: w.prefetch}
	if w.pinned {
		if cfg.Pinned, err = pinned.New(dev); err != nil {
			return o, err
		}
		defer cfg.Pinned.Close()
	}
	ld, err := data.NewLoader(ds, data.Shuffle{N: ds.n, Batch: c.batch, Seed: c.seed}, cfg)
	if err != nil {
		return o, err
	}
	o.async = ld.Async()

	start := time.Now()
	it := ld.Epoch(0)
	defer it.Close()
	sum := 0.0
	for {
		b, err := it.Next()
		if err != nil {
			return o, err
		}
		if b == nil {
			break
		}
		sum += step(model, opt, b, hasData)
	}
	o.elapsed = time.Since(start)
	if err := it.Close(); err != nil {
		return o, err
	}
	o.stats = it.Stats()
	o.loss = sum / float64(o.stats.Batches)
	o.hostAllocs = int64(o.stats.Slices)
	if w.pinned {
		o.hostAllocs = cfg.Pinned.Stats().NumHostAlloc
		if n := cfg.Pinned.Stats().ActiveRequests.Current; n != 0 {
			return o, fmt.Errorf("%d host buffers still in use after the epoch", n)
		}
	}
	o.left = demo.Read(a).Tensors()
	return o, nil
}

// step is one training step on b, whose tensors are bound into the step's scope; the
// batch is released with it. It returns the loss (0 without data).
func step(model nn.Module, opt optim.Optimizer, b *data.Batch, hasData bool) float64 {
	defer b.Release()
	s := tensor.NewScope()
	loss := nn.CrossEntropyLoss{}.Loss(model.Forward(s.Bind(b.X)), s.Bind(b.Y))
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

// report prints one row per way.
func report(out io.Writer, c config, outs []outcome, hasData bool) {
	header := []string{"", "samples/s", "waiting for data", "host buffers made", "async copies"}
	if hasData {
		header = append(header, "mean loss")
	}
	var rows [][]string
	for _, o := range outs {
		secs := o.elapsed.Seconds()
		r := []string{o.name,
			fmt.Sprintf("%.0f", float64(o.stats.Samples)/secs),
			fmt.Sprintf("%v (%.0f%%)", o.stats.Waited.Round(time.Millisecond), 100*o.stats.Waited.Seconds()/secs),
			fmt.Sprint(o.hostAllocs),
			yesNo(o.async)}
		if hasData {
			r = append(r, fmt.Sprintf("%.4f", o.loss))
		}
		rows = append(rows, r)
	}
	fmt.Fprintln(out)
	demo.Table(out, "", header, rows)
	last := outs[len(outs)-1]
	fmt.Fprintf(out, "\n%d batches, %d samples, %s collated each way; after each epoch %d bytes are left on %s (the parameters and the momentum)\n",
		last.stats.Batches, last.stats.Samples, units.Bytes(last.stats.HostBytes), last.left, c.device)
	if !last.async {
		fmt.Fprintf(out, "on %s the pinned allocator's memory is ordinary pageable memory and copies are synchronous: its gain here is reusing buffers; on a GPU the copies overlap the steps\n", c.device)
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
