// Command leftover answers the seed's "memory not freed after the program": it reads
// the driver's free memory (MemInfo, what nvidia-smi shows) at named moments of a
// program's life, next to the allocator's reserved and allocated bytes, and splits the
// device's used memory into what the allocator holds and what others hold: the CUDA
// context (and other processes).
//
// The moments: the device opened; a model and its optimizer made; training; a step that
// fails half-way (its tensors are released as its scope unwinds); the model and
// optimizer released (allocated falls to zero, reserved does not: the cache keeps the
// segments, so the driver's free memory does not move); EmptyCache (the segments go
// back: free is where it was at the start). What remains used is the context's share,
// which only the end of the process (or closing the device) returns.
//
// On the simulated GPU, Options.Occupied plays the context: by default the 3.85 GiB
// that PyTorch's context and libraries took on the H200 (total − free at start, in
// testdata/oracle). On cuda the figures are the driver's own.
//
//	go run ./examples/leftover                  # a simulated H200, without data
//	go run ./examples/leftover -occupied 0      # no context: the device ends as it began
//	go run ./examples/leftover -device cuda:0   # the driver's own numbers
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/sim"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/examples/internal/demo"
	"github.com/subletml/sublet/internal/units"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/optim"
	"github.com/subletml/sublet/tensor"
)

func main() { os.Exit(demo.Status("leftover", run(os.Args[1:], os.Stdout), os.Stderr)) }

// h200Occupied is total − free at the start of torch_replay.py on the H200
// (testdata/oracle: 150109880320 − 145973837824): PyTorch's CUDA context and libraries.
const h200Occupied = 150109880320 - 145973837824

// config is what the flags set.
type config struct {
	device               string
	occupied             int64
	width, layers, batch int
	steps                int
	seed                 uint64
}

func parseFlags(args []string, out io.Writer) (config, error) {
	var c config
	fs := demo.Flags("leftover", out)
	demo.DeviceFlag(fs, &c.device, "sim")
	fs.Int64Var(&c.occupied, "occupied", h200Occupied, "bytes of the simulated GPU held by others from the start (the CUDA context)")
	fs.IntVar(&c.width, "width", 4096, "width of the MLP's layers")
	fs.IntVar(&c.layers, "layers", 4, "Linear layers")
	fs.IntVar(&c.batch, "batch", 4096, "batch size")
	fs.IntVar(&c.steps, "steps", 3, "training steps")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the parameters and the data")
	if err := demo.Parse(fs, args); err != nil {
		return c, err
	}
	if c.occupied < 0 || c.width < 1 || c.layers < 1 || c.batch < 1 || c.steps < 1 {
		return c, fmt.Errorf("need -occupied ≥ 0 and -width, -layers, -batch, -steps ≥ 1")
	}
	return c, nil
}

// moment is the device and the allocator at one named moment.
type moment struct {
	name string
	// free and total are the driver's (MemInfo); reserved and allocated the allocator's.
	free, total, reserved, allocated int64
}

// others is the device's used memory not held by this allocator: the context, other
// processes, other allocators.
func (m moment) others() int64 { return m.total - m.free - m.reserved }

// run parses args, lives through the moments and prints them.
func run(args []string, out io.Writer) error {
	c, err := parseFlags(args, out)
	if err != nil {
		return err
	}
	dev, a, hasData, err := demo.OpenWith(c.device, sim.Options{Occupied: c.occupied})
	if err != nil {
		return err
	}
	var ms []moment
	if err := demo.Try(dev, func() error { ms, err = live(c, dev, a, hasData); return err }); err != nil {
		return err
	}
	report(out, c, dev, ms)
	return demo.Drain(a)
}

// live runs the program's life on dev and records each moment.
func live(c config, dev device.Device, a *alloc.Allocator, hasData bool) ([]moment, error) {
	var ms []moment
	record := func(name string) error {
		free, total, err := dev.MemInfo()
		if err != nil {
			return err
		}
		m := demo.Read(a)
		ms = append(ms, moment{name, free, total, m.Reserved, m.Allocated})
		return nil
	}
	if err := record("device opened"); err != nil {
		return nil, err
	}
	sizes := make([]int, c.layers+1)
	for i := range sizes {
		sizes[i] = c.width
	}
	gen := tensor.NewGenerator(c.seed)
	model := nn.NewMLP(nn.Init{Device: dev, Gen: gen}, nn.MLPConfig{Sizes: sizes})
	defer model.Release()
	opt, err := optim.NewAdam(nn.Parameters(model), optim.DefaultAdam())
	if err != nil {
		return nil, err
	}
	defer opt.Release()
	if err := record("model and optimizer made"); err != nil {
		return nil, err
	}
	labels := make([]int64, c.batch)
	step := func(labels []int64) {
		s := tensor.NewScope(tensor.WithGenerator(gen))
		defer s.Close()
		logits := model.Forward(s.Randn(dev, dtype.F32, c.batch, c.width))
		nn.CrossEntropyLoss{}.Loss(logits, tensor.FromSlice(s, dev, dtype.I64, labels)).Backward()
		s.Close()
		opt.Step()
		opt.ZeroGrad(true)
	}
	for range c.steps {
		step(labels)
	}
	if err := record(fmt.Sprintf("%d training steps", c.steps)); err != nil {
		return nil, err
	}
	// A step that fails in its loss: one label too few. Its scope unwinds, releasing
	// the forward's tensors; nothing of it stays allocated.
	if err := tensor.Try(func() { step(labels[1:]) }); err == nil {
		return nil, fmt.Errorf("the failing step did not fail")
	}
	opt.ZeroGrad(true)
	if err := record("a step failed half-way"); err != nil {
		return nil, err
	}
	opt.Release()
	model.Release()
	if err := record("model and optimizer released"); err != nil {
		return nil, err
	}
	if err := a.EmptyCache(); err != nil {
		return nil, err
	}
	if err := record("EmptyCache"); err != nil {
		return nil, err
	}
	return ms, nil
}

func report(out io.Writer, c config, dev device.Device, ms []moment) {
	fmt.Fprintf(out, "sublet examples/leftover on %s (%s): MLP of %d × Linear(%d→%d), Adam, batch %d\n",
		dev.Name(), units.Bytes(ms[0].total), c.layers, c.width, c.width, c.batch)
	rows := [][]string{}
	for _, m := range ms {
		rows = append(rows, []string{m.name, units.Bytes(m.free), units.Bytes(m.reserved), units.Bytes(m.allocated), units.Bytes(m.others())})
	}
	demo.Table(out, "  ", []string{"after", "device free", "reserved (cache)", "allocated", "held by others (context)"}, rows)
	first, last := ms[0], ms[len(ms)-1]
	released := ms[len(ms)-2]
	fmt.Fprintf(out, "released, the tensors left %s reserved in the cache: the driver still counted it used (free %s) until EmptyCache\n",
		units.Bytes(released.reserved), units.Bytes(released.free))
	if last.free == first.free {
		fmt.Fprintf(out, "after EmptyCache the device has %s free, as when it was opened (%s); %s stays used by others: the context's share, which only the end of the process returns\n",
			units.Bytes(last.free), units.Bytes(first.free), units.Bytes(last.others()))
		return
	}
	// On a GPU other processes come and go while this one runs.
	change, how, who := first.free-last.free, "less", "others took it"
	if change < 0 {
		change, how, who = -change, "more", "others gave it back"
	}
	fmt.Fprintf(out, "after EmptyCache the device has %s free, %s %s than when it was opened (%s): %s meanwhile; %s is used by others\n",
		units.Bytes(last.free), units.Bytes(change), how, units.Bytes(first.free), who, units.Bytes(last.others()))
}
