// Command customdevice plugs a user-written device under the caching allocator and the
// tensor package, as PyTorch's pluggable allocator hook lets a program replace
// cudaMalloc: meter (meter.go) wraps another device, counts every Malloc and Free the
// allocator makes and refuses those over a budget. Nothing in sublet knows about it:
// alloc.For(dev) builds a caching allocator over any device.Device, and tensors,
// modules and optimizers made on the wrapped device allocate through it.
//
// It first trains an MLP on meter(sim) and prints, step by step, the tensor
// allocations against the driver calls they cost (the allocator's cache serves almost
// all of them); then trains the same model under a budget smaller than a step needs:
// meter refuses a segment, the allocator releases its cache and retries, the step fails
// with *alloc.OOMError, memory is back to the parameters and the optimizer state, and
// training goes on with half the batch. Last it replaces the caching allocator itself:
// own (own.go) is meter with tensor.AllocatorSource, whose allocator of the program's own
// makes a Malloc of every tensor and a Free of every release, as a PyTorch pluggable
// allocator calling cudaMalloc and cudaFree does; the same steps then cost a driver call
// per tensor, and hold at the driver only what the tensors hold.
//
//	go run ./examples/customdevice
//	go run ./examples/customdevice -budget 600 -batch 4096
//	go run ./examples/customdevice -device cpu -sizes 64,384,10 -batch 512
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/examples/internal/demo"
	"github.com/subletml/sublet/examples/internal/toy"
	"github.com/subletml/sublet/internal/units"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/optim"
	"github.com/subletml/sublet/tensor"
)

func main() { os.Exit(demo.Status("customdevice", run(os.Args[1:], os.Stdout), os.Stderr)) }

const mib = 1 << 20

// config is what the flags set.
type config struct {
	device string
	sizes  []int
	batch  int
	steps  int
	// budgetMiB is meter's budget in the second run; 0 picks three quarters of what the
	// first run reserved at its peak.
	budgetMiB int64
	seed      uint64
}

func parseFlags(args []string, out io.Writer) (config, error) {
	var c config
	fs := demo.Flags("customdevice", out)
	demo.DeviceFlag(fs, &c.device, "sim") // the device meter wraps
	sizes := fs.String("sizes", "1024,4096,4096,10", "the MLP's layer sizes: inputs, hidden widths, classes")
	fs.IntVar(&c.batch, "batch", 8192, "batch size")
	fs.IntVar(&c.steps, "steps", 5, "training steps of each run")
	fs.Int64Var(&c.budgetMiB, "budget", 0, "meter's budget in MiB for the second run (0: three quarters of the first run's peak)")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the parameters and the data")
	if err := demo.Parse(fs, args); err != nil {
		return c, err
	}
	var err error
	if c.sizes, err = units.ParseLayerSizes("-sizes", *sizes); err != nil {
		return c, err
	}
	switch {
	case c.batch < 2 || c.steps < 1 || c.budgetMiB < 0:
		return c, errors.New("need -batch ≥ 2, -steps ≥ 1 and -budget ≥ 0")
	}
	return c, nil
}

func run(args []string, out io.Writer) error {
	c, err := parseFlags(args, out)
	if err != nil {
		return err
	}
	if _, _, _, err := demo.Open(c.device); err != nil { // a bad name fails before any output
		return err
	}
	fmt.Fprintf(out, "sublet examples/customdevice: MLP %s, batch %d, Adam, on a user-written device wrapping %s\n",
		units.JoinInts(c.sizes, "-"), c.batch, c.device)

	var caching driverCost
	if err := c.do(func(t *trainer) error { caching = t.meterRun(out); return nil }, 0, false); err != nil {
		return err
	}
	budget := c.budgetMiB * mib
	if budget == 0 {
		budget = caching.peak / 4 * 3
	}
	if err := c.do(func(t *trainer) error { return t.budgetRun(out) }, budget, false); err != nil {
		return err
	}
	return c.do(func(t *trainer) error { t.ownRun(out, caching); return nil }, 0, true)
}

// do makes a trainer on meter(a fresh device) with budget, runs f, releases the
// trainer and checks that the device got everything back. With ownAlloc the tensors
// take their memory from an allocator of the program's own (own) instead of the
// device's caching allocator.
func (c config) do(f func(t *trainer) error, budget int64, ownAlloc bool) error {
	dev, _, data, err := demo.Open(c.device)
	if err != nil {
		return err
	}
	m := newMeter(dev, budget)
	a, err := alloc.For(m)
	if err != nil {
		return err
	}
	var on device.Device = m
	if ownAlloc {
		on = own{meter: m, al: &direct{dev: m}}
	}
	err = demo.Try(on, func() error {
		t := newTrainer(c, on, m, a, data)
		defer t.release()
		return f(t)
	})
	if err := errors.Join(err, demo.Drain(a)); err != nil {
		return err
	}
	if n := m.counts(); n.inUse != 0 || n.live != 0 || n.mallocs != n.frees {
		return fmt.Errorf("%s: %d bytes in %d allocations left at the driver after %d Mallocs and %d Frees", m.Name(), n.inUse, n.live, n.mallocs, n.frees)
	}
	return nil
}

// trainer is the model, its optimizer and the data on dev: meter, or own over it.
type trainer struct {
	c     config
	dev   device.Device
	m     *meter
	a     *alloc.Allocator // meter's caching allocator
	gen   *tensor.Generator
	model *nn.Sequential
	opt   *optim.Adam
	data  bool
}

func newTrainer(c config, dev device.Device, m *meter, a *alloc.Allocator, data bool) *trainer {
	gen := tensor.NewGenerator(c.seed)
	model := nn.NewMLP(nn.Init{Device: dev, Gen: gen}, nn.MLPConfig{Sizes: c.sizes})
	opt, err := optim.NewAdam(nn.Parameters(model), optim.DefaultAdam())
	if err != nil {
		model.Release()
		panic(&tensor.Error{Op: "newTrainer", Msg: "making the optimizer", Err: err})
	}
	return &trainer{c: c, dev: dev, m: m, a: a, gen: gen, model: model, opt: opt, data: data}
}

func (t *trainer) release() {
	t.opt.Release()
	t.model.Release()
}

// step trains on a batch of n random samples and returns the loss (0 without data).
// The batch is made in the step's scope, which closes before the optimizer steps, also
// when the step runs out of memory.
func (t *trainer) step(n int) float64 {
	s := tensor.NewScope(tensor.WithGenerator(t.gen))
	defer s.Close()
	x, labels := toy.Random(s, t.dev, n, t.c.sizes[0], t.c.sizes[len(t.c.sizes)-1])
	loss := nn.CrossEntropyLoss{}.Loss(t.model.Forward(x), labels)
	loss.Backward()
	v := 0.0
	if t.data {
		v = loss.Item()
	}
	s.Close()
	t.opt.Step()
	t.opt.ZeroGrad(true)
	return v
}

// driverCost is what a run cost at the driver, the model's parameters included: the
// tensor allocations served, the device's Malloc and Free calls for them, the most bytes
// in use there and the time the simulated driver charged (0 on a device whose calls take
// real time).
type driverCost struct {
	tensors, mallocs, frees, peak int64
	driver                        time.Duration
}

// steps trains c.steps steps, prints a row of what each cost at the driver, and returns
// the run's cost; served is the tensor allocations so far.
func (t *trainer) steps(out io.Writer, served func() int64) driverCost {
	var rows [][]string
	for i := 1; i <= t.c.steps; i++ {
		before, n := served(), t.m.counts()
		loss := t.step(t.c.batch)
		after, m := served(), t.m.counts()
		rows = append(rows, []string{fmt.Sprint(i), fmt.Sprint(after - before), fmt.Sprint(m.mallocs - n.mallocs), fmt.Sprint(m.frees - n.frees), units.Bytes(m.inUse), t.figure(loss)})
	}
	demo.Table(out, "", []string{"step", "tensor allocations", "device Mallocs", "device Frees", "in use at driver", "loss"}, rows)
	n := t.m.counts()
	return driverCost{served(), n.mallocs, n.frees, n.peak, demo.DriverTime(t.m.Device)}
}

// meterRun trains c.steps steps without a budget under the caching allocator, prints
// what each cost at the driver, and returns what they all cost.
func (t *trainer) meterRun(out io.Writer) driverCost {
	fmt.Fprintln(out, "\nrun 1: no budget")
	k := t.steps(out, func() int64 { return demo.Read(t.a).Allocations })
	n := t.m.counts()
	fmt.Fprintf(out, "the allocator served %d tensor allocations with %d device Mallocs (%s); in use at the driver %s = reserved by the allocator %s; peak %s\n",
		k.tensors, k.mallocs, t.m.histogram(), units.Bytes(n.inUse), units.Bytes(demo.Read(t.a).Reserved), units.Bytes(k.peak))
	return k
}

// ownRun trains c.steps steps on own, whose tensors take their memory from the
// program's own allocator, prints what each cost at the driver, and compares the whole
// with the caching allocator's run 1.
func (t *trainer) ownRun(out io.Writer, caching driverCost) {
	fmt.Fprintln(out, "\nrun 3: the tensors' own allocator (tensor.AllocatorSource): a Malloc for every tensor, a Free for every release, nothing cached")
	al := t.dev.(own).al
	k := t.steps(out, al.allocs.Load)
	fmt.Fprintf(out, "%d tensor allocations cost %d device Mallocs and %d Frees (the caching allocator's: %d and %d); peak in use at the driver %s (the caching allocator's: %s)",
		k.tensors, k.mallocs, k.frees, caching.mallocs, caching.frees, units.Bytes(k.peak), units.Bytes(caching.peak))
	if k.driver > 0 {
		fmt.Fprintf(out, "; simulated driver time %s (the caching allocator's: %s)", demo.DriverTimeText(k.driver), demo.DriverTimeText(caching.driver))
	}
	fmt.Fprintln(out)
}

// budgetRun trains under meter's budget, halving the batch after each out-of-memory
// step, and prints what happened.
func (t *trainer) budgetRun(out io.Writer) error {
	fmt.Fprintf(out, "\nrun 2: budget %s (meter refuses a Malloc past it)\n", units.Bytes(t.m.budget))
	kept := nn.ParameterBytes(t.model)
	batch := t.c.batch
	for i := 1; i <= t.c.steps; {
		retries := demo.Read(t.a).Retries
		var loss float64
		err := tensor.Try(func() { loss = t.step(batch) })
		var oom *alloc.OOMError
		switch {
		case errors.As(err, &oom):
			t.opt.ZeroGrad(true)
			held := demo.Read(t.a).Tensors()
			fmt.Fprintf(out, "batch %d: out of memory: meter refused %d Malloc(s) so far; the allocator released its cache and retried %d time(s), then reported\n  %s\n  held after the failed step: %s (parameters and optimizer state: %s)\n",
				batch, t.m.counts().refused, demo.Read(t.a).Retries-retries, demo.FirstLine(oom), units.Bytes(held), units.Bytes(kept))
			if held != kept {
				return fmt.Errorf("after the failed step the allocator holds %d bytes, not the parameters and the optimizer state (%d)", held, kept)
			}
			if batch /= 2; batch == 0 {
				return fmt.Errorf("not even a batch of 1 fits in %s", units.Bytes(t.m.budget))
			}
			continue
		case err != nil:
			return err
		}
		kept = nn.ParameterBytes(t.model) + t.opt.StateBytes()
		n := t.m.counts()
		fmt.Fprintf(out, "batch %d: step %d done, loss %s, in use at the driver %s of %s\n", batch, i, t.figure(loss), units.Bytes(n.inUse), units.Bytes(t.m.budget))
		i++
	}
	n := t.m.counts()
	fmt.Fprintf(out, "run 2: %d steps at batch %d; meter: %d Mallocs, %d refused, peak %s of the budget %s\n", t.c.steps, batch, n.mallocs, n.refused, units.Bytes(n.peak), units.Bytes(t.m.budget))
	return nil
}

// figure formats a loss, or "-" on a device without data.
func (t *trainer) figure(loss float64) string {
	if !t.data {
		return "-"
	}
	return fmt.Sprintf("%.4f", loss)
}

// Check at compile time that meter is a device the allocator and tensor take.
var _ device.Device = (*meter)(nil)
