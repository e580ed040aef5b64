// Command emptycache answers the seed tutorial's question "how often should I call
// torch.cuda.empty_cache()?" with its table: the same MLP trained with EmptyCache never,
// every N batches, every epoch and after every batch, and for each the throughput
// against never, the device allocations per step and the reserved memory.
//
// By default it runs on the simulated H200 without data (sim): ops allocate their
// results and compute nothing, the driver's cuMemAlloc and cuMemFree are priced by the
// H200's measured costs on a virtual clock, and each step is given a simulated compute
// time (its flops at the H200's measured FP32 rate). A step's time there is that GPU
// time, compute + driver calls, charged serially (cuMemFree and EmptyCache synchronize
// the device): the host's time to launch the ops overlaps the GPU's work on a real
// GPU, so it is printed beside, not added. On cpu and sim-backed the ops really
// compute and a step's time is the wall clock's (plus sim-backed's simulated driver).
//
//	go run ./examples/emptycache                       # the seed's table, in about a second
//	go run ./examples/emptycache -every 50 -steps 200 # its "every 50 batches" case study
//	go run ./examples/emptycache -device cpu -sizes 64,256,256,10 -batch 64
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	cudadev "github.com/subletml/sublet/device/cuda"
	"github.com/subletml/sublet/device/named"
	"github.com/subletml/sublet/examples/internal/demo"
	"github.com/subletml/sublet/examples/internal/toy"
	"github.com/subletml/sublet/internal/units"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/optim"
	"github.com/subletml/sublet/tensor"
)

func main() { os.Exit(demo.Status("emptycache", run(os.Args[1:], os.Stdout), os.Stderr)) }

// fp32TFLOPS is the FP32 GEMM rate measured through cuBLAS on the H200 (51.3 TFLOP/s,
// 2026-11-30, docs/benchmarks.md): what the default simulated compute time assumes.
const fp32TFLOPS = 51.3

// config is what the flags set.
type config struct {
	device string
	sizes  []int
	batch  int
	epochs int
	// steps is the batches per epoch; every the N of "every N batches".
	steps, every int
	// compute is the simulated compute time per step; auto when the flag said so.
	compute time.Duration
	auto    bool
	seed    uint64
}

func parseFlags(args []string, out io.Writer) (config, error) {
	c := config{auto: true}
	fs := demo.Flags("emptycache", out)
	demo.DeviceFlag(fs, &c.device, "sim")
	sizes := fs.String("sizes", "1024,4096,4096,4096,4096,4096,1000", "the MLP's layer sizes: inputs, hidden widths, classes")
	fs.IntVar(&c.batch, "batch", 256, "batch size")
	fs.IntVar(&c.epochs, "epochs", 2, "epochs per cadence")
	fs.IntVar(&c.steps, "steps", 100, "batches per epoch")
	fs.IntVar(&c.every, "every", 10, "N of the \"every N batches\" cadence (less than -steps)")
	fs.Func("compute", "simulated compute time per step, or auto: on sim the step's flops at the H200's measured 51.3 TFLOP/s FP32, elsewhere 0 (the ops compute)", func(s string) error {
		if s == "auto" {
			c.auto = true
			return nil
		}
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return fmt.Errorf("want auto or a duration ≥ 0 such as 2ms")
		}
		c.compute, c.auto = d, false
		return nil
	})
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the parameters and the batches")
	if err := demo.Parse(fs, args); err != nil {
		return c, err
	}
	var err error
	if c.sizes, err = units.ParseLayerSizes("-sizes", *sizes); err != nil {
		return c, err
	}
	switch {
	case c.batch < 1 || c.epochs < 1:
		return c, errors.New("need -batch ≥ 1 and -epochs ≥ 1")
	case c.every < 2 || c.every >= c.steps:
		return c, fmt.Errorf("-every %d -steps %d: want 2 ≤ every < steps, so every N batches lies between every step and every epoch", c.every, c.steps)
	}
	return c, nil
}

// cadence is one row of the table: EmptyCache after every every-th step (0: never),
// counted over the whole run, or at the end of each epoch.
type cadence struct {
	name    string
	every   int
	atEpoch bool
}

func (c config) cadences() []cadence {
	return []cadence{
		{"never", 0, false},
		{fmt.Sprintf("every epoch (%d batches)", c.steps), 0, true},
		{fmt.Sprintf("every %d batches", c.every), c.every, false},
		{"every batch", 1, false},
	}
}

// flops is the floating-point work of one training step: 6 per weight and sample (2
// for the forward's multiply-add, 4 for the backward's two products).
func (c config) flops() float64 {
	var weights float64
	for i := 1; i < len(c.sizes); i++ {
		weights += float64(c.sizes[i-1]) * float64(c.sizes[i])
	}
	return 6 * weights * float64(c.batch)
}

// openDevice opens a fresh device for one cadence, so that each starts from an empty
// cache and a zero driver clock; meta says it keeps no data. On a GPU that is a Device
// of its own for the same GPU, with an allocator of its own; done closes it once
// everything is given back (a no-op elsewhere).
func openDevice(name string) (dev device.Device, a *alloc.Allocator, meta bool, done func() error, err error) {
	if n, err := named.Parse(name); err == nil && n.Kind == device.CUDA {
		g, err := cudadev.Open(n.Ordinal)
		if err != nil {
			return nil, nil, false, nil, err
		}
		a, err := alloc.For(g)
		if err != nil {
			return nil, nil, false, nil, errors.Join(err, g.Close())
		}
		return g, a, false, g.Close, nil
	}
	dev, a, data, err := demo.Open(name)
	return dev, a, !data, func() error { return nil }, err
}

// row is what one cadence measured, over the steps after the first (which fills the
// cache and is the same for every cadence).
type row struct {
	cadence
	// meta says the device kept no data: the step's time is the simulated GPU's.
	meta  bool
	steps int
	// firstAllocs are the device allocations of the first step.
	firstAllocs int64
	// allocs are the device allocations of the later steps, frees their frees.
	allocs, frees int64
	// host is the wall-clock time of the later steps; driver the simulated driver's
	// time; compute the simulated compute's.
	host, driver, compute time.Duration
	// step is the time the throughput is computed from.
	step time.Duration
	// peak is the most reserved during a later step, low the least at the end of one
	// (after its EmptyCache, if any).
	peak, low int64
	// left is the bytes requested once training is over: parameters and Adam state.
	left, params, state int64
}

func (r row) stepsPerSecond() float64 { return float64(r.steps) / r.step.Seconds() }

func run(args []string, out io.Writer) error {
	c, err := parseFlags(args, out)
	if err != nil {
		return err
	}
	_, _, _, done, err := openDevice(c.device) // a bad name, or no GPU, fails before any output
	if err != nil {
		return err
	}
	if err := done(); err != nil {
		return err
	}
	fmt.Fprintf(out, "sublet examples/emptycache: MLP %s, batch %d, Adam; %d epochs of %d batches per cadence on %s\n",
		units.JoinInts(c.sizes, "-"), c.batch, c.epochs, c.steps, c.device)
	var rows []row
	for _, cd := range c.cadences() {
		r, err := train(c, cd)
		if err != nil {
			return fmt.Errorf("%s: %w", cd.name, err)
		}
		rows = append(rows, r)
	}
	report(out, c, rows)
	return nil
}

// train runs cadence cd's epochs on a fresh device and measures them.
func train(c config, cd cadence) (row, error) {
	dev, a, meta, done, err := openDevice(c.device)
	if err != nil {
		return row{}, err
	}
	var r row
	err = demo.Try(dev, func() error { r, err = trainOn(c, cd, dev, a, meta); return err })
	if err == nil {
		err = done()
	}
	if errors.Is(err, tensor.ErrNoKernels) {
		err = fmt.Errorf("%w; `go run ./cmd/sublet-bench -device %s -run emptycache` measures the allocator's side of this table on the GPU", err, c.device)
	}
	return r, err
}

// trainOn trains cadence cd's epochs on dev and measures them. Tensor math panics (out
// of memory, no kernels) reach train through demo.Try; the releases run on the way.
func trainOn(c config, cd cadence, dev device.Device, a *alloc.Allocator, meta bool) (row, error) {
	compute := c.compute
	if c.auto && meta {
		compute = time.Duration(c.flops() / (fp32TFLOPS * 1e12) * float64(time.Second))
	}
	gen := tensor.NewGenerator(c.seed)
	model := nn.NewMLP(nn.Init{Device: dev, Gen: gen}, nn.MLPConfig{Sizes: c.sizes})
	defer model.Release()
	opt, err := optim.NewAdam(nn.Parameters(model), optim.DefaultAdam())
	if err != nil {
		return row{}, err
	}
	defer opt.Release()

	r := row{cadence: cd, meta: meta, compute: compute * time.Duration(c.epochs*c.steps-1), low: -1}
	for i := 0; i < c.epochs*c.steps; i++ {
		a.ResetPeakStats() // the peak is this step's, whatever the device saw before
		before := demo.Read(a)
		clock := demo.DriverTime(dev)
		start := time.Now()
		step(c, dev, gen, model, opt)
		if !meta {
			if err := tensor.Synchronize(dev); err != nil { // the step's GPU work in its time
				return r, err
			}
		}
		if (cd.every > 0 && (i+1)%cd.every == 0) || (cd.atEpoch && (i+1)%c.steps == 0) {
			if err := a.EmptyCache(); err != nil {
				return r, err
			}
		}
		host := time.Since(start)
		m := demo.Read(a)
		if i == 0 {
			r.firstAllocs = m.DeviceAllocs - before.DeviceAllocs
			continue
		}
		r.steps++
		r.host += host
		r.driver += demo.DriverTime(dev) - clock
		r.allocs += m.DeviceAllocs - before.DeviceAllocs
		r.frees += m.DeviceFrees - before.DeviceFrees
		r.peak = max(r.peak, m.PeakReserved)
		if r.low < 0 || m.Reserved < r.low {
			r.low = m.Reserved
		}
	}
	r.step = r.compute + r.driver
	if !meta {
		r.step += r.host
	}
	r.params, r.state = nn.ParameterBytes(model), opt.StateBytes()
	r.left = demo.Read(a).Tensors()
	if r.left != r.params+r.state {
		return r, fmt.Errorf("after training the allocator holds %d bytes, not parameters %d + Adam state %d: something leaked", r.left, r.params, r.state)
	}
	opt.Release()
	model.Release()
	return r, demo.Drain(a)
}

// step is one training step on a batch of random samples drawn by gen in the step's
// scope, which closes before the optimizer steps.
func step(c config, dev device.Device, gen *tensor.Generator, model nn.Module, opt optim.Optimizer) {
	s := tensor.NewScope(tensor.WithGenerator(gen))
	x, labels := toy.Random(s, dev, c.batch, c.sizes[0], c.sizes[len(c.sizes)-1])
	nn.CrossEntropyLoss{}.Loss(model.Forward(x), labels).Backward()
	s.Close()
	opt.Step()
	opt.ZeroGrad(true)
}

// report prints the table and what it shows.
func report(out io.Writer, c config, rows []row) {
	never := rows[0]
	switch {
	case never.meta:
		fmt.Fprintf(out, "a step's time: simulated compute %s (%.1f GFLOP at %.1f TFLOP/s) + the simulated driver's cuMemAlloc/cuMemFree; the host's time is shown beside\n",
			(never.compute / time.Duration(never.steps)).Round(time.Microsecond), c.flops()/1e9, fp32TFLOPS)
	case c.device == "sim-backed":
		fmt.Fprintln(out, "a step's time: the wall clock's (the ops compute) + the simulated driver's cuMemAlloc/cuMemFree")
	default:
		fmt.Fprintln(out, "a step's time: the wall clock's (the ops compute, the driver's calls are real)")
	}
	fmt.Fprintf(out, "first step (fills the cache, the same for every cadence): %d device allocations\n\n", never.firstAllocs)
	fmt.Fprintf(out, "%-26s %9s %7s %19s %15s %13s %14s %13s\n", "EmptyCache", "steps/s", "ratio", "device allocs/step", "driver ms/step", "host ms/step", "reserved peak", "reserved low")
	for _, r := range rows {
		fmt.Fprintf(out, "%-26s %9.1f %7.4f %19.2f %15.3f %13.3f %14s %13s\n", r.name, r.stepsPerSecond(), r.stepsPerSecond()/never.stepsPerSecond(),
			float64(r.allocs)/float64(r.steps), ms(r.driver)/float64(r.steps), ms(r.host)/float64(r.steps), units.Bytes(r.peak), units.Bytes(r.low))
	}
	last := rows[len(rows)-1]
	if last.allocs == 0 {
		fmt.Fprintln(out, "\nat this size every block lies in segments that also hold parameters or optimizer state: EmptyCache has nothing to release, and the differences in time are the clock's noise.")
	} else {
		fmt.Fprintf(out, "\nemptying the cache after every batch costs %.2f cuMemAlloc and %.2f cuMemFree calls a step (%.3f ms of driver time) and still reserves %s at the peak (never: %s): it returns to the driver what the next step takes again.\n",
			float64(last.allocs)/float64(last.steps), float64(last.frees)/float64(last.steps), ms(last.driver)/float64(last.steps), units.Bytes(last.peak), units.Bytes(never.peak))
	}
	fmt.Fprintf(out, "after training, every cadence: %d bytes requested = parameters %d + Adam state %d\n", never.left, never.params, never.state)
	fmt.Fprintln(out, "after releasing the model and the optimizer and emptying the cache: 0 bytes allocated, 0 reserved, on every cadence's device")
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
