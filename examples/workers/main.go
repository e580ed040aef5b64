// Command workers serves inference from several goroutines on the CPU two ways and
// prints the throughput of each (docs/allocator.md, "Goroutines and devices"):
//
//   - one device: one cpu device and one copy of the model, which every worker
//     goroutine runs its requests on (each request in its own no-grad scope);
//   - a device each: a cpu device and a copy of the model (the same parameters, from the
//     same seed) for every worker.
//
// A device has one caching allocator with one lock, as PyTorch's has one per GPU: on one
// device the workers take turns at it for every result their ops allocate and every
// block their scopes free, and small requests spend much of their time there. A device
// each costs a copy of the parameters per worker and shares nothing. Both ways answer
// every request with the same logits, bit for bit, which the example checks, and leave
// every device holding the model's parameters alone between requests. A GPU is one
// device however often it is opened: on cuda only the first way runs.
//
//	go run ./examples/workers
//	go run ./examples/workers -workers 4 -requests 5000 -batch 1
package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/examples/internal/demo"
	"github.com/subletml/sublet/internal/units"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/tensor"
)

func main() { os.Exit(demo.Status("workers", run(os.Args[1:], os.Stdout), os.Stderr)) }

// config is what the flags set.
type config struct {
	device            string
	workers, requests int
	batch             int
	sizes             []int
	seed              uint64
}

func parseFlags(args []string, out io.Writer) (config, error) {
	var c config
	fs := demo.Flags("workers", out)
	demo.DeviceFlag(fs, &c.device, "cpu")
	fs.IntVar(&c.workers, "workers", 2, "worker goroutines")
	fs.IntVar(&c.requests, "requests", 2000, "requests each worker answers, one after the other")
	fs.IntVar(&c.batch, "batch", 4, "rows of a request")
	sizes := fs.String("sizes", "32,64,64,10", "the MLP's layer widths: inputs, hidden..., classes")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the parameters and the requests")
	if err := demo.Parse(fs, args); err != nil {
		return c, err
	}
	var err error
	if c.sizes, err = units.ParseLayerSizes("-sizes", *sizes); err != nil {
		return c, err
	}
	if c.workers < 1 || c.requests < 1 || c.batch < 1 {
		return c, fmt.Errorf("-workers %d, -requests %d, -batch %d: each must be at least 1", c.workers, c.requests, c.batch)
	}
	return c, nil
}

// served is what one way of serving measured.
type served struct {
	elapsed time.Duration
	// logits are each worker's answer to its last request.
	logits [][]float32
	// params is the tensor bytes each device holds between requests: the model's
	// parameters (demo.Memory.Tensors: less what the kernels keep for themselves, the
	// cuBLAS workspace on a GPU).
	params []int64
}

func run(args []string, out io.Writer) error {
	c, err := parseFlags(args, out)
	if err != nil {
		return err
	}
	inputs := make([][]float32, c.workers) // each worker's request, the same every time
	r := rand.New(rand.NewPCG(c.seed, 2))
	for w := range inputs {
		inputs[w] = make([]float32, c.batch*c.sizes[0])
		for i := range inputs[w] {
			inputs[w][i] = float32(r.NormFloat64())
		}
	}
	fmt.Fprintf(out, "%d workers, %d requests each of %d rows, an MLP %v, on %s\n", c.workers, c.requests, c.batch, c.sizes, c.device)
	fresh, err := demo.Fresh(c.device)
	if err != nil {
		return err
	}
	ways := []int{1, c.workers} // devices: one, then one a worker
	if !fresh {
		ways = ways[:1]
	}
	var rows [][]string
	var results []served
	for i, devices := range ways {
		s, err := serve(c, devices, inputs)
		if err != nil {
			return err
		}
		results = append(results, s)
		name := "one device"
		if i == 1 {
			name = "a device each"
		}
		total := float64(c.workers * c.requests)
		rows = append(rows, []string{name, fmt.Sprint(devices), fmt.Sprintf("%.0f", total/s.elapsed.Seconds()),
			fmt.Sprintf("%.2f", s.elapsed.Seconds()*1e6/total), units.Bytes(s.params[0])})
	}
	demo.Table(out, "", []string{"way", "devices", "requests/s", "µs a request (all workers)", "parameters on each device"}, rows)
	if !fresh {
		fmt.Fprintf(out, "a device each: %s is one device however often it is opened (one allocator a GPU, as in PyTorch); that way needs -device cpu\n", c.device)
		return nil
	}
	for w := range c.workers {
		if !slices.Equal(results[0].logits[w], results[1].logits[w]) {
			return fmt.Errorf("worker %d: the two ways answered its request differently", w)
		}
	}
	fmt.Fprintf(out, "a device each: %.2fx the requests a second of one device; the same logits both ways, bit for bit\n",
		results[0].elapsed.Seconds()/results[1].elapsed.Seconds())
	return nil
}

// serve runs c.workers goroutines answering c.requests requests each, on devices cpu
// devices (one model on each, worker w on device w % devices), and checks that every
// device holds its model's parameters alone between requests and nothing after.
func serve(c config, devices int, inputs [][]float32) (served, error) {
	var s served
	devs := make([]device.Device, devices)
	als := make([]*alloc.Allocator, devices)
	models := make([]*nn.Sequential, devices)
	defer func() {
		for _, m := range models {
			if m != nil {
				m.Release()
			}
		}
	}()
	for i := range devs {
		dev, al, hasData, err := demo.Open(c.device)
		if err != nil {
			return s, err
		}
		if !hasData {
			return s, fmt.Errorf("-device %s keeps no data: the workers need a device that computes (cpu or sim-backed)", c.device)
		}
		devs[i], als[i] = dev, al
		if err := demo.Try(dev, func() error {
			models[i] = nn.NewMLP(nn.Init{Device: dev, Gen: tensor.NewGenerator(c.seed)}, nn.MLPConfig{Sizes: c.sizes})
			return nil
		}); err != nil {
			return s, err
		}
		s.params = append(s.params, demo.Read(al).Tensors())
	}
	s.logits = make([][]float32, c.workers)
	errs := make([]error, c.workers)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range c.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := w % devices
			errs[w] = demo.Try(devs[d], func() error {
				for range c.requests {
					s.logits[w] = answer(devs[d], models[d], inputs[w], c.batch, c.sizes[0])
				}
				return nil
			})
		}()
	}
	wg.Wait()
	s.elapsed = time.Since(start)
	for w, err := range errs {
		if err != nil {
			return s, fmt.Errorf("worker %d: %w", w, err)
		}
	}
	for i, al := range als {
		if held := demo.Read(al).Tensors(); held != s.params[i] {
			return s, fmt.Errorf("device %d holds %d bytes of tensors after the requests, the parameters %d", i, held, s.params[i])
		}
	}
	for i, m := range models {
		m.Release()
		models[i] = nil
		if err := demo.Drain(als[i]); err != nil {
			return s, err
		}
	}
	return s, nil
}

// answer runs one request in a scope of its own and returns the logits.
func answer(dev device.Device, model *nn.Sequential, input []float32, batch, in int) []float32 {
	s := tensor.NewScope(tensor.NoGrad())
	defer s.Close()
	x := tensor.FromSlice(s, dev, dtype.F32, input, batch, in)
	return tensor.ToSlice[float32](model.Forward(x))
}
