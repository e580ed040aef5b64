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
// training goes on with half the batch.
//
//	go run ./examples/customdevice
//	go run ./examples/customdevice -budget 600 -batch 4096
//	go run ./examples/customdevice -device cpu -sizes 64,256,10 -batch 512
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

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

	var peak int64
	if err := c.do(func(t *trainer) error { peak = t.meterRun(out); return nil }, 0); err != nil {
		return err
	}
	budget := c.budgetMiB * mib
	if budget == 0 {
		budget = peak / 4 * 3
	}
	return c.do(func(t *trainer) error { return t.budgetRun(out) }, budget)
}

// do makes a trainer on meter(a fresh device) with budget, runs f, releases the
// trainer and checks that the device got everything back.
func (c config) do(f func(t *trainer) error, budget int64) error {
	dev, _, data, err := demo.Open(c.device)
	if err != nil {
		return err
	}
	m := newMeter(dev, budget)
	a, err := alloc.For(m)
	if err != nil {
		return err
	}
	err = demo.Try(m, func() error {
		t := newTrainer(c, m, a, data)
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

// trainer is the model, its optimizer and the data on meter.
type trainer struct {
	c     config
	m     *meter
	a     *alloc.Allocator
	gen   *tensor.Generator
	model *nn.Sequential
	opt   *optim.Adam
	data  bool
}

func newTrainer(c config, m *meter, a *alloc.Allocator, data bool) *trainer {
	gen := tensor.NewGenerator(c.seed)
	model := nn.NewMLP(nn.Init{Device: m, Gen: gen}, nn.MLPConfig{Sizes: c.sizes})
	opt, err := optim.NewAdam(nn.Parameters(model), optim.DefaultAdam())
	if err != nil {
		model.Release()
		panic(&tensor.Error{Op: "newTrainer", Msg: "making the optimizer", Err: err})
	}
	return &trainer{c: c, m: m, a: a, gen: gen, model: model, opt: opt, data: data}
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
	x, labels := toy.Random(s, t.m, n, t.c.sizes[0], t.c.sizes[len(t.c.sizes)-1])
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

// meterRun trains c.steps steps without a budget, prints what each cost at the driver,
// and returns the peak bytes in use there.
func (t *trainer) meterRun(out io.Writer) int64 {
	fmt.Fprintln(out, "\nrun 1: no budget")
	var rows [][]string
	for i := 1; i <= t.c.steps; i++ {
		before, n := demo.Read(t.a).Allocations, t.m.counts()
		loss := t.step(t.c.batch)
		after, m := demo.Read(t.a).Allocations, t.m.counts()
		rows = append(rows, []string{fmt.Sprint(i), fmt.Sprint(after - before), fmt.Sprint(m.mallocs - n.mallocs), fmt.Sprint(m.frees - n.frees), units.Bytes(m.inUse), t.figure(loss)})
	}
	demo.Table(out, "", []string{"step", "tensor allocations", "device Mallocs", "device Frees", "in use at driver", "loss"}, rows)
	st, n := demo.Read(t.a), t.m.counts()
	fmt.Fprintf(out, "the allocator served %d tensor allocations with %d device Mallocs (%s); in use at the driver %s = reserved by the allocator %s; peak %s\n",
		st.Allocations, n.mallocs, t.m.histogram(), units.Bytes(n.inUse), units.Bytes(st.Reserved), units.Bytes(n.peak))
	return n.peak
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
			held := demo.Read(t.a).Requested
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
