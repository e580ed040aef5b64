// Command warmup shows what a warm-up pass and an explicit reservation do for the seed
// tutorial's "preallocation strategy": the same MLP trained on batches of varying size,
// and for each way of preparing the caching allocator the device allocations (cuMemAlloc
// calls) it makes during training, step by step, and the memory it reserves.
//
// Without preparation the allocator asks the driver for new segments whenever a batch
// larger than any before it arrives, or when the optimizer's state, made at its first
// step, takes the blocks the activations had. The rows:
//
//   - none: train at once.
//   - preallocate N MiB: the seed's recipe, one block of a guessed size allocated and
//     freed before training, so the cache holds one segment of that size.
//   - forward+backward: one forward and backward at the largest batch, gradients
//     dropped: the optimizer's state is still made during the first step.
//   - warm-up pass: a forward and backward at the largest batch, a throwaway Adam with
//     learning rate 0 stepped once (its state has the real state's sizes and the
//     parameters do not move), the gradients dropped, a second forward and backward,
//     then the throwaway optimizer released: its state's blocks wait in the cache for
//     the real optimizer's.
//   - reserve the measured size: the warm-up pass run on the meta device first to
//     measure the memory it reserves, then one block of that size allocated and freed.
//
// A warm-up fills the pools its own tensors use. A batch small enough that some of its
// tensors fall to 1 MiB or less takes them from the small pool, which a warm-up at the
// largest batch may not have filled: the table counts those segments apart, and the
// example says when the warm-up left some to training.
//
// It runs on the simulated H200 without data by default (the counts are the
// allocator's decisions, the same on every device); -device cpu or sim-backed trains
// with data and checks that the warm-up leaves the parameters bit for bit as they were.
//
//	go run ./examples/warmup
//	go run ./examples/warmup -guess 2048,512 -steps 100
//	go run ./examples/warmup -device cpu -sizes 32,64,4 -min-batch 16 -max-batch 256
package main

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strings"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/examples/internal/demo"
	"github.com/subletml/sublet/examples/internal/toy"
	"github.com/subletml/sublet/internal/units"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/optim"
	"github.com/subletml/sublet/tensor"
)

func main() { os.Exit(demo.Status("warmup", run(os.Args[1:], os.Stdout), os.Stderr)) }

const mib = 1 << 20

// config is what the flags set.
type config struct {
	device             string
	sizes              []int
	minBatch, maxBatch int
	steps              int
	// guesses are the sizes of the seed's preallocation rows, in MiB.
	guesses []int
	seed    uint64
}

func parseFlags(args []string, out io.Writer) (config, error) {
	var c config
	fs := demo.Flags("warmup", out)
	demo.DeviceFlag(fs, &c.device, "sim")
	sizes := fs.String("sizes", "512,2048,2048,2048,10", "the MLP's layer sizes: inputs, hidden widths, classes")
	fs.IntVar(&c.minBatch, "min-batch", 1024, "smallest batch")
	fs.IntVar(&c.maxBatch, "max-batch", 8192, "largest batch (the warm-up's)")
	fs.IntVar(&c.steps, "steps", 40, "training steps, each on a batch of a size drawn between -min-batch and -max-batch")
	guesses := fs.String("guess", "1024,256", "sizes in MiB of the seed's preallocate(size_mb) rows")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the parameters, the batch sizes and the data")
	if err := demo.Parse(fs, args); err != nil {
		return c, err
	}
	var err error
	if c.sizes, err = units.ParseLayerSizes("-sizes", *sizes); err != nil {
		return c, err
	}
	if c.guesses, err = units.ParseInts("-guess", *guesses); err != nil {
		return c, err
	}
	switch {
	case c.minBatch < 1 || c.maxBatch < c.minBatch:
		return c, fmt.Errorf("-min-batch %d -max-batch %d: want 1 ≤ min ≤ max", c.minBatch, c.maxBatch)
	case c.steps < 1:
		return c, errors.New("need -steps ≥ 1")
	}
	return c, nil
}

// trainer is a model, its optimizer and the batches on one device.
type trainer struct {
	c     config
	dev   device.Device
	a     *alloc.Allocator
	gen   *tensor.Generator
	model *nn.Sequential
	opt   *optim.Adam
}

func newTrainer(c config, dev device.Device) (*trainer, error) {
	a, err := alloc.For(dev)
	if err != nil {
		return nil, err
	}
	gen := tensor.NewGenerator(c.seed)
	model := nn.NewMLP(nn.Init{Device: dev, Gen: gen}, nn.MLPConfig{Sizes: c.sizes})
	opt, err := optim.NewAdam(nn.Parameters(model), optim.DefaultAdam())
	if err != nil {
		model.Release()
		return nil, err
	}
	return &trainer{c: c, dev: dev, a: a, gen: gen, model: model, opt: opt}, nil
}

func (t *trainer) release() {
	t.opt.Release()
	t.model.Release()
}

// forwardBackward runs a forward and backward on a batch of n random samples in a scope
// that closes before it returns: the gradients are what is left.
func (t *trainer) forwardBackward(n int) {
	s := tensor.NewScope(tensor.WithGenerator(t.gen))
	defer s.Close()
	x, labels := toy.Random(s, t.dev, n, t.c.sizes[0], t.c.sizes[len(t.c.sizes)-1])
	nn.CrossEntropyLoss{}.Loss(t.model.Forward(x), labels).Backward()
}

// step is one training step on a batch of n samples.
func (t *trainer) step(n int) {
	t.forwardBackward(n)
	t.opt.Step()
	t.opt.ZeroGrad(true)
}

// warmUp is the warm-up pass (see the package doc).
func (t *trainer) warmUp() error {
	t.forwardBackward(t.c.maxBatch)
	zero := optim.DefaultAdam()
	zero.LR = 0
	throwaway, err := optim.NewAdam(nn.Parameters(t.model), zero)
	if err != nil {
		return err
	}
	defer throwaway.Release()
	throwaway.Step()
	t.opt.ZeroGrad(true)
	t.forwardBackward(t.c.maxBatch)
	t.opt.ZeroGrad(true)
	return nil
}

// preallocate is the seed's preallocate(size_mb): one block allocated and freed.
func (t *trainer) preallocate(n int64) error {
	p, err := t.a.Alloc(n, 0)
	if err != nil {
		return err
	}
	return t.a.Free(p)
}

// strategy is one row: how the allocator is prepared before training.
type strategy struct {
	name    string
	prepare func(t *trainer) error
}

func (c config) strategies(measured int64) []strategy {
	rows := []strategy{{"none", func(*trainer) error { return nil }}}
	for _, g := range c.guesses {
		rows = append(rows, strategy{fmt.Sprintf("preallocate %d MiB (a guess)", g), func(t *trainer) error { return t.preallocate(int64(g) * mib) }})
	}
	return append(rows,
		strategy{"forward+backward only", func(t *trainer) error {
			t.forwardBackward(c.maxBatch)
			t.opt.ZeroGrad(true)
			return nil
		}},
		strategy{"warm-up pass", (*trainer).warmUp},
		strategy{fmt.Sprintf("reserve the measured %s", units.Bytes(measured)), func(t *trainer) error { return t.preallocate(measured) }},
	)
}

// row is what one strategy measured.
type row struct {
	name string
	// prepAllocs are the device allocations of the preparation.
	prepAllocs int64
	// perStep are the device allocations of each training step; small counts the
	// training's new small-pool segments (2 MiB, for blocks of 1 MiB or less).
	perStep []int64
	small   int64
	// peak is the most reserved, end what is reserved after training.
	peak, end int64
	// unchanged says the preparation left the parameters as they were; checked only on
	// a device with data.
	unchanged, checked bool
}

func (r row) trainAllocs() int64 {
	var n int64
	for _, v := range r.perStep {
		n += v
	}
	return n
}

func run(args []string, out io.Writer) error {
	c, err := parseFlags(args, out)
	if err != nil {
		return err
	}
	if _, _, _, err := demo.Open(c.device); err != nil { // a bad name fails before any output
		return err
	}
	batches := c.batches()
	fmt.Fprintf(out, "sublet examples/warmup: MLP %s, Adam, %d steps on batches of %d to %d samples on %s\n",
		units.JoinInts(c.sizes, "-"), c.steps, c.minBatch, c.maxBatch, c.device)
	fmt.Fprintf(out, "batch sizes: %s\n", units.JoinInts(batches, " "))

	measured, err := c.measureWarmUp()
	if err != nil {
		return fmt.Errorf("measuring the warm-up pass on the meta device: %w", err)
	}
	fmt.Fprintf(out, "the warm-up pass on the meta device reserves %s beyond the parameters\n\n", units.Bytes(measured))

	var rows []row
	for _, s := range c.strategies(measured) {
		r, err := c.train(s, batches)
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		rows = append(rows, r)
	}
	report(out, rows)
	return nil
}

// batches draws the training batch sizes.
func (c config) batches() []int {
	r := rand.New(rand.NewPCG(c.seed, 7))
	b := make([]int, c.steps)
	for i := range b {
		b[i] = c.minBatch + r.IntN(c.maxBatch-c.minBatch+1)
	}
	return b
}

// measureWarmUp runs the warm-up pass on a fresh meta device and returns the memory it
// reserved beyond what the model and the optimizer held before.
func (c config) measureWarmUp() (int64, error) {
	dev, _, _, err := demo.Open("sim")
	if err != nil {
		return 0, err
	}
	var reserved int64
	err = demo.Try(dev, func() error {
		t, err := newTrainer(c, dev)
		if err != nil {
			return err
		}
		defer t.release()
		before := demo.Read(t.a).Reserved
		if err := t.warmUp(); err != nil {
			return err
		}
		reserved = demo.Read(t.a).PeakReserved - before
		return nil
	})
	return reserved, err
}

// train prepares a fresh device as s says, trains on batches and measures.
func (c config) train(s strategy, batches []int) (row, error) {
	dev, _, data, err := demo.Open(c.device)
	if err != nil {
		return row{}, err
	}
	var r row
	err = demo.Try(dev, func() error { r, err = c.trainOn(dev, data, s, batches); return err })
	return r, err
}

// trainOn is train on dev, which keeps data or not. Tensor math panics (out of memory, no
// kernels) reach train through demo.Try; the releases run on the way.
func (c config) trainOn(dev device.Device, data bool, s strategy, batches []int) (row, error) {
	t, err := newTrainer(c, dev)
	if err != nil {
		return row{}, err
	}
	defer t.release()
	r := row{name: s.name, checked: data}
	var before [][]float32
	if data {
		before = t.parameters()
	}
	n := demo.Read(t.a).DeviceAllocs
	if err := s.prepare(t); err != nil {
		return r, err
	}
	r.prepAllocs = demo.Read(t.a).DeviceAllocs - n
	if data {
		r.unchanged = slices.EqualFunc(before, t.parameters(), slices.Equal)
	}
	small := t.a.Stats().Segment[alloc.StatSmallPool].Allocated
	for _, b := range batches {
		n := demo.Read(t.a).DeviceAllocs
		t.step(b)
		r.perStep = append(r.perStep, demo.Read(t.a).DeviceAllocs-n)
	}
	r.small = t.a.Stats().Segment[alloc.StatSmallPool].Allocated - small
	m := demo.Read(t.a)
	r.peak, r.end = m.PeakReserved, m.Reserved
	params, state := nn.ParameterBytes(t.model), t.opt.StateBytes()
	if got := m.Tensors(); got != params+state {
		return r, fmt.Errorf("after training the allocator holds %d bytes, not parameters %d + Adam state %d: something leaked", got, params, state)
	}
	t.release()
	return r, demo.Drain(t.a)
}

// parameters copies the parameters' values to the host.
func (t *trainer) parameters() [][]float32 {
	var v [][]float32
	for _, p := range nn.Parameters(t.model) {
		v = append(v, tensor.ToSlice[float32](p))
	}
	return v
}

func countNonZero(v []int64) int {
	n := 0
	for _, x := range v {
		if x != 0 {
			n++
		}
	}
	return n
}

// report prints the table and the steps that allocated.
func report(out io.Writer, rows []row) {
	var cells [][]string
	for _, r := range rows {
		cells = append(cells, []string{r.name, fmt.Sprint(r.prepAllocs), fmt.Sprint(r.trainAllocs()), fmt.Sprint(r.small), fmt.Sprint(countNonZero(r.perStep)),
			units.Bytes(r.peak), units.Bytes(r.end)})
	}
	demo.Table(out, "", []string{"preparation", "its allocs", "training allocs", "small pool", "steps that did", "reserved peak", "after training"}, cells)
	fmt.Fprintln(out, "\ndevice allocations by step (step:count), the steps that made none left out:")
	for _, r := range rows {
		var b strings.Builder
		for i, v := range r.perStep {
			if v > 0 {
				fmt.Fprintf(&b, " %d:%d", i+1, v)
			}
		}
		if b.Len() == 0 {
			b.WriteString(" none: every step was served from the cache")
		}
		fmt.Fprintf(out, "  %-32s%s\n", r.name, b.String())
	}
	none, warm := rows[0], rows[len(rows)-2]
	fmt.Fprintf(out, "\nwithout preparation: %d device allocations in %d of the %d steps, %s reserved; after the warm-up pass: %d, %s reserved (its largest blocks come first, smaller batches split them)\n",
		none.trainAllocs(), countNonZero(none.perStep), len(none.perStep), units.Bytes(none.peak), warm.trainAllocs(), units.Bytes(warm.peak))
	if warm.small > 0 {
		fmt.Fprintf(out, "the warm-up pass left %d small-pool segment(s) to training: a batch small enough that its tensors fall to 1 MiB or less takes them from the small pool, which a warm-up at the largest batch does not fill\n", warm.small)
	}
	if rows[0].checked {
		for _, r := range rows {
			if !r.unchanged {
				fmt.Fprintf(out, "%s changed the parameters\n", r.name)
				return
			}
		}
		fmt.Fprintln(out, "no preparation changed a parameter (compared bit for bit)")
	}
	fmt.Fprintln(out, "every device: 0 bytes allocated, 0 reserved once the model and the optimizer are released and the cache emptied")
}
