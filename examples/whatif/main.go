// Command whatif answers "would expandable segments have avoided my OOM?" the way a user
// would: it runs a workload on a simulated GPU with the default allocator settings,
// records its allocations with package alloc/recorder, and when the workload runs out
// of memory it replays its own recording under other settings on a device of the same
// size, printing for each whether it would have run out of memory and what it would
// have reserved.
//
// The workload is an inference server's decoding loop: each request keeps a KV cache
// that grows by one block per step while activation buffers of varying size come and
// go, the pattern that leaves reserved but unusable holes between segments.
//
//	go run ./examples/whatif
//	go run ./examples/whatif -capacity 3221225472 -o run.jsonl.gz
//	sublet replay -trace run.jsonl.gz -capacity 3221225472 -conf expandable_segments:True
//
// A program stops at its OOM, so the recording ends there: the replays say whether the
// work up to and including the failed allocation would have fit.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/alloc/recorder"
	"github.com/subletml/sublet/alloc/replay"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/sim"
	"github.com/subletml/sublet/examples/internal/demo"
	"github.com/subletml/sublet/internal/units"
)

func main() { os.Exit(demo.Status("whatif", run(os.Args[1:], os.Stdout), os.Stderr)) }

// settings are the configurations the recording is replayed under.
var settings = []string{"", "expandable_segments:True", "max_split_size_mb:64", "roundup_power2_divisions:4"}

func run(args []string, out io.Writer) error {
	fs := demo.Flags("whatif", out)
	capacity := fs.Int64("capacity", 2<<30, "the simulated GPU's memory in bytes")
	requests := fs.Int("requests", 10, "requests decoded one after another")
	steps := fs.Int("steps", 48, "decoding steps per request")
	path := fs.String("o", "", "also write the recording to this trace file (.gz compresses)")
	if err := demo.Parse(fs, args); err != nil {
		return err
	}
	if *capacity < 1 || *requests < 1 || *steps < 1 {
		return fmt.Errorf("need -capacity, -requests and -steps ≥ 1")
	}
	d, err := sim.New(sim.Options{Capacity: *capacity})
	if err != nil {
		return err
	}
	a, err := alloc.New(d, alloc.Config{})
	if err != nil {
		return err
	}
	rec, err := recorder.Start(a)
	if err != nil {
		return err
	}
	w := &workload{a: a}
	werr := w.run(*requests, *steps)
	rec.Stop()
	m := demo.Read(a)
	fmt.Fprintf(out, "workload: %d requests of %d steps on a %s device with the default settings\n", *requests, *steps, units.Bytes(*capacity))
	var oom *alloc.OOMError
	switch {
	case errors.As(werr, &oom):
		fmt.Fprintf(out, "  out of memory in request %d step %d: %s wanted, %s reserved of which %s allocated\n",
			w.request, w.step, units.Bytes(oom.Requested), units.Bytes(oom.Reserved), units.Bytes(oom.Allocated))
	case werr != nil:
		return werr
	default:
		fmt.Fprintf(out, "  finished: peak reserved %s\n", units.Bytes(m.PeakReserved))
	}
	if err := w.release(); err != nil {
		return err
	}
	events := rec.Events()
	fmt.Fprintf(out, "recorded %d events\n", len(events))
	if *path != "" {
		if err := rec.WriteFile(*path); err != nil {
			return err
		}
		fmt.Fprintf(out, "wrote %s\n", *path)
	}
	fmt.Fprintf(out, "\nthe recording replayed on a fresh %s device:\n", units.Bytes(*capacity))
	var rows [][]string
	var avoided []string
	for _, conf := range settings {
		r, err := replay.OnSim(events, conf, 0, *capacity)
		if err != nil {
			return err
		}
		name := conf
		if name == "" {
			name = "default"
		}
		rows = append(rows, []string{name, fmt.Sprint(r["num_ooms"]), units.Bytes(r["reserved_bytes.all.peak"]), units.Bytes(r["allocated_bytes.all.peak"])})
		if oom != nil && conf != "" && r["num_ooms"] == 0 {
			avoided = append(avoided, conf)
		}
	}
	demo.Table(out, "  ", []string{"settings", "OOMs", "peak reserved", "peak allocated"}, rows)
	switch {
	case oom == nil:
		fmt.Fprintln(out, "\nno OOM to avoid: the table shows what each setting would reserve")
	case len(avoided) == 0:
		fmt.Fprintln(out, "\nno setting avoids the OOM: the live memory itself is too large; free tensors or use a smaller batch")
	default:
		for _, c := range avoided {
			fmt.Fprintf(out, "\n%s would have avoided the OOM (set it in %s)", c, alloc.ConfigEnv)
		}
		fmt.Fprintln(out)
	}
	return nil
}

// workload is the decoding loop; request and step say where it is.
type workload struct {
	a             *alloc.Allocator
	request, step int
	// kv are the KV cache blocks of the requests so far: a finished request's cache is
	// kept for reuse by a follow-up (prefix caching), so the caches pile up.
	kv []device.Ptr
}

func (w *workload) run(requests, steps int) error {
	const block = 6 << 20 // one step of KV cache
	for w.request = 0; w.request < requests; w.request++ {
		for w.step = 0; w.step < steps; w.step++ {
			// Activations for this step: large, of a size that changes with the
			// request's length, freed at the end of the step.
			act, err := w.a.Alloc(int64(24+w.step%7*5+w.request*3)<<20, 0)
			if err != nil {
				return err
			}
			kv, err := w.a.Alloc(block, 0)
			if err != nil {
				w.a.Free(act)
				return err
			}
			w.kv = append(w.kv, kv)
			if err := w.a.Free(act); err != nil {
				return err
			}
		}
		// The request is done: half of its cache is evicted, every other block.
		kept := w.kv[:len(w.kv)-steps]
		for i, p := range w.kv[len(w.kv)-steps:] {
			if i%2 == 0 {
				if err := w.a.Free(p); err != nil {
					return err
				}
			} else {
				kept = append(kept, p)
			}
		}
		w.kv = kept
	}
	return nil
}

// release frees what the workload holds, empties the cache and checks that nothing is
// left.
func (w *workload) release() error {
	for _, p := range w.kv {
		if err := w.a.Free(p); err != nil {
			return err
		}
	}
	w.kv = nil
	return demo.Drain(w.a)
}
