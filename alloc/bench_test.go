package alloc

import (
	"sync/atomic"
	"testing"

	"github.com/subletml/sublet/device"
)

// The benchmarks run on the simulated device with no cost model and no backing store,
// so they time the allocator alone. They match bench/torch/torch_alloc_cpp.py, which
// times PyTorch's allocator from C++ (320–470 ns per pair, 308 ns per churn step on
// the H200 machine).

func BenchmarkPair(b *testing.B) {
	for _, c := range []struct {
		name string
		size int64
	}{{"512B", 512}, {"1MiB", MiB}, {"20MiB", 20 * MiB}, {"256MiB", 256 * MiB}} {
		b.Run(c.name, func(b *testing.B) {
			a, d := newAlloc(b, 0, Config{})
			benchPairs(b, a, func() (device.Ptr, error) { return a.Alloc(c.size, 0) })
			requireDrained(b, a, d)
		})
	}
}

// benchPairs times alloc followed by Free, after one untimed pair that fills the cache.
func benchPairs(b *testing.B, a *Allocator, alloc func() (device.Ptr, error)) {
	p, err := alloc()
	if err != nil {
		b.Fatal(err)
	}
	mustFree(b, a, p)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		p, err := alloc()
		if err != nil {
			b.Fatal(err)
		}
		if err := a.Free(p); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
}

// churn is the 64-slot pattern of torch_alloc_cpp.py: an LCG picks a slot; a live slot
// is freed, an empty one gets 512 B to 4 MiB.
type churn struct {
	x    uint64
	slot [64]device.Ptr
}

func (c *churn) step(b *testing.B, a *Allocator) {
	c.x = c.x*6364136223846793005 + 1442695040888963407
	s := (c.x >> 33) % 64
	if p := c.slot[s]; p != 0 {
		if err := a.Free(p); err != nil {
			b.Fatal(err)
		}
		c.slot[s] = 0
		return
	}
	p, err := a.Alloc(int64(512*(1+(c.x>>17)%8192)), 0)
	if err != nil {
		b.Fatal(err)
	}
	c.slot[s] = p
}

func (c *churn) drain(b *testing.B, a *Allocator) {
	for i, p := range c.slot {
		if p != 0 {
			mustFree(b, a, p)
			c.slot[i] = 0
		}
	}
}

// BenchmarkChurn is the churn pattern under the default policy (PyTorch's).
func BenchmarkChurn(b *testing.B) { benchChurn(b, Config{}) }

// benchChurn times the churn pattern, after 100,000 warm-up steps, on an allocator
// configured by cfg.
func benchChurn(b *testing.B, cfg Config) {
	a, d := newAlloc(b, 0, cfg)
	c := churn{x: 42}
	for range 100_000 {
		c.step(b, a)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		c.step(b, a)
	}
	b.StopTimer()
	c.drain(b, a)
	requireDrained(b, a, d)
}

// BenchmarkChurnParallel runs the churn pattern in every goroutine of b.RunParallel,
// each on its own slots and generator, all on one allocator: the throughput under
// contention for its lock.
func BenchmarkChurnParallel(b *testing.B) {
	a, d := newAlloc(b, 0, Config{})
	var seed atomic.Uint64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		c := churn{x: 42 + seed.Add(1)}
		for range 1000 {
			c.step(b, a)
		}
		for pb.Next() {
			c.step(b, a)
		}
		c.drain(b, a)
	})
	b.StopTimer()
	requireDrained(b, a, d)
}

// BenchmarkFor is the lookup of a device's allocator that an op reading no tensor of
// its device makes (a factory), from every goroutine of b.RunParallel.
func BenchmarkFor(b *testing.B) {
	d := newSim(b, 0)
	want, err := For(d)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if a, err := For(d); err != nil || a != want {
				b.Errorf("For: %v, %p against %p", err, a, want)
				return
			}
		}
	})
}
