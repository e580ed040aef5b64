package tensor_test

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
)

// The functions below each drop handles unreleased in their own way (noinline, so
// that each is a frame of its own in the allocation site).

//go:noinline
func leakInScope(d device.Device) {
	s := tensor.NewScope() // dropped unclosed: the handles it owns leak
	s.Zeros(d, dtype.F32, 3, 5)
}

//go:noinline
func leakInChild(d device.Device) {
	s := tensor.NewScope()
	c := s.Child().Child() // dropped open with their root: the handles they own leak
	for _, in := range []*tensor.Scope{s, c} {
		in.Zeros(d, dtype.F32, 2)
	}
	s.Child().Child().Close() // a closed scope of the tree reports nothing
}

//go:noinline
func leakKept(d device.Device) {
	s := tensor.NewScope()
	x := s.Ones(d, dtype.F32, 7)
	s.Keep(x.Exp()) // out of every scope: the caller owns it and drops it
	s.Close()
}

//go:noinline
func leakParameter(d device.Device) {
	s := tensor.NewScope()
	s.Zeros(d, dtype.F32, 2, 2).AsParameter()
	s.Close()
}

//go:noinline
func leakGraph(d device.Device) {
	s := tensor.NewScope()
	x := s.Ones(d, dtype.F32, 5).SetRequiresGrad(true)
	s.Keep(x.Tanh()) // its node saved the output: a second handle that leaks with it
	s.Close()
}

//go:noinline
func noLeak(d device.Device) {
	s := tensor.NewScope()
	x := s.Ones(d, dtype.F32, 9).SetRequiresGrad(true)
	y := s.Keep(x.Tanh())
	x.Exp().Release()
	s.Child().Zeros(d, dtype.F32, 4)
	s.Close()
	y.Release()
	p := tensor.NewScope().Zeros(d, dtype.F32, 3).AsParameter()
	p.Release()
}

// Every way a handle can be dropped unreleased is reported (count, bytes, device and
// the allocation site, starting at the first frame outside package tensor), and the
// memory is not freed; released handles and closed scopes are not reported.
func TestLeaksReportedWithAllocationSite(t *testing.T) {
	d := newCPU(t)
	cases := []struct {
		fn    func(device.Device)
		name  string
		count int
		bytes int64
	}{
		{leakInScope, "leakInScope", 1, 60},
		{leakInChild, "leakInChild", 2, 16},
		{leakKept, "leakKept", 1, 28},
		{leakParameter, "leakParameter", 1, 16},
		{leakGraph, "leakGraph", 2, 40},
	}
	// Leaks accumulates over the process (tests may run again with -count): count what
	// this run adds.
	byCase := func() map[string]tensor.Leak {
		m := map[string]tensor.Leak{}
		for _, l := range tensor.Leaks() {
			require.NotContains(t, l.Site, "tensor_test.noLeak")
			for _, c := range cases {
				if strings.HasPrefix(strings.TrimSpace(l.Site), "tensor_test."+c.name+" (tensor/leak_test.go:") {
					m[c.name] = l
				}
			}
		}
		return m
	}
	before := byCase()
	for _, c := range cases {
		c.fn(d)
	}
	noLeak(d)
	// The graph's saved output shares the output's storage: 20 bytes live for 40.
	require.Equal(t, int64(60+16+28+16+20), requested(t, d), "a leak is reported, never freed")
	freeLeakedAtCleanup(t, d)

	var found map[string]tensor.Leak
	done := func() bool {
		for _, c := range cases {
			if found[c.name].Count < before[c.name].Count+c.count {
				return false
			}
		}
		return true
	}
	awaitCleanups(func() bool { found = byCase(); return done() })
	for _, c := range cases {
		l := found[c.name]
		require.Equal(t, before[c.name].Count+c.count, l.Count, "%s; leaks: %+v", c.name, tensor.Leaks())
		require.Equal(t, before[c.name].Bytes+c.bytes, l.Bytes, c.name)
		require.Equal(t, "cpu", l.Device, c.name)
	}
}

//go:noinline
func leakParameterWithGrad(d device.Device) {
	s := tensor.NewScope()
	p := s.Ones(d, dtype.F32, 6).AsParameter()
	x := s.Bind(p)
	x.Mul(x).Sum().Backward() // p's gradient, 2p: the leaf owns it
	s.Close()
}

// A parameter dropped unreleased leaks its gradient with it: both are reported, the
// gradient at the backward that made it.
func TestLeakedParameterReportsItsGradient(t *testing.T) {
	d := newCPU(t)
	const fn = "tensor_test.leakParameterWithGrad (tensor/leak_test.go:"
	// Leaks accumulates over the process: count what this run adds.
	counts := func() (param, grad int) {
		for _, l := range tensor.Leaks() {
			switch {
			case strings.HasPrefix(strings.TrimSpace(l.Site), fn):
				param += l.Count
				require.Equal(t, int64(24*l.Count), l.Bytes, "the parameter")
			case strings.Contains(l.Site, fn):
				grad += l.Count
				require.Equal(t, int64(24*l.Count), l.Bytes, "its gradient")
				require.Contains(t, l.Site, "Backward", "the gradient's site is the backward")
			}
		}
		return param, grad
	}
	param0, grad0 := counts()
	leakParameterWithGrad(d)
	require.Equal(t, int64(48), requested(t, d), "a leak is reported, never freed")
	freeLeakedAtCleanup(t, d)
	awaitCleanups(func() bool { p, g := counts(); return p > param0 && g > grad0 })
	param, grad := counts()
	require.Equal(t, param0+1, param, "the parameter; leaks: %+v", tensor.Leaks())
	require.Equal(t, grad0+1, grad, "its gradient; leaks: %+v", tensor.Leaks())
}

//go:noinline
func leakRetained(d device.Device) {
	s := tensor.NewScope() // dropped unclosed
	x := s.Ones(d, dtype.F32, 4).SetRequiresGrad(true)
	y := x.Mul(x)
	y.RetainGrad()
	y.Sum().Backward()
}

// A scope dropped unclosed leaks the gradients its handles own (a leaf's, a retained
// one) with them: every handle and gradient is reported.
func TestLeakedScopeReportsTheGradientsItsHandlesOwn(t *testing.T) {
	d := newCPU(t)
	const fn = "tensor_test.leakRetained (tensor/leak_test.go:"
	counts := func() (n int, bytes int64) {
		for _, l := range tensor.Leaks() {
			if strings.Contains(l.Site, fn) {
				n, bytes = n+l.Count, bytes+l.Bytes
			}
		}
		return n, bytes
	}
	n0, bytes0 := counts()
	leakRetained(d)
	freeLeakedAtCleanup(t, d)
	// x, y and the sum (16, 16 and 4 bytes), x's gradient and y's retained one (16 each).
	awaitCleanups(func() bool { n, _ := counts(); return n >= n0+5 })
	n, bytes := counts()
	require.Equal(t, n0+5, n, "handles; leaks: %+v", tensor.Leaks())
	require.Equal(t, bytes0+68, bytes, "bytes; leaks: %+v", tensor.Leaks())
}

// freeLeakedAtCleanup hands the blocks still allocated on d back when t ends: leaked
// blocks are the test's own, and the device must be able to go.
func freeLeakedAtCleanup(t *testing.T, d device.Device) {
	t.Cleanup(func() {
		a := allocator(t, d)
		for _, seg := range a.Snapshot() {
			for _, b := range seg.Blocks {
				if b.State == alloc.ActiveAllocated {
					require.NoError(t, a.Free(b.Address))
				}
			}
		}
	})
}

// awaitCleanups collects garbage until done says the cleanups it waits for ran, 50
// times at most (cleanups run after the cycle that found their objects).
func awaitCleanups(done func() bool) {
	for range 50 {
		runtime.GC()
		time.Sleep(time.Millisecond)
		if done() {
			return
		}
	}
}
