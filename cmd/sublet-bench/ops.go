package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
)

// opCase is one single op of the ops experiment, through the public API: run computes
// it once (its result in the scope it gets, closed after each run), and its figure is
// work divided by the median time of a run, in unit. scripts/bench/torch_ops.py runs
// the same cases, with the same names and units, in PyTorch.
type opCase struct {
	name string
	unit string // "GFLOP/s", "GB/s" (bytes read and written once) or "µs/op"
	work float64
	run  func(s *tensor.Scope)
	// note says what is timed where the name does not (a composed op, a backward).
	note string
}

// smallOps is how many small ops the add-1k case times per run, in one scope (the
// issue's "100 ops per scope").
const smallOps = 100

// opCases sets up the CPU ops experiment's inputs in data on dev: products of 1024×1024
// float32 matrices in three transpose combinations, reductions in the layouts the
// backward pass uses and elementwise ops over big float32 (64M: -opsize), and the host
// cost of a small op. The names say 64M whatever big is: the cases of torch_ops.py.
func opCases(data *tensor.Scope, dev device.Device, big int) []opCase {
	const n, width = 1024, 1024
	a, b := data.Randn(dev, dtype.F32, n, n), data.Randn(dev, dtype.F32, n, n)
	x, y := data.Randn(dev, dtype.F32, big), data.Randn(dev, dtype.F32, big)
	m := x.Reshape(big/width, width) // [65536, 1024]: a batch of rows
	flops := 2.0 * n * n * n / 1e9
	gb := func(bytesPer float64) float64 { return bytesPer * float64(big) / 1e9 }
	return []opCase{
		{name: "matmul-nn-1024", unit: "GFLOP/s", work: flops, run: func(s *tensor.Scope) { s.Bind(a).MatMul(b) }},
		{name: "matmul-nt-1024", unit: "GFLOP/s", work: flops, run: func(s *tensor.Scope) { s.Bind(a).MatMul(b.T()) }},
		{name: "matmul-tn-1024", unit: "GFLOP/s", work: flops, run: func(s *tensor.Scope) { s.Bind(a).T().MatMul(b) }},
		{name: "sum-64M", unit: "GB/s", work: gb(4), run: func(s *tensor.Scope) { s.Bind(x).Sum() }},
		{name: "sum-rows-64M", unit: "GB/s", work: gb(4), run: func(s *tensor.Scope) { s.Bind(m).Sum(1) }},
		{name: "sum-cols-64M", unit: "GB/s", work: gb(4), run: func(s *tensor.Scope) { s.Bind(m).Sum(0) }},
		{name: "mean-64M", unit: "GB/s", work: gb(4), run: func(s *tensor.Scope) { s.Bind(x).Mean() }},
		{name: "max-rows-64M", unit: "GB/s", work: gb(4), run: func(s *tensor.Scope) { s.Bind(m).Max(1) }},
		{name: "norm-64M", unit: "GB/s", work: gb(4), run: func(s *tensor.Scope) { s.Bind(x).Norm() }},
		{name: "add-64M", unit: "GB/s", work: gb(12), run: func(s *tensor.Scope) { s.Bind(x).Add(y) }},
		{name: "cast-f16-64M", unit: "GB/s", work: gb(6), run: func(s *tensor.Scope) { s.Bind(x).Cast(dtype.F16) }},
		{name: "relu-64M", unit: "GB/s", work: gb(8), run: func(s *tensor.Scope) { s.Bind(x).Relu() }},
		smallAdd(data, dev),
	}
}

// smallAdd is the add-1k case: the host cost of Add of two 1k float32 tensors, smallOps
// of them per scope.
func smallAdd(data *tensor.Scope, dev device.Device) opCase {
	small := data.Randn(dev, dtype.F32, 1024)
	return opCase{name: "add-1k", unit: "µs/op", work: smallOps, run: func(s *tensor.Scope) {
		x := s.Bind(small)
		for range smallOps {
			x.Add(x)
		}
	}}
}

// runOps times the ops experiment's cases on dev: on a device whose memory the host
// addresses, the CPU kernels' cases (opCases); elsewhere, a GPU or a device without
// data, the kernel families of gpuOpCases. It ends by checking that the allocator holds
// nothing.
func runOps(b *bench, dev device.Device) error {
	a, err := alloc.For(dev)
	if err != nil {
		return err
	}
	cases := opCases
	if dev.Residency() != device.Host {
		cases = gpuOpCases
	}
	return errors.Join(timeOps(b, dev, cases), drain(a)) // every scope is closed, also after a failed case
}

// pickOps returns the cases that names names, in that order (all of them for no names),
// or an error naming the first that is not among them, as -cases does.
func pickOps(cases []opCase, names []string) ([]opCase, error) {
	if len(names) == 0 {
		return cases, nil
	}
	picked := make([]opCase, 0, len(names))
	for _, n := range names {
		i := slices.IndexFunc(cases, func(c opCase) bool { return c.name == n })
		if i < 0 {
			all := make([]string, len(cases))
			for j, c := range cases {
				all[j] = c.name
			}
			return nil, fmt.Errorf("-ops: no case %s on this device (cases: %s)", n, strings.Join(all, ", "))
		}
		picked = append(picked, cases[i])
	}
	return picked, nil
}

// minDeviceRun is how long a timed run of an op lasts at least on a device that
// computes asynchronously: its repetitions then hide the host's launches and the
// synchronisation that ends the run.
const minDeviceRun = time.Millisecond

// timeOps sets up the cases that build makes and times each for b.per (at least 3
// runs, after one to warm up), reporting its figure at the median run: on host memory
// a run is one op (timeHost), elsewhere many then a synchronisation (timeDevice). A
// case that fails is left out of the results and its error returned with the others'.
func timeOps(b *bench, dev device.Device, build func(*tensor.Scope, device.Device, int) []opCase) error {
	data := tensor.NewScope(tensor.NoGrad(), tensor.WithGenerator(tensor.NewGenerator(1)))
	defer data.Close()
	cases, err := tensor.TryValue(func() []opCase { return build(data, dev, b.opSize) })
	if err != nil {
		return fmt.Errorf("setting up the ops: %w", err)
	}
	if cases, err = pickOps(cases, b.ops); err != nil {
		return err
	}
	host := dev.Residency() == device.Host
	var errs []error
	for _, c := range cases {
		var times []time.Duration
		reps := 1
		if host {
			err = tensor.Try(func() { times = timeHost(b.per, data, c) })
		} else {
			times, reps, err = timeDevice(b.per, data, dev, c)
		}
		if err != nil { // the other cases still run: one op a device lacks leaves the table whole
			errs = append(errs, fmt.Errorf("%s: %w", c.name, err))
			continue
		}
		slices.Sort(times)
		med := times[len(times)/2].Seconds() / float64(reps)
		v := c.work / med
		if c.unit == "µs/op" {
			v = med * 1e6 / c.work
		}
		note := fmt.Sprintf("median of %d runs %.4g ms", len(times), med*1e3)
		if !host {
			note = fmt.Sprintf("median of %d runs of %d repetitions and a synchronisation: %.4g ms a repetition", len(times), reps, med*1e3)
		}
		if dev.Residency() == device.Meta {
			note += "; no data, no kernels: the host's cost"
		}
		if c.note != "" {
			note += "; " + c.note
		}
		if g, ok := hostGemm(dev); ok {
			note += "; gemm " + g
		}
		b.report(Result{Experiment: "ops", Device: dev.Name(), Case: c.name, Value: v, Unit: c.unit, N: int64(len(times)), Note: note})
	}
	return errors.Join(errs...)
}

// timeHost times runs of c, one op each (the CPU kernels are synchronous), for per and
// at least 3 after one that warms up.
func timeHost(per time.Duration, data *tensor.Scope, c opCase) []time.Duration {
	var times []time.Duration
	start := time.Now()
	for i := 0; i < 4 || time.Since(start) < per; i++ {
		s := data.Child()
		t := time.Now()
		func() {
			defer s.Close() // also when the op fails, so that the next case's scope is data's only child
			c.run(s)
		}()
		if i > 0 { // the first warms up
			times = append(times, time.Since(t))
		}
	}
	return times
}

// timeDevice times runs of c on dev, whose kernels run asynchronously: a run is reps
// ops, each in its own scope closed at once (the allocator's live bytes stay those of
// one op: the caching allocator hands the next op the blocks just freed), then a
// synchronisation of dev. After a run that warms up, reps doubles from 1 until a run
// lasts minDeviceRun; then runs are timed for per, at least 3.
func timeDevice(per time.Duration, data *tensor.Scope, dev device.Device, c opCase) (times []time.Duration, reps int, err error) {
	reps = 1
	run := func() (time.Duration, error) {
		t := time.Now()
		err := tensor.Try(func() {
			for range reps {
				func() {
					s := data.Child()
					defer s.Close()
					c.run(s)
				}()
			}
		})
		if err == nil {
			err = tensor.Synchronize(dev)
		}
		return time.Since(t), err
	}
	if _, err := run(); err != nil {
		return nil, 0, err
	}
	for {
		el, err := run()
		if err != nil {
			return nil, 0, err
		}
		if el >= minDeviceRun || reps >= 1<<20 {
			break
		}
		reps *= 2
	}
	start := time.Now()
	for len(times) < 3 || time.Since(start) < per {
		el, err := run()
		if err != nil {
			return nil, 0, err
		}
		times = append(times, el)
	}
	return times, reps, nil
}

// hostGemm names the GEMM that float32 products on dev run through where the CPU
// computes them: the built-in one, or the system BLAS that SUBLET_BLAS names.
func hostGemm(dev device.Device) (string, bool) {
	if dev.Residency() != device.Host {
		return "", false
	}
	g, err := tensor.HostGemm()
	return g, err == nil
}
