// Command ddp trains the spirals MLP of examples/mlp data-parallel: one process per
// rank (per GPU), each on its own share of every batch, with the gradients averaged
// across the ranks by dist.DataParallel as backward produces them, so every rank ends
// each step with the same parameters, the ones one process would get on the whole
// batch. Each rank prints its progress, the buckets, the memory they take and a
// checksum of the parameters (the same on every rank).
//
//	go build -o /tmp/ddp ./examples/ddp
//	go run ./cmd/sublet run -nproc 2 /tmp/ddp              # two ranks on the CPU
//	go run ./cmd/sublet run -nproc 4 /tmp/ddp -batch 8     # four ranks, 32 per step in all
//	go run ./examples/ddp                                  # one process, no launcher
//	sublet run -nproc gpu /tmp/ddp -device cuda            # one rank per GPU, NCCL
//	/tmp/ddp -bench 100 -features 4096 -hidden 4096,4096,4096,4096 -classes 10 -batch 4096
//
// -batch is per rank (PyTorch's DDP convention): N ranks with -batch B train as one
// process with -batch N·B.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dist"
	"github.com/subletml/sublet/examples/internal/demo"
	"github.com/subletml/sublet/internal/units"
)

func main() { os.Exit(demo.Status("ddp", run(os.Args[1:], os.Stdout), os.Stderr)) }

// config is what the flags set.
type config struct {
	device     string
	samples    int
	classes    int
	hidden     []int
	epochs     int
	batch      int
	accumulate int
	lr         float64
	optimizer  string
	momentum   float64
	bucketMB   float64
	firstMB    float64
	seed       uint64
	save       string
	bench      int
	features   int
}

func parseFlags(args []string, out io.Writer) (config, error) {
	var c config
	fs := demo.Flags("ddp", out)
	demo.DeviceFlag(fs, &c.device, "cpu") // cuda is each rank's own GPU, cuda:LOCAL_RANK
	fs.IntVar(&c.samples, "samples", 3000, "points in the data set (a fifth of them held out for testing)")
	fs.IntVar(&c.classes, "classes", 3, "spiral arms (classes)")
	hidden := fs.String("hidden", "128,128", "hidden layer widths, comma-separated")
	fs.IntVar(&c.epochs, "epochs", 10, "passes over the training set")
	fs.IntVar(&c.batch, "batch", 32, "batch size of each rank")
	fs.IntVar(&c.accumulate, "accumulate", 1, "micro-batches per optimizer step (all but the last without reducing: DataParallel.NoSync)")
	fs.Float64Var(&c.lr, "lr", 0, "learning rate (0: 0.1 for sgd, 0.01 for adam)")
	fs.StringVar(&c.optimizer, "optimizer", "sgd", "sgd or adam")
	fs.Float64Var(&c.momentum, "momentum", 0.9, "SGD momentum")
	fs.Float64Var(&c.bucketMB, "bucket-mb", 25, "gradient bucket size in MiB (PyTorch's bucket_cap_mb)")
	fs.Float64Var(&c.firstMB, "first-bucket-mb", 1, "size of the first bucket in MiB")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the data, the initial parameters and the shuffling")
	fs.StringVar(&c.save, "save", "", "file rank 0 writes the trained parameters to (little-endian float32, in order)")
	fs.IntVar(&c.bench, "bench", 0, "instead of training on spirals: time this many steps on one batch of noise per rank (after 10 warm-up steps)")
	fs.IntVar(&c.features, "features", 4096, "input features of -bench's noise")
	if err := demo.Parse(fs, args); err != nil {
		return c, err
	}
	var err error
	if c.hidden, err = units.ParseInts("-hidden", *hidden); err != nil {
		return c, err
	}
	switch {
	case c.samples < 10 || c.classes < 2 || c.epochs < 1 || c.batch < 1 || c.accumulate < 1:
		return c, fmt.Errorf("need -samples ≥ 10, -classes ≥ 2, -epochs ≥ 1, -batch ≥ 1 and -accumulate ≥ 1")
	case c.lr < 0 || c.bucketMB <= 0 || c.firstMB <= 0 || c.bench < 0 || c.features < 1:
		return c, fmt.Errorf("need -lr ≥ 0, -bucket-mb and -first-bucket-mb > 0, -bench ≥ 0 and -features ≥ 1")
	case c.optimizer != "sgd" && c.optimizer != "adam":
		return c, fmt.Errorf("-optimizer %q: want sgd or adam", c.optimizer)
	}
	return c, nil
}

// openDevice opens the device the flag names for the rank at localRank: cuda is the
// rank's own GPU, cuda:LOCAL_RANK (one process per GPU, as the launcher starts them).
func openDevice(name string, localRank int) (device.Device, *alloc.Allocator, error) {
	if name == "cuda" {
		name = fmt.Sprintf("cuda:%d", localRank)
	}
	dev, a, _, err := demo.Open(name)
	return dev, a, err
}

// run joins the group the launcher's environment describes (a group of one without a
// launcher), trains and reports on stdout.
func run(args []string, stdout io.Writer) error {
	c, err := parseFlags(args, stdout)
	if err != nil {
		return err
	}
	cfg := dist.Config{WorldSize: 1}
	if dist.Launched() {
		if cfg, err = dist.ConfigFromEnv(); err != nil {
			return err
		}
	}
	dev, a, err := openDevice(c.device, cfg.LocalRank)
	if err != nil {
		return err
	}
	g, err := dist.Init(cfg)
	if err != nil {
		return err
	}
	defer g.Close()
	b, err := dist.NewBackend(g, dev)
	if err != nil {
		return err
	}
	defer b.Close()
	return demo.Try(dev, func() error { return train(c, dev, a, b, stdout) })
}
