package main

import (
	"fmt"
	"slices"
	"time"

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
}

// smallOps is how many small ops the add-1k case times per run, in one scope (the
// issue's "100 ops per scope").
const smallOps = 100

// opCases sets up the ops experiment's inputs in data on dev: products of 1024×1024
// float32 matrices in three transpose combinations, reductions in the layouts the
// backward pass uses and elementwise ops over big float32 (64M: -opsize), and the host
// cost of a small op. The names say 64M whatever big is: the cases of torch_ops.py.
func opCases(data *tensor.Scope, dev device.Device, big int) []opCase {
	const n, width = 1024, 1024
	a, b := data.Randn(dev, dtype.F32, n, n), data.Randn(dev, dtype.F32, n, n)
	x, y := data.Randn(dev, dtype.F32, big), data.Randn(dev, dtype.F32, big)
	m := x.Reshape(big/width, width) // [65536, 1024]: a batch of rows
	small := data.Randn(dev, dtype.F32, 1024)
	flops := 2.0 * n * n * n / 1e9
	gb := func(bytesPer float64) float64 { return bytesPer * float64(big) / 1e9 }
	return []opCase{
		{"matmul-nn-1024", "GFLOP/s", flops, func(s *tensor.Scope) { s.Bind(a).MatMul(b) }},
		{"matmul-nt-1024", "GFLOP/s", flops, func(s *tensor.Scope) { s.Bind(a).MatMul(b.T()) }},
		{"matmul-tn-1024", "GFLOP/s", flops, func(s *tensor.Scope) { s.Bind(a).T().MatMul(b) }},
		{"sum-64M", "GB/s", gb(4), func(s *tensor.Scope) { s.Bind(x).Sum() }},
		{"sum-rows-64M", "GB/s", gb(4), func(s *tensor.Scope) { s.Bind(m).Sum(1) }},
		{"sum-cols-64M", "GB/s", gb(4), func(s *tensor.Scope) { s.Bind(m).Sum(0) }},
		{"mean-64M", "GB/s", gb(4), func(s *tensor.Scope) { s.Bind(x).Mean() }},
		{"max-rows-64M", "GB/s", gb(4), func(s *tensor.Scope) { s.Bind(m).Max(1) }},
		{"norm-64M", "GB/s", gb(4), func(s *tensor.Scope) { x := s.Bind(x); x.Mul(x).Sum().Sqrt() }},
		{"add-64M", "GB/s", gb(12), func(s *tensor.Scope) { s.Bind(x).Add(y) }},
		{"cast-f16-64M", "GB/s", gb(6), func(s *tensor.Scope) { s.Bind(x).Cast(dtype.F16) }},
		{"relu-64M", "GB/s", gb(8), func(s *tensor.Scope) { s.Bind(x).Relu() }},
		{"add-1k", "µs/op", smallOps, func(s *tensor.Scope) {
			x := s.Bind(small)
			for range smallOps {
				x.Add(x)
			}
		}},
	}
}

// runOps times each op case for b.per (at least 3 runs, after one to warm up) and
// reports its figure at the median run. The CPU kernels' figures: it runs on devices
// whose memory the host addresses.
func runOps(b *bench, dev device.Device) error {
	if dev.Residency() != device.Host {
		return fmt.Errorf("ops times the CPU kernels: run it on cpu, not %s", dev.Name())
	}
	data := tensor.NewScope(tensor.NoGrad(), tensor.WithGenerator(tensor.NewGenerator(1)))
	defer data.Close()
	var err error
	cases := opCases(data, dev, b.opSize)
	for _, c := range cases {
		var times []time.Duration
		err = tensor.Try(func() {
			start := time.Now()
			for i := 0; i < 4 || time.Since(start) < b.per; i++ {
				s := data.Child()
				t := time.Now()
				c.run(s)
				s.Close()
				if i > 0 { // the first warms up
					times = append(times, time.Since(t))
				}
			}
		})
		if err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
		slices.Sort(times)
		med := times[len(times)/2].Seconds()
		v := c.work / med
		if c.unit == "µs/op" {
			v = med * 1e6 / c.work
		}
		note := fmt.Sprintf("median of %d runs %.4g ms", len(times), med*1e3)
		if g, ok := hostGemm(dev); ok {
			note += "; gemm " + g
		}
		b.report(Result{Experiment: "ops", Device: dev.Name(), Case: c.name, Value: v, Unit: c.unit, N: int64(len(times)), Note: note})
	}
	return nil
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
