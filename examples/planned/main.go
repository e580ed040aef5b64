// Command planned trains an MLP and a small transformer-like model (embedding,
// self-attention, feed-forward, layer norms) with Adam, under each allocation policy:
// PyTorch's (policy:pytorch, the default) and the planned one (policy:planned), on a new
// device each time, and prints what each did: the step from which every step was served
// without a driver call and reserved memory stayed flat, the memory reserved, the
// device's allocations, the share of allocations the plans served, the time per step,
// and whether the trained parameters are bit for bit those of PyTorch's policy.
//
//	go run ./examples/planned                      # cpu, 1000 steps of each model
//	go run ./examples/planned -device sim-backed   # the simulated H200, with data
//	go run ./examples/planned -device sim -scale 32   # memory only, larger: nothing is computed
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/examples/internal/demo"
)

func main() { os.Exit(demo.Status("planned", run(os.Args[1:], os.Stdout), os.Stderr)) }

func run(args []string, out io.Writer) error {
	var dev string
	var steps, scale int
	fs := demo.Flags("planned", out)
	fs.StringVar(&dev, "device", "cpu", "cpu, sim (memory only) or sim-backed")
	fs.IntVar(&steps, "steps", 1000, "training steps of each model under each policy")
	fs.IntVar(&scale, "scale", 1, "multiplies the models' widths, batch and sequence length (MLP 32-64-64-8, batch 32; transformer width 32, vocabulary 64, 16 tokens)")
	if err := demo.Parse(fs, args); err != nil {
		return err
	}
	if steps < 2 || scale < 1 {
		return fmt.Errorf("-steps %d -scale %d: need at least 2 steps and a scale of 1 or more", steps, scale)
	}
	fmt.Fprintf(out, "%d steps of each model at scale %d on %s, under each allocation policy\n\n", steps, scale, dev)
	header := []string{"model", "policy", "flat from step", "reserved (KiB)", "peak reserved / peak allocated", "device allocations", "served by plans", "µs/step", "parameters"}
	var rows [][]string
	for _, name := range models {
		var base result
		for _, p := range []alloc.Policy{alloc.PolicyPyTorch, alloc.PolicyPlanned} {
			r, err := train(dev, name, scale, p, steps)
			if err != nil {
				return fmt.Errorf("%s under policy %s: %w", name, p, err)
			}
			if r.leftover != 0 {
				return fmt.Errorf("%s under policy %s: %d bytes left allocated after release", name, p, r.leftover)
			}
			if p == alloc.PolicyPyTorch {
				base = r
			}
			rows = append(rows, r.row(base))
		}
	}
	demo.Table(out, "", header, rows)
	return nil
}

// row is r's line of the table; base is PyTorch's policy's run of the same model.
func (r result) row(base result) []string {
	flat := "never"
	if r.flatFrom >= 0 {
		flat = fmt.Sprint(r.flatFrom)
	}
	params := "(no data on sim)"
	switch {
	case !r.hasData:
	case r.policy == alloc.PolicyPyTorch:
		params = fmt.Sprintf("%016x", r.params)
	case r.params == base.params:
		params = "bit-identical"
	default:
		params = fmt.Sprintf("%016x: DIFFERENT", r.params)
	}
	return []string{r.model, r.policy.String(), flat, fmt.Sprint(r.reserved >> 10),
		fmt.Sprintf("%.3f", float64(r.peakReserved)/float64(r.peakAllocated)), fmt.Sprint(r.deviceAllocs),
		fmt.Sprintf("%.1f%%", 100*float64(r.served)/float64(r.allocs)), fmt.Sprint(r.perStep.Microseconds()), params}
}
