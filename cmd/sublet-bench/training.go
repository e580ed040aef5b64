package main

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/amp"
	"github.com/subletml/sublet/checkpoint"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/optim"
	"github.com/subletml/sublet/profiler"
	"github.com/subletml/sublet/tensor"
)

// trainCase is one model trained by the train experiment: an MLP of widths (ReLU
// between the Linear layers, cross entropy over the last width), a batch of random
// inputs and labels, an optimizer, optionally checkpoint.Sequential over its layers and
// F16/BF16 autocast with a GradScaler. The same cases, with the same names, are in
// scripts/bench/torch_train.py.
type trainCase struct {
	name     string
	widths   []int
	batch    int
	opt      string      // "sgd" (momentum 0.9) or "adam"
	segments int         // checkpoint.Sequential segments; 0 for none
	autocast dtype.DType // dtype.Invalid for none
}

func repeat(w, n int, last ...int) []int {
	return append(slices.Repeat([]int{w}, n), last...)
}

// trainCases are the cases of issues 9 (GPU) and 10 (CPU). "cpu" and "gpu" name the
// sets measured on each.
var trainCases = []trainCase{
	{name: "tiny-sgd", widths: []int{784, 256, 256, 10}, batch: 64, opt: "sgd"},
	{name: "tiny-adam", widths: []int{784, 256, 256, 10}, batch: 64, opt: "adam"},
	{name: "wide-adam", widths: []int{1024, 4096, 4096, 4096, 1024}, batch: 512, opt: "adam"},
	{name: "deep-sgd", widths: repeat(1024, 17, 10), batch: 1024, opt: "sgd"},
	{name: "deep-sgd-ckpt4", widths: repeat(1024, 17, 10), batch: 1024, opt: "sgd", segments: 4},
	{name: "wide4096-adam", widths: repeat(4096, 5, 10), batch: 4096, opt: "adam"},
	{name: "wide4096-adam-f16", widths: repeat(4096, 5, 10), batch: 4096, opt: "adam", autocast: dtype.F16},
	{name: "wide4096-adam-bf16", widths: repeat(4096, 5, 10), batch: 4096, opt: "adam", autocast: dtype.BF16},
	{name: "deep4096-sgd", widths: repeat(4096, 17, 10), batch: 4096, opt: "sgd"},
	{name: "deep4096-sgd-ckpt4", widths: repeat(4096, 17, 10), batch: 4096, opt: "sgd", segments: 4},
}

var trainSets = map[string][]string{
	"cpu": {"tiny-sgd", "wide-adam", "deep-sgd", "deep-sgd-ckpt4"},
	"gpu": {"tiny-sgd", "tiny-adam", "wide4096-adam", "wide4096-adam-f16", "wide4096-adam-bf16", "deep4096-sgd", "deep4096-sgd-ckpt4"},
}

// pickTrainCases resolves a comma-separated list of case and set names.
func pickTrainCases(list string) ([]trainCase, error) {
	var out []trainCase
	for _, name := range strings.Split(list, ",") {
		names := trainSets[name]
		if names == nil {
			names = []string{name}
		}
		for _, n := range names {
			i := slices.IndexFunc(trainCases, func(c trainCase) bool { return c.name == n })
			if i < 0 {
				return nil, fmt.Errorf("-cases: unknown case %q (cases: %s; sets: cpu, gpu)", n, caseNames())
			}
			out = append(out, trainCases[i])
		}
	}
	return out, nil
}

func caseNames() string {
	names := make([]string, len(trainCases))
	for i, c := range trainCases {
		names[i] = c.name
	}
	return strings.Join(names, ", ")
}

// runTrain trains each chosen case for a few warm-up steps, then for b.per or at least
// 3 steps (exactly b.steps when that is set), and reports steps per second with the
// peak allocated and reserved memory of the timed steps and the process's CPU time per
// step (every thread's: on a shared machine, one thread's CPU time moves less than its
// wall-clock time). On a device without data the steps only allocate: the figure is
// the host's cost of running the graph, and the peaks are the model's real ones.
func runTrain(b *bench, dev device.Device) error {
	for _, c := range b.train {
		r, err := trainOne(b, dev, c)
		a, aerr := alloc.For(dev)
		if aerr == nil {
			aerr = drain(a) // the model, optimizer and every step released, also after a failed case
		}
		if err = errors.Join(err, aerr); err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
		b.report(r)
	}
	return nil
}

func trainOne(b *bench, dev device.Device, c trainCase) (r Result, err error) {
	a, err := alloc.For(dev)
	if err != nil {
		return r, err
	}
	gen := tensor.NewGenerator(1)
	model := nn.NewMLP(nn.Init{Device: dev, Gen: gen}, nn.MLPConfig{Sizes: c.widths})
	defer model.Release()
	params := nn.Parameters(model)
	var opt optim.Optimizer
	if c.opt == "adam" {
		// A captured step needs the counts on the device, as PyTorch's capturable=True.
		ac := optim.DefaultAdam()
		ac.Capturable = b.graph
		opt, err = optim.NewAdam(params, ac)
	} else {
		opt, err = optim.NewSGD(params, optim.SGDConfig{LR: 0.01, Momentum: 0.9})
	}
	if err != nil {
		return r, err
	}
	defer opt.Release()
	scaler, err := amp.NewGradScaler(amp.ScalerConfig{Disabled: c.autocast == dtype.Invalid})
	if err != nil {
		return r, err
	}
	rng := rand.New(rand.NewPCG(2, 3))
	x := make([]float32, c.batch*c.widths[0])
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	labels := make([]int64, c.batch)
	for i := range labels {
		labels[i] = rng.Int64N(int64(c.widths[len(c.widths)-1]))
	}
	layers := make([]checkpoint.Layer, len(model.Children))
	for i, m := range model.Children {
		layers[i] = m
	}
	hasData := dev.Residency() != device.Meta
	// The resident batch, for the whole case; its generator is every step's (a step
	// scope that sets no mode of its own shares its parent's, allocating none).
	data := tensor.NewScope(tensor.WithGenerator(gen))
	defer data.Close()
	var xr, lr *tensor.Tensor
	if b.upload == "resident" {
		if err := tensor.Try(func() {
			xr, lr = tensor.FromSlice(data, dev, dtype.F32, x, c.batch, c.widths[0]), tensor.FromSlice(data, dev, dtype.I64, labels)
		}); err != nil {
			return r, err
		}
	}
	// Each step's upload: from pinned memory where the device has it (as a data
	// loader's pinned batches, and PyTorch's script with non_blocking copies), else from
	// the Go slices.
	batch, err := newHostBatch(dev, x, labels)
	if err != nil {
		return r, err
	}
	defer func() { err = errors.Join(err, batch.close()) }()
	upload := func(s *tensor.Scope) (xt, lt *tensor.Tensor) {
		if batch.x == nil {
			return tensor.FromSlice(s, dev, dtype.F32, x, c.batch, c.widths[0]), tensor.FromSlice(s, dev, dtype.I64, labels)
		}
		return tensor.FromBytes(s, dev, dtype.F32, batch.x, c.batch, c.widths[0]), tensor.FromBytes(s, dev, dtype.I64, batch.labels, c.batch)
	}
	forward := func(x *tensor.Tensor) *tensor.Tensor {
		if c.segments > 0 {
			return checkpoint.Sequential(layers, c.segments, x)
		}
		return model.Forward(x)
	}
	// step runs one training step; hook, when not nil, profiles its ops and phases.
	step := func(hook *profiler.Profiler) error {
		var opts []tensor.Option
		if hook != nil {
			opts = append(opts, tensor.WithOpHook(hook))
		}
		s := data.Child(opts...)
		defer s.Close()
		region := func(name string) func() {
			if hook == nil {
				return func() {}
			}
			tok := hook.OpBegin(name, dev)
			return func() { hook.OpEnd(tok) }
		}
		var stepErr error
		err := tensor.Try(func() {
			xt, lt := xr, lr
			if xt == nil {
				xt, lt = upload(s)
			}
			fs := s
			if c.autocast != dtype.Invalid {
				if fs, stepErr = amp.Autocast(s, c.autocast); stepErr != nil {
					return
				}
				xt, lt = fs.Bind(xt), fs.Bind(lt)
			}
			end := region("forward")
			// The loss runs where the logits are (the step scope, or the region).
			loss := nn.CrossEntropyLoss{}.Loss(forward(xt), lt)
			if fs != s {
				loss = fs.Keep(loss)
				fs.Close()
			}
			end()
			end = region("backward")
			scaler.Scale(loss).Backward()
			end()
			if hasData {
				loss.Item() // waits for the device, as a training loop printing its loss does
			}
		})
		if err != nil {
			return err
		}
		if stepErr != nil {
			return stepErr
		}
		end := region("optimizer step")
		defer end()
		if _, err := scaler.Step(opt); err != nil {
			return err
		}
		if err := scaler.Update(); err != nil {
			return err
		}
		opt.ZeroGrad(true)
		return nil
	}
	for range 3 {
		if err := step(nil); err != nil {
			return r, err
		}
	}
	name := c.name
	if b.graph {
		g, replay, err := captureStep(dev, c, forward, opt, data, xr, lr, batch)
		if err != nil {
			return r, fmt.Errorf("-graph: %w", err)
		}
		defer func() { err = errors.Join(err, g.Release()) }()
		step, name = replay, c.name+"-graph"
	}
	a.ResetPeakStats()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	cpu0, cpuOK := processCPU()
	start := time.Now()
	n := int64(0)
	for b.steps > 0 && n < b.steps || b.steps == 0 && (n < 3 || time.Since(start) < b.per) {
		if err := step(nil); err != nil {
			return r, err
		}
		n++
	}
	el := time.Since(start)
	cpu1, _ := processCPU()
	runtime.ReadMemStats(&m1)
	st := a.Stats()
	note := fmt.Sprintf("peak allocated %d reserved %d; %d parameters", st.AllocatedBytes[alloc.StatAll].Peak,
		st.ReservedBytes[alloc.StatAll].Peak, nn.ParameterBytes(model)/4)
	if cpuOK {
		note += fmt.Sprintf("; cpu %.4g ms per step", float64(cpu1-cpu0)/float64(n)/1e6)
	}
	// The Go heap's share: what each step leaves for the garbage collector, and the
	// collections that cost (at GOMAXPROCS 16 a quarter of the Ps mark while one runs).
	note += fmt.Sprintf("; go heap %d allocations %d B per step, %d GC cycles",
		(m1.Mallocs-m0.Mallocs)/uint64(n), (m1.TotalAlloc-m0.TotalAlloc)/uint64(n), m1.NumGC-m0.NumGC)
	if g, ok := hostGemm(dev); ok {
		note += "; gemm " + g
	}
	note += "; batch " + b.upload
	if b.profile != "" && !b.graph {
		kernels, err := profileSteps(b.profile, c.name, a, dev, step)
		if err != nil {
			return r, err
		}
		note += fmt.Sprintf("; %d kernels per step", kernels)
	}
	return Result{Experiment: "train", Device: dev.Name(), Case: name, Value: float64(n) / el.Seconds(), Unit: "steps/s", N: n, Note: note}, nil
}

// profileSteps profiles profiledSteps steps (ops, the forward, backward and optimizer
// phases, their device time where the device times events) and writes, in dir (made
// if missing), name.txt, the per-op table by self device time (by self CPU time
// without one), and name.json, the Perfetto trace; it returns the kernels launched per
// step.
func profileSteps(dir, name string, a *alloc.Allocator, dev device.Device, step func(*profiler.Profiler) error) (int64, error) {
	p, err := profiler.Start(profiler.Options{DeviceTime: true}, a)
	if err != nil {
		return 0, err
	}
	for range profiledSteps {
		if err := step(p); err != nil {
			p.Stop()
			return 0, err
		}
	}
	p.Stop()
	if err := p.Err(); err != nil {
		return 0, err
	}
	var kernels int64
	var devTime time.Duration
	for _, o := range p.KeyAverages(false) {
		kernels += o.SelfKernels
		devTime += o.SelfDeviceTime
	}
	sortBy := profiler.SortSelfDeviceTime
	if devTime == 0 {
		sortBy = profiler.SortSelfTime
	}
	var table bytes.Buffer
	fmt.Fprintf(&table, "%s on %s: %d steps profiled; %d kernels per step\n", name, dev.Name(), profiledSteps, kernels/profiledSteps)
	if err := p.Table(&table, sortBy, 0, false); err != nil {
		return 0, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	if err := os.WriteFile(filepath.Join(dir, name+".txt"), table.Bytes(), 0o644); err != nil {
		return 0, err
	}
	f, err := os.Create(filepath.Join(dir, name+".json"))
	if err != nil {
		return 0, err
	}
	if err := errors.Join(p.WriteChromeTrace(f), f.Close()); err != nil {
		return 0, err
	}
	return kernels / profiledSteps, nil
}

// profiledSteps is how many steps -profile profiles.
const profiledSteps = 3
