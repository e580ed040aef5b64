package cpu

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/kernels"
)

// withProcs runs body at GOMAXPROCS procs.
func withProcs(t *testing.T, procs int, body func()) {
	t.Helper()
	prev := runtime.GOMAXPROCS(procs)
	defer runtime.GOMAXPROCS(prev)
	body()
}

// Forks from many goroutines at once, forks inside pieces and tasks, and gangs inside
// pieces: every piece runs exactly once, nothing waits forever, whatever the pool has
// free.
func TestForksFromManyGoroutinesNested(t *testing.T) {
	defer func(w int) { wakeGrains = w }(wakeGrains)
	wakeGrains = 1 // every fork hands pieces over, asleep workers or not
	withProcs(t, 4, func() {
		const callers, n, piece = 12, 4096, 64
		var wg sync.WaitGroup
		for c := range callers {
			wg.Go(func() {
				for round := range 20 {
					hits := make([]atomic.Int32, n)
					parallelFor(n, piece, func(lo, hi int) {
						parallelFor(hi-lo, piece/2, func(l, h int) {
							for i := lo + l; i < lo+h; i++ {
								hits[i].Add(1)
							}
						})
					})
					tasks := make([]atomic.Int32, 6)
					parallelTasks(len(tasks), true, func(t int) {
						var inner atomic.Int32
						concurrently(3, func(int) { inner.Add(1) })
						tasks[t].Add(inner.Load())
					})
					for i := range hits {
						if hits[i].Load() != 1 {
							t.Errorf("caller %d round %d: element %d run %d times", c, round, i, hits[i].Load())
							return
						}
					}
					for i := range tasks {
						if tasks[i].Load() != 3 {
							t.Errorf("caller %d round %d: task %d saw %d of its gang's 3 tasks", c, round, i, tasks[i].Load())
							return
						}
					}
				}
			})
		}
		wg.Wait()
	})
}

// A gang's tasks run at once: each waits for all of its gang to have started, with
// more gangs at a time than the pool has workers.
func TestConcurrentlyRunsAGangAtOnce(t *testing.T) {
	withProcs(t, 3, func() {
		const gangs, size = 8, 5
		var wg sync.WaitGroup
		for range gangs {
			wg.Go(func() {
				var started atomic.Int32
				concurrently(size, func(int) {
					started.Add(1)
					for deadline := time.Now().Add(10 * time.Second); started.Load() < size; runtime.Gosched() {
						if time.Now().After(deadline) {
							t.Errorf("a gang's task waited 10 s for the others: %d of %d started", started.Load(), size)
							return
						}
					}
				})
			})
		}
		wg.Wait()
	})
}

// Workers that have no job stop spinning and sleep (an idle program burns no CPU), and
// the pool stays within GOMAXPROCS-1 workers (12 goroutines forking at once in
// TestForksFromManyGoroutinesNested hire, they do not add).
func TestIdleWorkersSleep(t *testing.T) {
	withProcs(t, 4, func() {
		for range 10 {
			parallelFor(wakeGrains*grain, grain, func(lo, hi int) {})
		}
	})
	var ws []*worker
	deadline := time.Now().Add(5 * time.Second)
	for ; time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		ws = *pool.workers.Load()
		sleeping := 0
		for _, w := range ws {
			if w.state.Load() == asleep {
				sleeping++
			}
		}
		if sleeping == len(ws) {
			break
		}
	}
	require.NotEmpty(t, ws)
	for i, w := range ws {
		assert.Equal(t, asleep, w.state.Load(), "worker %d of %d, 5 s after the last fork", i, len(ws))
	}
	assert.LessOrEqual(t, len(ws), maxProcsOfTests-1, "workers in the pool: at most the largest GOMAXPROCS less one")
}

// maxProcsOfTests is the largest GOMAXPROCS the package's tests set
// (TestSgemmBitsAcrossGOMAXPROCS).
const maxProcsOfTests = 16

// A fork hands its pieces over without allocating (the closure is the caller's): in
// 10,000 forks the only allocations are the runtime's own, now and then, when a worker
// sleeps and wakes (a sudog for the channel; a fork that started goroutines allocated
// at least one each). testing.AllocsPerRun runs at GOMAXPROCS 1, where nothing forks:
// this counts the process's allocations itself.
func TestForkAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	const rounds = 10000
	allocs := func(f func()) uint64 {
		for range 1000 { // the jobs that circulate at once, and the pool's first worker
			f()
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range rounds {
			f()
		}
		runtime.ReadMemStats(&after)
		return after.Mallocs - before.Mallocs
	}
	withProcs(t, 2, func() {
		var sum atomic.Int64
		fn := func(lo, hi int) { sum.Add(int64(hi - lo)) }
		task := func(t int) { sum.Add(int64(t)) }
		assert.Less(t, allocs(func() { parallelFor(wakeGrains*grain, grain, fn) }), uint64(rounds/500), "parallelFor, %d forks", rounds)
		assert.Less(t, allocs(func() { parallelTasks(4, true, task) }), uint64(rounds/500), "parallelTasks, %d forks", rounds)
		assert.Equal(t, int64(11000*wakeGrains*grain+11000*6), sum.Load())
	})
}

// BenchmarkForkEmpty is the cost of a fork itself: two pieces that do nothing, back
// to back (at -cpu 2 the worker is awake for each).
func BenchmarkForkEmpty(b *testing.B) {
	fn := func(lo, hi int) {}
	for b.Loop() {
		parallelFor(2*grain, grain, fn)
	}
}

// BenchmarkForkAsleep times kernels on their own, each 2 ms of serial work after the
// last one (a busy loop, longer than workerSpin and burst), when the workers sleep:
// kernel-ns/op is the kernel's time (b.StopTimer is not used: it stops the world,
// which wakes the other thread). "wake" is a fork of two pieces that do nothing (what waking a worker costs the
// forking goroutine), then Add at 64K to 4M elements and Sgemm of n×n matrices. Under
// "woken" every fork wakes the workers (wakeGrains 1, gemmWake 0), under "default" the
// thresholds are the package's (not the tests'). Compare 1 thread, where nothing
// forks, to find the sizes from which waking the workers pays (wakeGrains, gemmWake).
func BenchmarkForkAsleep(b *testing.B) {
	gap := func(b *testing.B, run func()) {
		var took time.Duration
		for b.Loop() {
			for start := time.Now(); time.Since(start) < 2*time.Millisecond; {
			}
			start := time.Now()
			run()
			took += time.Since(start)
		}
		b.ReportMetric(float64(took)/float64(b.N), "kernel-ns/op")
	}
	for _, policy := range []string{"woken", "default"} {
		b.Run(policy, func(b *testing.B) {
			defer func(w, s, g int) { wakeGrains, gemmSerial, gemmWake = w, s, g }(wakeGrains, gemmSerial, gemmWake)
			if policy == "woken" {
				wakeGrains, gemmWake = 1, 0
			} else {
				gemmSerial, gemmWake = defaultGemmSerial, defaultGemmWake
			}
			b.Run("wake", func(b *testing.B) {
				fn := func(lo, hi int) {}
				gap(b, func() { parallelFor(2*grain, grain, fn) })
			})
			for _, n := range []int{1 << 16, 1 << 18, 1 << 20, 1 << 22} {
				b.Run(fmt.Sprintf("add/%dK", n>>10), func(b *testing.B) {
					x, out := benchData(n), make([]float32, n)
					l := kernels.Contiguous(n)
					gap(b, func() { Binary(kernels.Add, F32(out, l), F32(x, l), F32(x, l)) })
				})
			}
			for _, n := range []int{128, 160, 256, 384, 512} {
				b.Run(fmt.Sprintf("sgemm/%d", n), func(b *testing.B) {
					a, c := benchData(n*n), make([]float32, n*n)
					gap(b, func() { Sgemm(false, false, n, n, n, 1, a, n, a, n, 0, c, n) })
				})
			}
		})
	}
}
