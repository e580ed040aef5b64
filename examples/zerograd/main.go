// Command zerograd trains the seed's layer (a 1000×1000 weight, here nn.Linear with a
// bias, fitted by SGD with momentum to a fixed random linear map) four ways and prints
// what each costs: the memory held between steps and at the peak, the blocks and bytes
// allocated per step, the device's own allocations, the time per step, and whether it
// learns.
//
//   - ZeroGrad(true): gradients are dropped after each step (PyTorch's default,
//     set_to_none) and the next backward makes them afresh.
//
//   - ZeroGrad(false): gradients are zeroed in place and kept between steps.
//
//   - New parameters every step, the old ones released: the seed's "wrong way". Memory
//     stays low and the cache serves every block, but the optimizer's state is lost
//     and every step starts from a random weight: it never learns, and drawing the
//     weight costs time.
//
//   - New parameters every step, never released: in Go nothing frees them, so each
//     step's weight, gradient and optimizer state stay.
//
//     go run ./examples/zerograd                  # cpu, the seed's size: a few seconds
//     go run ./examples/zerograd -device sim      # memory only, at once
//     go run ./examples/zerograd -width 4096 -device sim
package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"time"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/examples/internal/demo"
	"github.com/subletml/sublet/internal/units"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/optim"
	"github.com/subletml/sublet/tensor"
)

func main() { os.Exit(demo.Status("zerograd", run(os.Args[1:], os.Stdout), os.Stderr)) }

// config is what the flags set.
type config struct {
	device string
	width  int
	batch  int
	steps  int
	lr     float64
	seed   uint64
}

func parseFlags(args []string, out io.Writer) (config, error) {
	var c config
	fs := demo.Flags("zerograd", out)
	demo.DeviceFlag(fs, &c.device, "cpu")
	fs.IntVar(&c.width, "width", 1000, "the layer is Linear(width→width)")
	fs.IntVar(&c.batch, "batch", 64, "batch size")
	fs.IntVar(&c.steps, "steps", 10, "training steps of each way")
	fs.Float64Var(&c.lr, "lr", 0.01, "SGD learning rate (momentum 0.9)")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the data and the parameters")
	if err := demo.Parse(fs, args); err != nil {
		return c, err
	}
	if c.width < 1 || c.batch < 1 || c.steps < 2 || !(c.lr > 0) {
		return c, fmt.Errorf("need -width ≥ 1, -batch ≥ 1, -steps ≥ 2 and -lr > 0")
	}
	return c, nil
}

// way is one way to handle gradients and parameters across steps.
type way int

const (
	setToNone    way = iota // ZeroGrad(true)
	zeroed                  // ZeroGrad(false)
	recreate                // new parameters every step, the old released
	recreateLeak            // new parameters every step, never released
	numWays
)

var wayNames = [numWays]string{"ZeroGrad(true)", "ZeroGrad(false)", "new each step", "new, not released"}

// cost is what one way measured over the steps.
type cost struct {
	// held is the bytes requested after each step, once ZeroGrad (or the release) ran.
	held []int64
	// peak is the most bytes requested during the steps.
	peak int64
	// allocations and allocated are the blocks the allocator handed out over the steps
	// after the first and their (rounded) bytes; deviceAllocs the device Malloc calls
	// among them.
	allocations, allocated, deviceAllocs int64
	// elapsed is the wall time of the steps after the first.
	elapsed time.Duration
	// losses is each step's loss (zero without data).
	losses []float64
}

// run parses args, trains each way and prints the comparison.
func run(args []string, out io.Writer) error {
	c, err := parseFlags(args, out)
	if err != nil {
		return err
	}
	dev, a, hasData, err := demo.Open(c.device)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "sublet examples/zerograd on %s: Linear(%d→%d) fitted to a random linear map by SGD (lr %g, momentum 0.9), batch %d, %d steps each way\n",
		dev.Name(), c.width, c.width, c.lr, c.batch, c.steps)
	if !hasData {
		fmt.Fprintf(out, "%s keeps no data: the memory and the counts are real, the losses are not computed and the times are not a GPU's\n", dev.Name())
	}
	data := newTask(c, hasData)
	var costs [numWays]cost
	for w := range numWays {
		if err := demo.Try(dev, func() error { costs[w], err = train(c, dev, a, data, w, hasData); return err }); err != nil {
			return fmt.Errorf("%s: %w", wayNames[w], err)
		}
	}
	report(out, c, costs, hasData)
	return demo.Drain(a)
}

// task is the training data: batches of standard normal inputs and their images under
// a fixed random linear map, the same for every way.
type task struct {
	x, y [][]float32
}

// newTask draws the batches; without data (hasData false) the targets stay zero, as
// nothing would read them.
func newTask(c config, hasData bool) task {
	r := rand.New(rand.NewPCG(c.seed, 11))
	normal := func(n int, scale float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64() * scale)
		}
		return v
	}
	teacher := normal(c.width*c.width, 1/float64(c.width))
	var t task
	for range c.steps {
		x := normal(c.batch*c.width, 1)
		y := make([]float32, c.batch*c.width)
		if hasData {
			linearMap(y, x, teacher, c.width)
		}
		t.x, t.y = append(t.x, x), append(t.y, y)
	}
	return t
}

// linearMap sets each row of y to the matrix m (width × width) times that row of x.
func linearMap(y, x, m []float32, width int) {
	for i := range len(x) / width {
		row := x[i*width : (i+1)*width]
		for j := range width {
			sum := float32(0)
			for k, xk := range row {
				sum += xk * m[j*width+k]
			}
			y[i*width+j] = sum
		}
	}
}

// train runs c.steps steps the way w says on a fresh model, and measures them. It
// releases everything it made before returning.
func train(c config, dev device.Device, a *alloc.Allocator, data task, w way, hasData bool) (cost, error) {
	gen := tensor.NewGenerator(c.seed)
	newModel := func() (*nn.Linear, *optim.SGD, error) {
		m := nn.NewLinear(nn.Init{Device: dev, Gen: gen}, c.width, c.width, true)
		opt, err := optim.NewSGD(nn.Parameters(m), optim.SGDConfig{LR: c.lr, Momentum: 0.9})
		if err != nil {
			m.Release()
		}
		return m, opt, err
	}
	var live []nn.Module
	var opts []optim.Optimizer
	defer func() {
		for _, o := range opts {
			o.Release()
		}
		for _, m := range live {
			m.Release()
		}
	}()
	model, opt, err := newModel()
	if err != nil {
		return cost{}, err
	}
	live, opts = append(live, model), append(opts, opt)

	a.ResetPeakStats()
	var k cost
	var start demo.Memory
	var began time.Time
	for i := range c.steps {
		if i == 1 { // the first step also makes the momentum buffers: count from the second
			start, began = demo.Read(a), time.Now()
		}
		if i > 0 && (w == recreate || w == recreateLeak) {
			if w == recreate {
				opt.Release()
				model.Release()
				live, opts = live[:0], opts[:0]
			}
			if model, opt, err = newModel(); err != nil {
				return k, err
			}
			live, opts = append(live, model), append(opts, opt)
		}
		k.losses = append(k.losses, step(dev, model, opt, data.x[i], data.y[i], c.batch, hasData))
		switch w {
		case setToNone:
			opt.ZeroGrad(true)
		case zeroed:
			opt.ZeroGrad(false)
		}
		k.held = append(k.held, demo.Read(a).Tensors())
	}
	k.elapsed = time.Since(began)
	end := demo.Read(a)
	k.peak = end.PeakTensors()
	k.allocations = end.Allocations - start.Allocations
	k.allocated = end.AllocatedTotal - start.AllocatedTotal
	k.deviceAllocs = end.DeviceAllocs - start.DeviceAllocs
	return k, nil
}

// step is one training step on a batch: forward and backward in a scope that closes
// before the optimizer steps. It returns the loss (0 without data).
func step(dev device.Device, model *nn.Linear, opt optim.Optimizer, x, y []float32, batch int, hasData bool) float64 {
	s := tensor.NewScope()
	width := len(x) / batch
	pred := model.Forward(tensor.FromSlice(s, dev, dtype.F32, x, batch, width))
	loss := tensor.MSE(pred, tensor.FromSlice(s, dev, dtype.F32, y, batch, width)).MulScalar(float64(width))
	loss.Backward()
	v := 0.0
	if hasData {
		v = loss.Item()
	}
	s.Close()
	opt.Step()
	return v
}

// report prints one column per way.
func report(out io.Writer, c config, costs [numWays]cost, hasData bool) {
	header := append([]string{""}, wayNames[:]...)
	row := func(name string, f func(k cost) string) []string {
		r := []string{name}
		for _, k := range costs {
			r = append(r, f(k))
		}
		return r
	}
	steps := int64(c.steps - 1) // what is counted per step leaves out the first
	perStep := func(n int64) string { return fmt.Sprintf("%.3g", float64(n)/float64(steps)) }
	rows := [][]string{
		row("held after the first step", func(k cost) string { return units.Bytes(k.held[0]) }),
		row("held after the last step", func(k cost) string { return units.Bytes(k.held[len(k.held)-1]) }),
		row("peak during the steps", func(k cost) string { return units.Bytes(k.peak) }),
		row("blocks allocated per step", func(k cost) string { return perStep(k.allocations) }),
		row("bytes allocated per step", func(k cost) string { return units.Bytes(k.allocated / steps) }),
		row(fmt.Sprintf("device allocations in %d steps", steps), func(k cost) string { return fmt.Sprint(k.deviceAllocs) }),
		row("time per step", func(k cost) string { return (k.elapsed / time.Duration(steps)).Round(time.Microsecond).String() }),
	}
	if hasData {
		rows = append(rows, row("loss, first step → last", func(k cost) string {
			return fmt.Sprintf("%.4f → %.4f", k.losses[0], k.losses[len(k.losses)-1])
		}))
	}
	fmt.Fprintf(out, "\ncounts and times per step are over the steps after the first, which also makes the momentum buffers:\n")
	demo.Table(out, "", header, rows)
	params := int64(c.width*c.width+c.width) * 4
	fmt.Fprintf(out, "\nthe parameters are %s; SGD's momentum as much again; their gradients as much again\n", units.Bytes(params))
	fmt.Fprintln(out, "ZeroGrad(false) keeps the gradients between steps; ZeroGrad(true) gives them back and the next backward takes them from the cache again")
	fmt.Fprintln(out, "new parameters each step cost a random draw and lose the optimizer's state: the model starts over every step")
}
