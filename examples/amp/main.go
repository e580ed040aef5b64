// Command amp trains one MLP twice on a seeded synthetic classification set, in F32 and
// in mixed precision (F16 autocast with a GradScaler), and compares them: the loss,
// every change of the loss scale and every step skipped for an overflow, then the
// memory of a training step in both runs.
//
// The initial scale is set high (2^24 by default) so that the first steps overflow
// float16, are skipped and back the scale off, as the GradScaler is meant to; after
// -growth-interval good steps in a row it grows again.
//
//	go run ./examples/amp                     # cpu, defaults: a few seconds
//	go run ./examples/amp -device sim-backed  # a simulated GPU with real data
//	go run ./examples/amp -device cuda:0      # the GPU (its F16 products on tensor cores)
//	go run ./examples/amp -hidden 1024 -batch 2048 -steps 40
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/examples/internal/demo"
)

func main() { os.Exit(demo.Status("amp", run(os.Args[1:], os.Stdout), os.Stderr)) }

// config is what the flags set.
type config struct {
	device         string
	features       int
	classes        int
	hidden         int
	layers         int
	batch          int
	steps          int
	lr             float64
	initScale      float64
	growthInterval int
	every          int
	seed           uint64
}

func parseFlags(args []string, out io.Writer) (config, error) {
	var c config
	fs := demo.Flags("amp", out)
	demo.DeviceFlag(fs, &c.device, "cpu")
	fs.IntVar(&c.features, "features", 32, "input features")
	fs.IntVar(&c.classes, "classes", 8, "classes")
	fs.IntVar(&c.hidden, "hidden", 512, "width of the hidden layers")
	fs.IntVar(&c.layers, "layers", 3, "hidden layers (Linear + ReLU each)")
	fs.IntVar(&c.batch, "batch", 1024, "batch size (a fresh batch each step)")
	fs.IntVar(&c.steps, "steps", 60, "training steps")
	fs.Float64Var(&c.lr, "lr", 0.05, "SGD learning rate (momentum 0.9)")
	fs.Float64Var(&c.initScale, "init-scale", 1<<24, "the GradScaler's initial scale")
	fs.IntVar(&c.growthInterval, "growth-interval", 20, "good steps in a row before the scale grows")
	fs.IntVar(&c.every, "every", 10, "print the loss every this many steps")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the data and the initial parameters")
	if err := demo.Parse(fs, args); err != nil {
		return c, err
	}
	switch {
	case c.features < 1 || c.classes < 2 || c.hidden < 1 || c.layers < 1 || c.batch < 1 || c.steps < 1 || c.every < 1:
		return c, fmt.Errorf("need -features, -hidden, -layers, -batch, -steps, -every ≥ 1 and -classes ≥ 2")
	case !(c.lr > 0) || !(c.initScale > 0) || c.growthInterval < 1:
		return c, fmt.Errorf("need -lr > 0, -init-scale > 0 and -growth-interval ≥ 1")
	}
	return c, nil
}

// openDevice opens a fresh device of the kind c names, so that each run has an
// allocator (and statistics) of its own. It must keep data: the GradScaler reads the
// gradients' values to find an overflow.
func openDevice(c config) (device.Device, *alloc.Allocator, error) {
	dev, a, hasData, err := demo.Open(c.device)
	if err == nil && !hasData {
		err = fmt.Errorf("-device %s keeps no data, and the GradScaler reads the gradients' values: use cpu, sim-backed or cuda[:N]", c.device)
	}
	return dev, a, err
}

// run parses args, trains both ways and reports on stdout.
func run(args []string, stdout io.Writer) error {
	c, err := parseFlags(args, stdout)
	if err != nil {
		return err
	}
	if _, _, err := openDevice(c); err != nil { // a device that cannot run fails before any output
		return err
	}
	sizes := fmt.Sprint(c.features)
	for range c.layers {
		sizes += fmt.Sprintf("-%d", c.hidden)
	}
	fmt.Fprintf(stdout, "sublet examples/amp: MLP %s-%d, batch %d, %d steps of SGD (lr %g, momentum 0.9) on %s, seed %d\n",
		sizes, c.classes, c.batch, c.steps, c.lr, c.device, c.seed)
	f32, err := train(c, false, stdout)
	if err != nil {
		return err
	}
	mixed, err := train(c, true, stdout)
	if err != nil {
		return err
	}
	report(stdout, c, f32, mixed)
	return nil
}
