package alloc

import (
	"testing"

	"github.com/subletml/sublet/device"
)

// The planned policy's host cost, beside bench_test.go's for PyTorch's policy, on the
// same simulated device with no cost model: the allocator alone.

// BenchmarkPlannedPair is BenchmarkPair under the planned policy: the pair repeats, so
// after a few pairs a plan of period 2 serves it from its arena.
func BenchmarkPlannedPair(b *testing.B) {
	for _, c := range []struct {
		name string
		size int64
	}{{"512B", 512}, {"1MiB", MiB}, {"20MiB", 20 * MiB}, {"256MiB", 256 * MiB}} {
		b.Run(c.name, func(b *testing.B) {
			a, d := newAlloc(b, 0, Config{Policy: PolicyPlanned})
			for range 16 {
				mustFree(b, a, mustAlloc(b, a, c.size, 0))
			}
			benchPairs(b, a, func() (device.Ptr, error) { return a.Alloc(c.size, 0) })
			if a.PlanStats().Period != 2 {
				b.Fatalf("no plan: %+v", a.PlanStats())
			}
			requireDrained(b, a, d)
		})
	}
}

// BenchmarkPlannedChurn is BenchmarkChurn under the planned policy: nothing repeats, so
// it is the caching path with the detector watching and pages stitched.
func BenchmarkPlannedChurn(b *testing.B) { benchChurn(b, Config{Policy: PolicyPlanned}) }

// BenchmarkStep times one training step's 33 allocations and frees (trainLoop) under
// each policy, once the planned policy's plan runs; ns/alloc is per allocation and its
// free.
func BenchmarkStep(b *testing.B) {
	for _, p := range []Policy{PolicyPyTorch, PolicyPlanned} {
		b.Run(p.String(), func(b *testing.B) {
			a, d := newAlloc(b, 0, Config{Policy: p})
			l := newTrainLoop(b, a, []int64{3 * MiB, 5*MiB + 700, 300 * KiB, 7 * MiB})
			i := 0
			for ; i < 8; i++ {
				l.step(i)
			}
			if p == PolicyPlanned && a.PlanStats().Period == 0 {
				b.Fatal("no plan")
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				l.step(i)
				i++
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/33, "ns/alloc")
			l.close()
			requireDrained(b, a, d)
		})
	}
}
