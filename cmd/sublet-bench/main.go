// Command sublet-bench measures the caching allocator on real devices, for the figures
// of docs/benchmarks.md. Go's benchmarks (go test -bench) time the allocator on the
// simulated device; this program runs the same loops on any device, a GPU included, and
// the experiments that need one:
//
//	pair        Alloc+Free of one size, the cached fast path (torch_alloc_cpp.py's pair)
//	churn       64 slots freed and refilled by an LCG, 512 B to 4 MiB (its churn)
//	raw         the device's own Malloc+Free against the cached path, same sizes
//	emptycache  an MLP training step's allocations with EmptyCache never, every epoch,
//	            every 100 steps and every step (the seed tutorial's experiment); a
//	            step's time is the host's, the simulated driver's on sim, and -compute
//	            (no kernels run: the compute a real step would do, added serially)
//	concurrent  goroutines churning on one allocator at once, with and without a
//	            device call per allocation; ops/s and errors
//	train       training steps of MLPs through tensor, nn and optim (-cases: the cpu
//	            set of issue 10, the gpu set of issue 9, or case names); steps/s, the
//	            peaks, the CPU time per step and, on host memory, the GEMM in use (the
//	            built-in one or the system BLAS that SUBLET_BLAS names);
//	            -upload each-step copies the batch every step (from pinned memory on a
//	            GPU), -graph times replays of a step captured as a CUDA graph, -profile
//	            writes each case's per-op table and trace;
//	            scripts/bench/torch_train.py runs the same cases in PyTorch
//	ops         single ops through tensor. On cpu: products of 1024² float32 in three
//	            transpose combinations (GFLOP/s), reductions in the backward pass's
//	            layouts and elementwise ops over 64M float32 (GB/s, the bytes read and
//	            written once), and the host cost of Add of 1k float32, 100 ops per scope
//	            (µs/op). On a GPU (cuda:0; sim runs the same, computing nothing): issue
//	            18's kernel families in F32, F16 and BF16 over 64M elements (copy, add,
//	            bias add, mul, relu and its backward, gelu, the sums, max, softmax,
//	            log-softmax, cross entropy, layer norm, transpose), four casts,
//	            products of 4096², each run R repetitions then a synchronisation;
//	            -ops times only the cases named; scripts/bench/torch_ops.py
//	            [--device cuda] [--cases ...] runs the same ops in PyTorch
//
//	sublet-bench [-device sim,cuda:0] [-run pair,churn,...] [-time 1s] [-compute 2.26ms] [-cases cpu] [-steps N]
//	             [-upload resident|each-step] [-graph] [-profile DIR] [-json FILE] [-jsonl FILE] [-opsize N]
//	             [-ops LIST] [-cpuprofile FILE] [-memprofile FILE] [-trace FILE]
//
// Each experiment ends by freeing everything and checking that the allocator holds
// nothing after EmptyCache; a leak or any error makes the exit status 1. Results go to
// stdout as a table (and to -json as records).
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strings"
	"time"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/named"
	"github.com/subletml/sublet/tensor"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// Result is one measured figure.
type Result struct {
	Experiment string  `json:"experiment"`
	Device     string  `json:"device"`
	Case       string  `json:"case"`
	Value      float64 `json:"value"`
	Unit       string  `json:"unit"`
	// N is the number of operations (pairs, steps, iterations) timed.
	N int64 `json:"n"`
	// Note carries what else the figure needs to be read (a ratio, a count).
	Note string `json:"note,omitempty"`
}

// experiment is one measurement over one device.
type experiment struct {
	name string
	run  func(b *bench, dev device.Device) error
}

func experiments() []experiment {
	return []experiment{
		{"pair", runPair},
		{"churn", runChurn},
		{"raw", runRaw},
		{"emptycache", runEmptyCache},
		{"concurrent", runConcurrent},
		{"train", runTrain},
		{"ops", runOps},
	}
}

// bench is one run of the program: its settings and the results so far.
type bench struct {
	// per is the time each figure is measured over.
	per time.Duration
	// compute is the simulated compute time of one emptycache training step.
	compute time.Duration
	// train are the cases of the train experiment.
	train []trainCase
	// steps, when above 0, is how many steps each train case times instead of per
	// (for profiles and instruction counts that compare runs step for step).
	steps int64
	// upload is where a train step's batch comes from: "resident" (on the device
	// before the timing, as PyTorch's script keeps it) or "each-step" (copied from
	// host memory every step, as a data loader's batches are).
	upload string
	// graph captures one train step as a CUDA graph after the warm-up and times its
	// replays instead of eager steps.
	graph bool
	// profile, when set, is a folder where each train case writes the profile of a
	// few steps after its timing: a table per op and a Perfetto trace.
	profile string
	// opSize is how many elements the ops experiment's large ops take.
	opSize int
	// ops are the names of the ops experiment's cases to time, in this order; nil for
	// every case of the device.
	ops     []string
	out     io.Writer
	results []Result
}

func (b *bench) report(r Result) {
	b.results = append(b.results, r)
	fmt.Fprintf(b.out, "%-10s %-7s %-30s %12.6g %-8s n=%-9d %s\n", r.Experiment, r.Device, r.Case, r.Value, r.Unit, r.N, r.Note)
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sublet-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	devices := fs.String("device", "sim", "comma-separated devices: "+named.Usage)
	which := fs.String("run", "pair,churn,raw,emptycache,concurrent", "comma-separated experiments")
	per := fs.Duration("time", time.Second, "time to measure each figure over")
	compute := fs.Duration("compute", defaultCompute(), "emptycache: simulated compute time per training step (the default is the step's flops at the H200's measured 51.3 TFLOP/s FP32)")
	cases := fs.String("cases", "cpu", "train: comma-separated cases or sets (cpu, gpu; "+caseNames()+")")
	steps := fs.Int64("steps", 0, "train: time exactly this many steps of each case instead of -time (0: -time)")
	upload := fs.String("upload", "resident", "train: the batch on the device before the timing (resident), or copied from host memory every step (each-step)")
	graph := fs.Bool("graph", false, "train: capture one step as a CUDA graph after the warm-up and time its replays (a GPU; the cases without autocast: a GradScaler's step reads its inf check on the host; Adam is made Capturable, as PyTorch's capturable=True); the case's name gets -graph")
	profile := fs.String("profile", "", "train: a folder (made if missing) for each case's profile of 3 steps after its timing (CASE.txt, the per-op table with device times on a GPU; CASE.json, a Perfetto trace)")
	jsonPath := fs.String("json", "", "also write the results as a JSON array to this file")
	jsonlPath := fs.String("jsonl", "", "also write the results as JSON lines, one per figure, to this file")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file (go tool pprof reads it)")
	memProfile := fs.String("memprofile", "", "write a profile of the whole run's heap allocations to this file, every allocation sampled "+
		"(go tool pprof -sample_index=alloc_objects reads it; the sampling slows the run: time nothing with it)")
	opSize := fs.Int("opsize", 1<<26, "ops: elements of the ops over a large tensor (all but the products and add-1k; on a GPU the products take a quarter of it, 4096² at most), a multiple of 65536")
	ops := fs.String("ops", "", "ops: comma-separated cases to time, in this order (default every case of the device; scripts/bench/torch_ops.py --list names them)")
	tracePath := fs.String("trace", "", "write an execution trace of the whole run to this file (go tool trace reads it: where goroutines waited, how busy each thread was)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: sublet-bench [-device LIST] [-run LIST] [-time D] [-compute D] [-cases LIST] [-steps N] [-upload resident|each-step] [-graph] [-profile DIR] [-json FILE] [-jsonl FILE] [-opsize N] [-ops LIST] [-cpuprofile FILE] [-memprofile FILE] [-trace FILE]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 || *per <= 0 || *compute < 0 || *steps < 0 || *opSize <= 0 || *opSize%(1<<16) != 0 {
		fs.Usage()
		return 2
	}
	var chosen []experiment
	for _, name := range strings.Split(*which, ",") {
		i := slices.IndexFunc(experiments(), func(e experiment) bool { return e.name == name })
		if i < 0 {
			fmt.Fprintf(stderr, "sublet-bench: unknown experiment %q\n", name)
			return 2
		}
		chosen = append(chosen, experiments()[i])
	}
	train, err := pickTrainCases(*cases)
	if err != nil {
		fmt.Fprintf(stderr, "sublet-bench: %v\n", err)
		return 2
	}
	if *upload != "resident" && *upload != "each-step" {
		fmt.Fprintf(stderr, "sublet-bench: -upload %q: want resident or each-step\n", *upload)
		return 2
	}
	for _, r := range []struct {
		flag, path string
		start      func(io.Writer) error
		stop       func()
	}{{"-cpuprofile", *cpuProfile, pprof.StartCPUProfile, pprof.StopCPUProfile}, {"-trace", *tracePath, trace.Start, trace.Stop}} {
		if r.path == "" {
			continue
		}
		f, err := os.Create(r.path)
		if err == nil {
			err = r.start(f)
		}
		if err != nil {
			fmt.Fprintf(stderr, "sublet-bench: %s: %v\n", r.flag, err)
			return 2
		}
		defer func() {
			r.stop()
			f.Close()
		}()
	}
	if *memProfile != "" {
		f, err := os.Create(*memProfile)
		if err != nil {
			fmt.Fprintf(stderr, "sublet-bench: -memprofile: %v\n", err)
			return 2
		}
		runtime.MemProfileRate = 1
		defer func() {
			runtime.GC() // the profile is as of the last collection: this one has it all
			if err := errors.Join(pprof.Lookup("allocs").WriteTo(f, 0), f.Close()); err != nil {
				fmt.Fprintf(stderr, "sublet-bench: -memprofile: %v\n", err)
			}
		}()
	}
	b := &bench{per: *per, compute: *compute, train: train, steps: *steps, upload: *upload, graph: *graph, profile: *profile, opSize: *opSize, out: stdout}
	if *ops != "" {
		b.ops = strings.Split(*ops, ",")
	}
	fmt.Fprintf(stdout, "# sublet-bench %s GOMAXPROCS=%d %s/%s %s, %s per figure, emptycache compute %s per step\n",
		time.Now().UTC().Format(time.RFC3339), runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH, runtime.Version(), *per, *compute)
	failed := false
	for _, name := range strings.Split(*devices, ",") {
		dev, err := named.Open(name)
		if err != nil {
			fmt.Fprintf(stderr, "sublet-bench: %v\n", err)
			failed = true
			continue
		}
		for _, e := range chosen {
			if err := e.run(b, dev); err != nil {
				fmt.Fprintf(stderr, "sublet-bench: %s on %s: %v\n", e.name, name, err)
				failed = true
			}
		}
	}
	if *jsonPath != "" {
		if err := writeResults(*jsonPath, b.results); err != nil {
			fmt.Fprintf(stderr, "sublet-bench: %v\n", err)
			failed = true
		}
	}
	if *jsonlPath != "" {
		if err := writeResultLines(*jsonlPath, b.results); err != nil {
			fmt.Fprintf(stderr, "sublet-bench: %v\n", err)
			failed = true
		}
	}
	if failed {
		return 1
	}
	return 0
}

func writeResults(path string, results []Result) error {
	data, err := json.MarshalIndent(results, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

func writeResultLines(path string, results []Result) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, r := range results {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// newAllocator returns a fresh allocator over dev with the default configuration (not
// the device's shared one, so each experiment starts from an empty cache).
func newAllocator(dev device.Device) (*alloc.Allocator, error) {
	return alloc.New(dev, alloc.Config{})
}

// finish ends an experiment on a, whose error so far is err: after a success it
// drains a; after a failure it gives the device back.
func finish(a *alloc.Allocator, err error) error {
	if err != nil {
		return errors.Join(err, giveBack(a))
	}
	return drain(a)
}

// giveBack frees every block a still has allocated and releases its cache: a failed
// experiment may have lost track of its blocks, and the next one must find the device
// as it was.
func giveBack(a *alloc.Allocator) error {
	var errs []error
	for _, seg := range a.Snapshot() {
		for _, b := range seg.Blocks {
			if b.State == alloc.ActiveAllocated {
				errs = append(errs, a.Free(b.Address))
			}
		}
	}
	return errors.Join(append(errs, a.EmptyCache())...)
}

// drain gives back what the device's kernels keep (the cuBLAS workspace on a GPU) and
// the allocator's cache, and checks that it held nothing else.
func drain(a *alloc.Allocator) error {
	if err := tensor.ReleaseBackend(a.Device()); err != nil {
		return err
	}
	if err := a.EmptyCache(); err != nil {
		return err
	}
	st := a.Stats()
	if n := st.AllocatedBytes[alloc.StatAll].Current; n != 0 {
		return fmt.Errorf("%d bytes still allocated at the end", n)
	}
	if n := st.ReservedBytes[alloc.StatAll].Current; n != 0 {
		return fmt.Errorf("%d bytes still reserved after EmptyCache", n)
	}
	return nil
}

// measure calls step in batches until per has passed and returns the time per call and
// the number of calls timed. Batches grow so that reading the clock costs nothing.
func measure(per time.Duration, step func() error) (time.Duration, int64, error) {
	var n int64
	batch := int64(1)
	start := time.Now()
	for {
		for range batch {
			if err := step(); err != nil {
				return 0, n, err
			}
		}
		n += batch
		elapsed := time.Since(start)
		if elapsed >= per {
			return elapsed / time.Duration(n), n, nil
		}
		batch = min(batch*2, 1<<16)
	}
}

func sizeName(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}
