// Command switching shows memory when a program moves between models, the two cases the
// seeds give for calling empty_cache:
//
//  1. A GAN alternating discriminator and generator steps: the memory held before,
//     at the peak of and after each kind of step; what the generator step costs when
//     the discriminator is not frozen (its gradients are computed, then dropped); and
//     the seeds' "empty_cache before training the generator every few steps" against
//     never, in device allocations and driver time.
//
//  2. Interactive model swapping on a simulated GPU that holds model A or model B but
//     not both: load A, evaluate, release, load B, evaluate, release, with the
//     allocator's allocated and reserved memory and the device's free memory after
//     each step. Without releasing A, B does not fit. Released, A's blocks stay cached
//     (reserved, not free on the device) until B needs the room: the allocator then
//     releases them itself and retries, so EmptyCache is not needed for B to fit; it
//     only gives the memory back to the device sooner, for another process.
//
//     go run ./examples/switching                    # sim: exact memory, no compute, at once
//     go run ./examples/switching -device cpu -hidden 256   # the GAN learns: its losses
//     go run ./examples/switching -steps 500 -hidden 256
package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/subletml/sublet/examples/internal/demo"
	"github.com/subletml/sublet/internal/units"
)

func main() { os.Exit(demo.Status("switching", run(os.Args[1:], os.Stdout), os.Stderr)) }

const mib = 1 << 20

// config is what the flags set.
type config struct {
	device               string
	batch, zdim, hidden  int
	steps, every, report int
	lr                   float64
	a, b                 spec
	capacityMiB          int64
	seed                 uint64
}

func parseFlags(args []string, out io.Writer) (config, error) {
	c := config{a: spec{name: "A", depth: 6, width: 2048, batch: 512}, b: spec{name: "B", depth: 2, width: 4096, batch: 512}}
	fs := demo.Flags("switching", out)
	demo.DeviceFlag(fs, &c.device, "sim")
	fs.IntVar(&c.batch, "batch", 1024, "GAN batch size")
	fs.IntVar(&c.zdim, "zdim", 8, "the generator's noise dimensions")
	fs.IntVar(&c.hidden, "hidden", 1024, "width of both GAN networks' two hidden layers")
	fs.IntVar(&c.steps, "steps", 50, "GAN training steps (one discriminator and one generator step each)")
	fs.IntVar(&c.every, "every", 5, "the seeds' cadence: EmptyCache before every this many generator steps")
	fs.IntVar(&c.report, "report", 25, "print the losses every this many steps")
	fs.Float64Var(&c.lr, "lr", 2e-3, "Adam learning rate of both networks")
	fs.IntVar(&c.a.width, "a-width", c.a.width, "width of model A's Linear layers")
	fs.IntVar(&c.a.depth, "a-depth", c.a.depth, "model A's Linear layers")
	fs.IntVar(&c.b.width, "b-width", c.b.width, "width of model B's Linear layers")
	fs.IntVar(&c.b.depth, "b-depth", c.b.depth, "model B's Linear layers")
	fs.Int64Var(&c.capacityMiB, "capacity", 0, "capacity of part 2's simulated GPU in MiB (0: room for the larger model and half the other)")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the data and the parameters")
	if err := demo.Parse(fs, args); err != nil {
		return c, err
	}
	if c.batch < 1 || c.zdim < 1 || c.hidden < 1 || c.steps < 1 || c.every < 1 || c.report < 1 || !(c.lr > 0) ||
		c.a.width < 1 || c.a.depth < 1 || c.b.width < 1 || c.b.depth < 1 || c.capacityMiB < 0 {
		return c, fmt.Errorf("need -batch, -zdim, -hidden, -steps, -every, -report and the models' widths and depths ≥ 1, -lr > 0 and -capacity ≥ 0")
	}
	return c, nil
}

// run parses args, runs both parts and prints them.
func run(args []string, out io.Writer) error {
	c, err := parseFlags(args, out)
	if err != nil {
		return err
	}
	dev, a, hasData, err := demo.Open(c.device)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "sublet examples/switching on %s\n\npart 1: a GAN, generator MLP %d-%d-%d-2 and discriminator MLP 2-%d-%d-2, Adam each, batch %d, %d steps of each kind\n",
		dev.Name(), c.zdim, c.hidden, c.hidden, c.hidden, c.hidden, c.batch, c.steps)
	if !hasData {
		fmt.Fprintf(out, "%s keeps no data: the memory is exact, the losses are not computed\n", dev.Name())
	}
	var g ganResult
	if err := demo.Try(dev, func() error { g, err = trainGAN(c, dev, a, hasData); return err }); err != nil {
		return err
	}
	reportGAN(out, c, g, hasData)

	capacity, err := capacityFor(c)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\npart 2: interactive model swapping on a simulated GPU of %s, without data\n  model %v\n  model %v\n", units.Bytes(capacity), c.a, c.b)
	for w := range numSessions {
		rows, err := swap(w, c.a, c.b, capacity)
		if err != nil {
			return fmt.Errorf("%s: %w", sessionNames[w], err)
		}
		reportSwap(out, w, rows)
	}
	return demo.Drain(a)
}

// capacityFor is part 2's capacity: the flag's, or room for the larger model's session
// steps and half the smaller one's, measured on an H200-sized meta device.
func capacityFor(c config) (int64, error) {
	if c.capacityMiB > 0 {
		return c.capacityMiB * mib, nil
	}
	rows, err := swap(releaseThen, c.a, c.b, 0)
	if err != nil {
		return 0, err
	}
	need := map[string]int64{}
	for _, r := range rows {
		need[r.step] = r.reserved
	}
	ra, rb := need["evaluate A"], need["evaluate B"]
	return (max(ra, rb) + min(ra, rb)/2) / (2 * mib) * (2 * mib), nil
}

func reportGAN(out io.Writer, c config, g ganResult, hasData bool) {
	if hasData {
		for i := range g.lossD {
			step := min((i+1)*c.report, c.steps)
			fmt.Fprintf(out, "  step %4d  discriminator loss %.4f  generator loss %.4f\n", step, g.lossD[i], g.lossG[i])
		}
	}
	fmt.Fprintf(out, "  parameters: generator %s, discriminator %s; Adam state: %s and %s\n",
		units.Bytes(g.paramsG), units.Bytes(g.paramsD), units.Bytes(g.stateG), units.Bytes(g.stateD))
	rows := [][]string{}
	for _, r := range []struct {
		name string
		m    moment
	}{
		{"discriminator step (fakes made under NoGrad)", g.d},
		{"generator step", g.g},
		{"generator step, discriminator frozen", g.gFrozen},
	} {
		rows = append(rows, []string{r.name, units.Bytes(r.m.before), units.Bytes(r.m.backward), units.Bytes(r.m.peak), units.Bytes(r.m.after)})
	}
	fmt.Fprintln(out, "  memory of the last step of each kind (bytes requested):")
	demo.Table(out, "  ", []string{"", "before", "after backward", "peak", "after"}, rows)
	fmt.Fprintf(out, "  after backward an unfrozen discriminator holds %s more, its gradients, computed for nothing and dropped; %s more at the peak\n",
		units.Bytes(g.g.backward-g.gFrozen.backward), units.Bytes(g.g.peak-g.gFrozen.peak))
	cad := [][]string{}
	for _, r := range []struct {
		name string
		k    cadence
	}{
		{"never", g.plain},
		{fmt.Sprintf("every %d generator steps (the seeds)", c.every), g.emptied},
	} {
		cad = append(cad, []string{r.name, fmt.Sprint(r.k.deviceAllocs), fmt.Sprint(r.k.deviceFrees), demo.DriverTimeText(r.k.driver), r.k.elapsed.Round(time.Millisecond).String()})
	}
	fmt.Fprintf(out, "  EmptyCache before the generator step, %d steps of each kind from an empty cache:\n", c.steps)
	demo.Table(out, "  ", []string{"EmptyCache", "device allocations", "device frees", "driver time", "wall time"}, cad)
}

func reportSwap(out io.Writer, w session, rows []row) {
	fmt.Fprintf(out, "  %s:\n", sessionNames[w])
	var cells [][]string
	for _, r := range rows {
		status := "ok"
		if r.err != nil {
			status = "out of memory"
		}
		cells = append(cells, []string{r.step, status, units.Bytes(r.allocated), units.Bytes(r.reserved), units.Bytes(r.free), fmt.Sprint(r.retries)})
	}
	demo.Table(out, "    ", []string{"after", "", "allocated", "reserved", "device free", "num_alloc_retries"}, cells)
}
