package tensor_test

import (
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
)

// BenchmarkOpOverhead is the fixed cost of one small op: checks, scope, allocation
// through the caching allocator, handle (with the op's call stack for the leak
// report), kernel, release. Run with -cpu 1 to count the garbage collector's share.
func BenchmarkOpOverhead(b *testing.B) {
	d := newCPU(b)
	s := tensor.NewScope(tensor.NoGrad())
	defer s.Close()
	x := s.Ones(d, dtype.F32, 4)
	b.ReportAllocs()
	for b.Loop() {
		x.Add(x).Release()
	}
}

// BenchmarkSmallOp is the host cost of one small op as a training loop pays it: Add of
// two 1024-element float32 tensors in a no-grad scope, the results left to the scope,
// which is closed and opened again every 100 ops (the "100 ops per scope").
// ns/op and allocs/op are per op, the scope's Close included. Run at -cpu 1,2,16:
// a small op must run inline, whatever GOMAXPROCS is.
func BenchmarkSmallOp(b *testing.B) {
	d := newCPU(b)
	b.ReportAllocs()
	smallOps(d, b.Loop)
	requireEmpty(b, d)
}

// BenchmarkSmallOpParallel is BenchmarkSmallOp in every goroutine of b.RunParallel,
// each with its own scopes and input on one cpu device: ns/op is over all goroutines,
// so it falls with more goroutines only where they do not wait for each other (the
// device's caching allocator has one lock, as PyTorch's has one per device).
func BenchmarkSmallOpParallel(b *testing.B) {
	d := newCPU(b)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) { smallOps(d, pb.Next) })
	requireEmpty(b, d)
}

// BenchmarkSmallOpOwnDevices is BenchmarkSmallOpParallel with a cpu device for each
// goroutine, so that each has a caching allocator, and its lock, of its own: set
// against BenchmarkSmallOpParallel at the same -cpu, it is what sharing one device's
// allocator costs (docs/allocator.md, "Goroutines and devices").
func BenchmarkSmallOpOwnDevices(b *testing.B) {
	devs := make([]device.Device, runtime.GOMAXPROCS(0)) // RunParallel's goroutines
	for i := range devs {
		devs[i] = newCPU(b)
	}
	var next atomic.Int32
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) { smallOps(devs[next.Add(1)-1], pb.Next) })
	for _, d := range devs {
		requireEmpty(b, d)
	}
}

// smallOps adds a 1024-element float32 tensor to itself while next says so, the
// results left to a child of a no-grad scope, which is closed and opened again every
// 100 ops.
func smallOps(d device.Device, next func() bool) {
	const perScope = 100
	data := tensor.NewScope(tensor.NoGrad())
	defer data.Close()
	x := data.Ones(d, dtype.F32, 1024)
	s := data.Child()
	i := 0
	for next() {
		x.Add(x)
		if i++; i == perScope {
			s.Close()
			s, i = data.Child(), 0
		}
	}
	s.Close()
}

// BenchmarkOpOverheadRouted is BenchmarkOpOverhead with the input in a data scope and
// the op routed down four open scopes (a step, a region, two layers) to where it runs:
// the price of routing, one atomic load per scope on the way.
func BenchmarkOpOverheadRouted(b *testing.B) {
	d := newCPU(b)
	s := tensor.NewScope(tensor.NoGrad())
	defer s.Close()
	x := s.Ones(d, dtype.F32, 4)
	s.Child().With().Child().Child()
	b.ReportAllocs()
	for b.Loop() {
		x.Add(x).Release()
	}
}

// BenchmarkOpOverheadRecorded adds a graph node and a saved tensor (Mul saves both
// operands) to the small op.
func BenchmarkOpOverheadRecorded(b *testing.B) {
	d := newCPU(b)
	s := tensor.NewScope()
	defer s.Close()
	x := s.Ones(d, dtype.F32, 4).SetRequiresGrad(true)
	b.ReportAllocs()
	for b.Loop() {
		x.Mul(x).Release()
	}
}

// BenchmarkMLPStep is one training step of the contract tests' MLP (batch 64,
// 64→256→10) on cpu: forward, backward, SGD.
func BenchmarkMLPStep(b *testing.B) {
	const bs, in, hidden, k = 64, 64, 256, 10
	d := newCPU(b)
	m := newMLP(d, 1, in, hidden, k)
	defer m.release()
	data := tensor.NewScope()
	defer data.Close()
	x, labels := batch(data, d, 1, bs, in, k)
	b.ReportAllocs()
	for b.Loop() {
		s := data.Child()
		m.loss(s.Bind(x), s.Bind(labels)).Backward()
		s.Close()
		m.sgd(0.1)
	}
}
