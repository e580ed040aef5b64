// Command leaks shows the two leaks of the seed tutorials that come from keeping what a
// loop made, each next to its fixes, as the allocator's memory after every iteration:
//
//   - The seed's loop, x = randn(1000, 1000); y = x * 2: translated straight (one scope
//     around the loop) every iteration's x and y stay until the scope closes, 7.63 MiB
//     more per iteration. A scope per iteration keeps memory flat, also over an input
//     made before the loop in a longer-lived scope: while that scope has one open
//     child, the iteration's scope, an op on its tensors hands the result to the child
//     (tensor's scope routing), with or without s.Bind.
//
//   - Accumulating a loss tensor in an evaluation loop: total = total + loss keeps
//     every iteration's graph, and the graph keeps what its ops saved for backward (the
//     batch, the activations). Adding loss.Detach(), running under NoGrad, or adding
//     loss.Item() to a Go float keeps it flat.
//
//     go run ./examples/leaks                   # cpu: a second
//     go run ./examples/leaks -device sim       # the same memory without computing
//     go run ./examples/leaks -iterations 10 -size 2000
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/examples/internal/demo"
	"github.com/subletml/sublet/examples/internal/toy"
	"github.com/subletml/sublet/internal/units"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/tensor"
)

func main() { os.Exit(demo.Status("leaks", run(os.Args[1:], os.Stdout), os.Stderr)) }

// config is what the flags set.
type config struct {
	device     string
	iterations int
	size       int   // the seed's x is size × size
	sizes      []int // the evaluated MLP's layer widths
	batch      int
	seed       uint64
}

func parseFlags(args []string, out io.Writer) (config, error) {
	c := config{sizes: []int{64, 256, 256, 10}}
	fs := demo.Flags("leaks", out)
	demo.DeviceFlag(fs, &c.device, "cpu")
	fs.IntVar(&c.iterations, "iterations", 5, "iterations of each loop")
	fs.IntVar(&c.size, "size", 1000, "the seed's x is size × size floats")
	fs.IntVar(&c.batch, "batch", 128, "batch size of the evaluation loop (MLP 64-256-256-10)")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the data and the parameters")
	if err := demo.Parse(fs, args); err != nil {
		return c, err
	}
	if c.iterations < 2 || c.size < 1 || c.batch < 1 {
		return c, fmt.Errorf("need -iterations ≥ 2 (growth is the difference of two), -size ≥ 1 and -batch ≥ 1")
	}
	return c, nil
}

// loop is one variant of a loop and the memory it left after each iteration: the bytes
// tensors hold (the allocator's requested bytes) above those held before it began.
type loop struct {
	name  string
	after []int64
}

// growth is the memory each iteration adds, when every iteration adds the same, and
// whether it does.
func (l loop) growth() (int64, bool) {
	d := l.after[1] - l.after[0]
	for i := 2; i < len(l.after); i++ {
		if l.after[i]-l.after[i-1] != d {
			return 0, false
		}
	}
	return d, true
}

// result is what a run measured.
type result struct {
	seed, accumulate []loop
	// params is the evaluated model's parameter bytes; left the bytes requested after
	// the last loop, before the model was released (exactly params).
	params, left int64
	// totals are the accumulated losses of the evaluation variants (with data).
	totals []float64
}

// run parses args, runs every loop and prints the tables.
func run(args []string, out io.Writer) error {
	c, err := parseFlags(args, out)
	if err != nil {
		return err
	}
	dev, a, hasData, err := demo.Open(c.device)
	if err != nil {
		return err
	}
	var r result
	if err := demo.Try(dev, func() error { r, err = measure(c, dev, a, hasData); return err }); err != nil {
		return err
	}
	report(out, c, dev, r, hasData)
	return demo.Drain(a)
}

// measure runs the loops of the seed and of the evaluation.
func measure(c config, dev device.Device, a *alloc.Allocator, hasData bool) (result, error) {
	var r result
	gen := tensor.NewGenerator(c.seed)
	for _, v := range seedLoops(dev, gen, c.size, c.iterations) {
		l, err := track(a, v.name, c.iterations, v.run)
		if err != nil {
			return r, err
		}
		r.seed = append(r.seed, l)
	}

	model := nn.NewMLP(nn.Init{Device: dev, Gen: gen}, nn.MLPConfig{Sizes: c.sizes})
	defer model.Release()
	r.params = nn.ParameterBytes(model)
	batches := newBatches(c, c.iterations)
	for _, v := range evalLoops(dev, model, batches, hasData) {
		var total float64
		l, err := track(a, v.name, c.iterations, func(each func()) { total = v.run(each) })
		if err != nil {
			return r, err
		}
		r.accumulate = append(r.accumulate, l)
		r.totals = append(r.totals, total)
	}
	r.left = demo.Read(a).Tensors()
	if r.left != r.params {
		return r, fmt.Errorf("after the loops %d bytes are requested, not the model's %d: a loop leaked past its end", r.left, r.params)
	}
	return r, nil
}

// track runs body, which calls each after every iteration, and records the memory
// then; after body returns everything it made must be gone.
func track(a *alloc.Allocator, name string, iterations int, body func(each func())) (loop, error) {
	before := demo.Read(a).Tensors()
	l := loop{name: name}
	body(func() { l.after = append(l.after, demo.Read(a).Tensors()-before) })
	if len(l.after) != iterations {
		return l, fmt.Errorf("%s: %d iterations measured, want %d", name, len(l.after), iterations)
	}
	if left := demo.Read(a).Tensors() - before; left != 0 {
		return l, fmt.Errorf("%s: %d bytes left after the loop's scopes closed", name, left)
	}
	return l, nil
}

// variant is one way to write a loop: run runs it, calling each after every
// iteration, and releases everything before returning.
type variant struct {
	name string
	run  func(each func())
}

// repeat runs body n times, calling each after every time.
func repeat(n int, each, body func()) {
	for range n {
		body()
		each()
	}
}

// seedLoops are the seed's x = randn(size, size); y = x * 2, written four ways, each
// running n iterations.
func seedLoops(dev device.Device, gen *tensor.Generator, size, n int) []variant {
	return []variant{
		{"one scope around the loop (the straight translation)", func(each func()) {
			s := tensor.NewScope(tensor.WithGenerator(gen))
			defer s.Close()
			repeat(n, each, func() { s.Randn(dev, dtype.F32, size, size).MulScalar(2) })
		}},
		{"a scope per iteration", func(each func()) {
			repeat(n, each, func() {
				s := tensor.NewScope(tensor.WithGenerator(gen))
				defer s.Close()
				s.Randn(dev, dtype.F32, size, size).MulScalar(2)
			})
		}},
		{"x made before the loop, a scope per iteration", fixedInput(dev, gen, size, n, false)},
		{"the same with x bound into it: s.Bind(x) * 2", fixedInput(dev, gen, size, n, true)},
	}
}

// fixedInput is the seed's loop over one x made before it, each iteration in a scope
// of its own, with x bound into that scope or not: either way x * 2 belongs to the
// iteration's scope, the one open child of x's scope, and dies with it.
func fixedInput(dev device.Device, gen *tensor.Generator, size, n int, bind bool) func(each func()) {
	return func(each func()) {
		outer := tensor.NewScope(tensor.WithGenerator(gen))
		defer outer.Close()
		x := outer.Randn(dev, dtype.F32, size, size)
		repeat(n, each, func() {
			s := outer.Child()
			defer s.Close()
			if bind {
				s.Bind(x).MulScalar(2)
			} else {
				x.MulScalar(2)
			}
		})
	}
}

// newBatches draws n batches of standard normal inputs and uniform labels.
func newBatches(c config, n int) []toy.Dataset {
	rest := toy.Noise(c.seed, n*c.batch, c.sizes[0], c.sizes[len(c.sizes)-1])
	bs := make([]toy.Dataset, n)
	for i := range bs {
		bs[i], rest = rest.Split(c.batch)
	}
	return bs
}

// evalVariant is one way to sum the losses of an evaluation loop: run returns the sum
// (0 without data).
type evalVariant struct {
	name string
	run  func(each func()) float64
}

// evalLoops sum model's loss over batches four ways, each iteration in a scope of its
// own (the fix of the seed's loop is in place: what leaks here leaks through the graph).
func evalLoops(dev device.Device, model nn.Module, batches []toy.Dataset, hasData bool) []evalVariant {
	// loss is the loss of b, computed in s.
	loss := func(s *tensor.Scope, b toy.Dataset) *tensor.Tensor {
		x := tensor.FromSlice(s, dev, dtype.F32, b.X, b.Len(), b.Dim)
		return nn.CrossEntropyLoss{}.Loss(model.Forward(x), tensor.FromSlice(s, dev, dtype.I64, b.Labels))
	}
	value := func(t *tensor.Tensor) float64 {
		if !hasData {
			return 0
		}
		return t.Item()
	}
	// accumulate keeps a total tensor in the loop's scope: each iteration adds term(loss)
	// to it in a scope made with opts, keeps the new total and releases the old handle.
	accumulate := func(term func(*tensor.Tensor) *tensor.Tensor, opts ...tensor.Option) func(each func()) float64 {
		return func(each func()) float64 {
			outer := tensor.NewScope()
			defer outer.Close()
			total := outer.Zeros(dev, dtype.F32)
			for _, b := range batches {
				s := outer.Child(opts...)
				old := total
				total = s.Keep(total.Add(term(loss(s, b))))
				old.Release()
				s.Close()
				each()
			}
			return value(total)
		}
	}
	same := func(t *tensor.Tensor) *tensor.Tensor { return t }
	vs := []evalVariant{
		{"total = total + loss: every graph is kept", accumulate(same)},
		{"total = total + loss.Detach()", accumulate((*tensor.Tensor).Detach)},
		{"total = total + loss under NoGrad", accumulate(same, tensor.NoGrad())},
	}
	if hasData {
		vs = append(vs, evalVariant{"total += loss.Item(), a Go float64", func(each func()) float64 {
			total := 0.0
			for _, b := range batches {
				s := tensor.NewScope()
				total += loss(s, b).Item()
				s.Close()
				each()
			}
			return total
		}})
	}
	return vs
}

// report prints the two tables.
func report(out io.Writer, c config, dev device.Device, r result, hasData bool) {
	fmt.Fprintf(out, "sublet examples/leaks on %s: %d iterations of each loop; memory is the bytes tensors hold after each iteration (the allocator's requested bytes) above what the loop began with\n",
		dev.Name(), c.iterations)
	if !hasData {
		fmt.Fprintf(out, "%s keeps no data: ops allocate their results and compute nothing, so the memory is real and the losses are not computed\n", dev.Name())
	}
	fmt.Fprintf(out, "\nthe seed's loop: x = randn(%d, %d); y = x * 2 (x is %s)\n", c.size, c.size, units.Bytes(int64(c.size*c.size*4)))
	table(out, c.iterations, r.seed)
	fmt.Fprintf(out, "\nsumming the loss of an evaluation loop, MLP %s (%s of parameters), batch %d, a scope per iteration:\n",
		units.JoinInts(c.sizes, "-"), units.Bytes(r.params), c.batch)
	table(out, c.iterations, r.accumulate)
	if hasData {
		fmt.Fprintf(out, "the sums agree: %.4f (kept graphs), %.4f (Detach), %.4f (NoGrad), %.4f (Item)\n", r.totals[0], r.totals[1], r.totals[2], r.totals[3])
	}
	fmt.Fprintf(out, "\nafter every loop: %d bytes requested, the model's parameters; every scope closed, every graph released\n", r.left)
}

// table writes one row per loop: the memory after each iteration and the growth.
func table(out io.Writer, iterations int, loops []loop) {
	header := []string{""}
	for i := range iterations {
		header = append(header, fmt.Sprintf("after %d", i+1))
	}
	header = append(header, "per iteration")
	var rows [][]string
	for _, l := range loops {
		row := []string{l.name}
		for _, m := range l.after {
			row = append(row, units.Bytes(m))
		}
		growth := "uneven"
		if g, ok := l.growth(); ok {
			growth = units.Bytes(g)
			if g > 0 {
				growth = "+" + growth
			}
		}
		rows = append(rows, append(row, growth))
	}
	demo.Table(out, "  ", header, rows)
}
