// Command memsnapshot trains a small MLP on a simulated GPU with the allocator's memory
// history on, and writes what a user looks at to find out where memory went:
//
//	snapshot.pickle  PyTorch's snapshot format: python -m torch.cuda._memory_viz trace_plot snapshot.pickle
//	snapshot.html    sublet's viewer (also: sublet viz snapshot.pickle > page.html)
//	memory.pb.gz     pprof by Go stack: go tool pprof -top memory.pb.gz
//	trace.json       the per-op profiler's Chrome trace (one "op" per training step)
//
// and prints the largest allocation sites, the profiler's table and the memory left
// once training is over (exactly the parameters and the optimizer's state).
//
//	go run ./examples/memsnapshot -out /tmp/snap
package main

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/alloc/memprof"
	"github.com/subletml/sublet/alloc/memsnap"
	"github.com/subletml/sublet/alloc/memviz"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/sim"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/examples/internal/demo"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/optim"
	"github.com/subletml/sublet/profiler"
	"github.com/subletml/sublet/tensor"
)

func main() { os.Exit(demo.Status("memsnapshot", run(os.Args[1:], os.Stdout), os.Stderr)) }

func run(args []string, out io.Writer) error {
	fs := demo.Flags("memsnapshot", out)
	dir := fs.String("out", ".", "folder to write snapshot.pickle, snapshot.html, memory.pb.gz and trace.json into")
	steps := fs.Int("steps", 3, "training steps")
	batch := fs.Int("batch", 256, "batch size")
	if err := demo.Parse(fs, args); err != nil {
		return err
	}
	if *steps < 1 || *batch < 1 {
		return fmt.Errorf("need -steps and -batch ≥ 1")
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return err
	}
	dev, err := sim.New(sim.Options{}) // a simulated H200 without data: memory only
	if err != nil {
		return err
	}
	a, err := alloc.For(dev)
	if err != nil {
		return err
	}
	if err := a.RecordHistory(alloc.HistoryOptions{Trace: true, MaxEntries: 10_000}); err != nil {
		return err
	}
	if err := demo.Try(dev, func() error { return train(dev, a, *steps, *batch, *dir, out) }); err != nil {
		return err
	}
	return demo.Drain(a)
}

func train(dev device.Device, a *alloc.Allocator, steps, batch int, dir string, out io.Writer) error {
	gen := tensor.NewGenerator(1)
	model := nn.NewMLP(nn.Init{Device: dev, Gen: gen}, nn.MLPConfig{Sizes: []int{512, 1024, 1024, 10}})
	defer model.Release()
	opt, err := optim.NewAdam(nn.Parameters(model), optim.DefaultAdam())
	if err != nil {
		return err
	}
	defer opt.Release()
	prof, err := profiler.Start(profiler.Options{}, a)
	if err != nil {
		return err
	}
	x := make([]float32, batch*512)
	labels := make([]int64, batch)
	for range steps {
		tok := prof.OpBegin("train_step", dev)
		s := tensor.NewScope(tensor.WithGenerator(gen), tensor.WithOpHook(prof))
		loss := nn.CrossEntropyLoss{}.Loss(model.Forward(tensor.FromSlice(s, dev, dtype.F32, x, batch, 512)), tensor.FromSlice(s, dev, dtype.I64, labels))
		loss.Backward()
		s.Close()
		opt.Step()
		opt.ZeroGrad(true)
		prof.OpEnd(tok)
	}
	prof.Stop()
	// The profiler's Stop took its sink away; the program's history (with its ring) is
	// still on.
	snap := a.MemorySnapshot()
	fmt.Fprintf(out, "%d training steps of an MLP 512-1024-1024-10 (batch %d) on %s with memory history on\n", steps, batch, dev.Name())
	fmt.Fprintf(out, "history: %d events kept, %d dropped by the ring\n", len(snap.Trace), snap.Dropped)

	sites := a.HistorySites()
	slices.SortStableFunc(sites, func(x, y alloc.SiteStats) int { return cmp.Compare(y.AllocBytes, x.AllocBytes) })
	fmt.Fprintln(out, "\nlargest allocation sites (bytes allocated in all, live now):")
	for _, st := range sites[:min(4, len(sites))] {
		fmt.Fprintf(out, "  %10s %10s  %s\n", memviz.FormatBytes(st.AllocBytes), memviz.FormatBytes(st.LiveBytes), memsnap.SiteLabel(st.Frames, st.Tag.Op))
	}
	fmt.Fprintln(out)
	if err := prof.Table(out, profiler.SortTotalTime, 0, false); err != nil {
		return err
	}

	s := memsnap.From(snap)
	paths := map[string]func(f *os.File) error{
		"snapshot.pickle": func(f *os.File) error { return memsnap.WritePickle(f, s) },
		"snapshot.html":   func(f *os.File) error { return memviz.WriteHTML(f, s, memviz.Options{Title: "examples/memsnapshot"}) },
		"memory.pb.gz":    func(f *os.File) error { return memprof.Write(f, a) },
		"trace.json":      func(f *os.File) error { return prof.WriteChromeTrace(f) },
	}
	for _, name := range slices.Sorted(maps.Keys(paths)) {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		if err := paths[name](f); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		fmt.Fprintf(out, "wrote %s\n", filepath.Join(dir, name))
	}
	params, state := nn.ParameterBytes(model), opt.StateBytes()
	m := demo.Read(a)
	requested := m.Tensors()
	fmt.Fprint(out, m.BackendLine())
	fmt.Fprintf(out, "after training: %d bytes requested = parameters %d + Adam state %d\n", requested, params, state)
	if requested != params+state {
		return fmt.Errorf("the allocator holds %d bytes, not parameters + optimizer state = %d: something leaked", requested, params+state)
	}
	return nil
}
