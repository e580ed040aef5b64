// Command monitor runs a goroutine beside a training loop that samples the allocator's
// statistics on a ticker and raises an alert when allocated memory goes over a
// threshold (the seeds' "monitor routinely, alarm over a threshold"). The loop trains
// an MLP; from -leak-from on it also keeps each step's loss tensor, summing the losses
// as tensors, and retains the graph in backward (as code that means to backpropagate
// the sum later does), so every step's graph and what it saved stay alive and memory
// grows. The alert stops the loop at its next step; the kept graph is released and
// memory comes back to the parameters and the optimizer state.
//
// With -every 0 there is no goroutine: the loop samples after each step itself, so the
// alert comes exactly at the first step over the threshold.
//
//	go run ./examples/monitor                         # cpu: a second
//	go run ./examples/monitor -every 0                # a sample after each step
//	go run ./examples/monitor -device sim -batch 8192 -threshold 256
package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/examples/internal/demo"
	"github.com/subletml/sublet/examples/internal/toy"
	"github.com/subletml/sublet/internal/units"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/optim"
	"github.com/subletml/sublet/tensor"
)

func main() { os.Exit(demo.Status("monitor", run(os.Args[1:], os.Stdout), os.Stderr)) }

const mib = 1 << 20

// config is what the flags set.
type config struct {
	device                 string
	features, hidden       int
	batch, steps, leakFrom int
	thresholdMiB           float64
	every                  time.Duration
	seed                   uint64
}

func parseFlags(args []string, out io.Writer) (config, error) {
	var c config
	fs := demo.Flags("monitor", out)
	demo.DeviceFlag(fs, &c.device, "cpu")
	fs.IntVar(&c.features, "features", 32, "input features")
	fs.IntVar(&c.hidden, "hidden", 256, "width of the two hidden layers")
	fs.IntVar(&c.batch, "batch", 256, "batch size")
	fs.IntVar(&c.steps, "steps", 200, "the most training steps")
	fs.IntVar(&c.leakFrom, "leak-from", 20, "from this step on the loop keeps each step's loss tensor (0: never)")
	fs.Float64Var(&c.thresholdMiB, "threshold", 8, "alert when more than this many MiB are allocated")
	fs.DurationVar(&c.every, "every", time.Millisecond, "the monitor goroutine's sampling interval (0: no goroutine, a sample after each step)")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the data and the parameters")
	if err := demo.Parse(fs, args); err != nil {
		return c, err
	}
	if c.features < 1 || c.hidden < 1 || c.batch < 1 || c.steps < 1 || c.leakFrom < 0 || !(c.thresholdMiB > 0) || c.every < 0 {
		return c, fmt.Errorf("need -features, -hidden, -batch, -steps ≥ 1, -leak-from ≥ 0, -threshold > 0 and -every ≥ 0")
	}
	return c, nil
}

// result is what a run saw.
type result struct {
	samples []sample
	alerts  []alert
	// stopped is the last step run; held the bytes requested after the first step (the
	// parameters and the momentum), after those once the loop ended and released what
	// it kept; threshold is the alert's, in bytes.
	stopped     int
	held, after int64
	threshold   int64
}

// run parses args, trains under the monitor and prints what it saw.
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
	if err := demo.Try(dev, func() error { r, err = train(c, dev, a, hasData); return err }); err != nil {
		return err
	}
	report(out, c, dev, r)
	return demo.Drain(a)
}

// train runs the loop under the monitor until the steps are done or an alert comes.
func train(c config, dev device.Device, a *alloc.Allocator, hasData bool) (result, error) {
	r := result{threshold: int64(c.thresholdMiB * mib)}
	gen := tensor.NewGenerator(c.seed)
	model := nn.NewMLP(nn.Init{Device: dev, Gen: gen}, nn.MLPConfig{Sizes: []int{c.features, c.hidden, c.hidden, 10}})
	defer model.Release()
	opt, err := optim.NewSGD(nn.Parameters(model), optim.SGDConfig{LR: 0.05, Momentum: 0.9})
	if err != nil {
		return r, err
	}
	defer opt.Release()

	var loop progress
	mon := newMonitor(a, r.threshold, &loop)
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	if c.every > 0 {
		wg.Add(1)
		go func() { defer wg.Done(); mon.run(ctx, c.every) }()
	}
	defer func() { stop(); wg.Wait() }()

	kept := tensor.NewScope() // where the leaking loop keeps its total
	defer kept.Close()
	var total *tensor.Tensor
	teacher := toy.NewTeacher(c.seed, c.features, 10)
	data := rand.New(rand.NewPCG(c.seed, 5))
	for i := 1; i <= c.steps; i++ {
		loop.begin(int64(i))
		x, labels := teacher.Batch(data, c.batch)
		s := kept.Child()
		loss := nn.CrossEntropyLoss{}.Loss(model.Forward(tensor.FromSlice(s, dev, dtype.F32, x, c.batch, c.features)), tensor.FromSlice(s, dev, dtype.I64, labels))
		if c.leakFrom > 0 && i >= c.leakFrom {
			// The leak: the total keeps every step's graph (loss.Detach() would not).
			if total == nil {
				total = s.Keep(loss)
			} else {
				old := total
				total = s.Keep(total.Add(loss))
				old.Release()
			}
		}
		loss.BackwardWith(tensor.BackwardOptions{RetainGraph: total != nil})
		s.Close()
		opt.Step()
		opt.ZeroGrad(true)
		if i == 1 {
			r.held = demo.Read(a).Tensors()
		}
		loop.end(demo.Read(a).Allocated)
		if c.every == 0 {
			mon.take()
		}
		r.stopped = i
		if len(mon.alerts) > 0 {
			break
		}
	}
	stop()
	wg.Wait()
	r.samples, r.alerts = mon.recorded()
	kept.Close()
	r.after = demo.Read(a).Tensors()
	return r, nil
}

func report(out io.Writer, c config, dev device.Device, r result) {
	fmt.Fprintf(out, "sublet examples/monitor on %s: MLP %d-%d-%d-10, batch %d; alert over %s allocated", dev.Name(), c.features, c.hidden, c.hidden, c.batch, units.Bytes(r.threshold))
	if c.leakFrom > 0 {
		fmt.Fprintf(out, "; from step %d the loop keeps each step's loss tensor (a leak)", c.leakFrom)
	}
	if c.every > 0 {
		fmt.Fprintf(out, "\nthe monitor goroutine sampled every %v: %d samples\n", c.every, len(r.samples))
	} else {
		fmt.Fprintf(out, "\nthe loop sampled after each step: %d samples\n", len(r.samples))
	}
	// At most 12 rows, evenly spread, the last one included.
	stride := max(1, (len(r.samples)+11)/12)
	rows := [][]string{}
	for i, s := range r.samples {
		if i%stride != 0 && i != len(r.samples)-1 {
			continue
		}
		rows = append(rows, []string{s.at.Round(time.Microsecond).String(), fmt.Sprint(s.step), units.Bytes(s.mem.Allocated), units.Bytes(s.mem.Reserved), units.Bytes(s.mem.PeakAllocated)})
	}
	demo.Table(out, "  ", []string{"at", "step", "allocated", "reserved", "peak allocated"}, rows)
	for _, al := range r.alerts {
		fmt.Fprintf(out, "ALERT at %v, step %d: %s allocated, over the threshold of %s (the last step completed grew it by %s)\n",
			al.at.Round(time.Microsecond), al.step, units.Bytes(al.mem.Allocated), units.Bytes(al.threshold), units.Bytes(al.perStep))
	}
	if len(r.alerts) > 0 {
		fmt.Fprintf(out, "the loop stopped at step %d on the alert; ", r.stopped)
	} else {
		fmt.Fprintf(out, "no alert in %d steps; ", r.stopped)
	}
	fmt.Fprintf(out, "with what it kept released, %d bytes are held: the parameters and the momentum (%d after the first step)\n", r.after, r.held)
}
