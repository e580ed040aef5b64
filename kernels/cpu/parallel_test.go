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

// Forks from many goroutines at once, and forks inside pieces and tasks: every piece
// runs exactly once, nothing waits forever, whatever the pool has free.
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
					parallelTasks(len(tasks), len(tasks), true, func(t int) {
						var inner atomic.Int32
						parallelTasks(3, 3, true, func(int) { inner.Add(1) })
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
							t.Errorf("caller %d round %d: task %d saw %d of its 3 inner tasks", c, round, i, tasks[i].Load())
							return
						}
					}
				}
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
	// 1000 runs first: the jobs that circulate at once, and the pool's first worker.
	allocs := func(f func()) uint64 { return mallocs(f, 1000, rounds) }
	withProcs(t, 2, func() {
		var sum atomic.Int64
		fn := func(lo, hi int) { sum.Add(int64(hi - lo)) }
		task := func(t int) { sum.Add(int64(t)) }
		assert.Less(t, allocs(func() { parallelFor(wakeGrains*grain, grain, fn) }), uint64(rounds/500), "parallelFor, %d forks", rounds)
		assert.Less(t, allocs(func() { parallelTasks(4, 4, true, task) }), uint64(rounds/500), "parallelTasks, %d forks", rounds)
		assert.Equal(t, int64(11000*wakeGrains*grain+11000*6), sum.Load())
	})
}

// mallocs is the process's heap allocations while f runs rounds times, after warm
// runs: testing.AllocsPerRun runs at GOMAXPROCS 1, where nothing forks.
func mallocs(f func(), warm, rounds int) uint64 {
	for range warm {
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
			defer func(w, s, g int) { wakeGrains, gemmGrain, gemmWake = w, s, g }(wakeGrains, gemmGrain, gemmWake)
			if policy == "woken" {
				wakeGrains, gemmWake = 1, 0
			} else {
				gemmGrain, gemmWake = defaultGemmGrain, defaultGemmWake
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

// BenchmarkWorkers times kernels of the training cases' sizes on p goroutines (p = 1,
// 2, 4, … up to the benchmark's GOMAXPROCS, with GOMAXPROCS and cores set to p and the
// thresholds lowered so that every kernel splits p ways, back to back, so the workers
// are awake), and as the package's rule splits them at the benchmark's GOMAXPROCS on
// this machine's cores ("rule"): where p+1 goroutines stop beating p, a share of the
// work costs less than handing it to a goroutine, which sets the least share of each
// kernel (grain, gemmGrain). "fork" is p pieces that do nothing; add and sgd (with
// momentum) at n elements; sum-cols sums [rows, cols] over rows (a bias's gradient);
// the products are the training cases' (BenchmarkSgemmTraining). cpu-ns/op is the
// process's CPU time per op, spinning workers' included. Run with -test.cpu set to the
// largest p, in a process of its own (golang/go#49980).
func BenchmarkWorkers(b *testing.B) {
	top := runtime.GOMAXPROCS(0)
	defer func(g, gg, gw, c int) {
		grain, gemmGrain, gemmWake, cores = g, gg, gw, c
		runtime.GOMAXPROCS(top)
	}(grain, gemmGrain, gemmWake, cores)
	fn := func(lo, hi int) {}
	type kernel struct {
		name string
		run  func()
	}
	add := func(n int) kernel {
		x, out, l := benchData(n), make([]float32, n), kernels.Contiguous(n)
		return kernel{fmt.Sprintf("add/%dK", n>>10), func() { Binary(kernels.Add, F32(out, l), F32(x, l), F32(x, l)) }}
	}
	sgd := func(n int) kernel {
		p, g, buf := benchData(n), benchData(n), make([]float32, n)
		c := kernels.SGD{LR: 1e-3, Momentum: 0.9}
		return kernel{fmt.Sprintf("sgd/%dK", n>>10), func() { SGDStep(c, p, g, buf, false) }}
	}
	sumCols := func(rows, cols int) kernel {
		x, out := benchData(rows*cols), make([]float32, cols)
		return kernel{fmt.Sprintf("sum-cols/%dx%d", rows, cols), func() {
			Sum(F32(out, kernels.Contiguous(1, cols)), F32(x, kernels.Contiguous(rows, cols)))
		}}
	}
	sgemm := func(name string, transA, transB bool, m, n, k int) kernel {
		a, bm, c := benchData(m*k), benchData(k*n), make([]float32, m*n)
		lda, ldb := k, n
		if transA {
			lda = m
		}
		if transB {
			ldb = k
		}
		return kernel{"sgemm/" + name, func() { Sgemm(transA, transB, m, n, k, 1, a, lda, bm, ldb, 0, c, n) }}
	}
	for _, k := range []kernel{
		{"fork", func() { parallelFor(1<<20, 1, fn) }},
		add(16 << 10), add(64 << 10), add(256 << 10), add(1 << 20),
		sgd(200 << 10), sgd(1 << 20),
		sumCols(64, 256), sumCols(1024, 1024),
		sgemm("tiny-fwd-784", false, true, 64, 256, 784),
		sgemm("tiny-fwd-256", false, true, 64, 256, 256),
		sgemm("tiny-dw-784", true, false, 256, 784, 64),
		sgemm("tiny-dw-256", true, false, 256, 256, 64),
		sgemm("256", false, false, 256, 256, 256),
	} {
		for p := 1; p <= top; p = min(2*p, max(top, p+1)) {
			b.Run(fmt.Sprintf("%s/p=%d", k.name, p), func(b *testing.B) {
				runtime.GOMAXPROCS(p)
				grain, gemmGrain, gemmWake, cores = 1, 1, 0, p
				ReportCPU(b, k.run)
			})
		}
		b.Run(k.name+"/rule", func(b *testing.B) {
			runtime.GOMAXPROCS(top)
			grain, gemmGrain, gemmWake, cores = defaultGrain, defaultGemmGrain, defaultGemmWake, runtime.NumCPU()
			ReportCPU(b, k.run)
		})
	}
}

// The rule of every parallel kernel (workers): no split below two shares, work/least
// goroutines above, never more than GOMAXPROCS nor than the cores. At the package's
// shares on 16 cores, the tiny training case's kernels (batch 64, 784-256-256-10) run
// on one goroutine (an activation's Add) to all 16 (its 784-wide products), and the
// deep case's 1024³ products on all 16; GOMAXPROCS 16 on 2 cores runs as 2.
func TestWorkersRule(t *testing.T) {
	defer func(c int) { cores = c }(cores)
	cases := []struct {
		what               string
		work, least        int
		procs, cores, want int
	}{
		{"below two shares", 2*grain - 1, grain, 16, 16, 1},
		{"two shares", 2 * grain, grain, 16, 16, 2},
		{"capped by GOMAXPROCS", 100 * grain, grain, 16, 16, 16},
		{"capped by the cores", 100 * grain, grain, 16, 2, 2},
		{"tiny: an activation's Add or ReLU (64×256)", 64 * 256, grain, 16, 16, 1},
		{"tiny: SGD on the first layer's weight (784×256)", 784 * 256, grain, 16, 16, 12},
		{"tiny: the 256×256 products", 64 * 256 * 256, defaultGemmGrain, 16, 16, 8},
		{"tiny: the 256×256 products on 2 cores", 64 * 256 * 256, defaultGemmGrain, 16, 2, 2},
		{"tiny: the 784×256 products", 64 * 784 * 256, defaultGemmGrain, 16, 16, 16},
		{"a 96³ product", 96 * 96 * 96, defaultGemmGrain, 16, 16, 1},
		{"deep: 1024³", 1 << 30, defaultGemmGrain, 16, 16, 16},
		{"deep: 1024³ on 2 cores", 1 << 30, defaultGemmGrain, 16, 2, 2},
		{"one core", 1 << 30, defaultGemmGrain, 1, 16, 1},
	}
	for _, c := range cases {
		withProcs(t, c.procs, func() {
			cores = c.cores
			assert.Equal(t, c.want, workers(c.work, c.least), "%s: %d units, %d a share, GOMAXPROCS %d, %d cores", c.what, c.work, c.least, c.procs, c.cores)
		})
	}
	for _, c := range [][3]int{{8, 6, 4}, {8, 4, 4}, {8, 16, 8}, {12, 5, 4}, {25, 12, 9}, {7, 7, 7}, {1, 3, 1}} {
		assert.Equal(t, c[2], rounded(c[0], c[1]), "%d tasks on at most %d goroutines", c[0], c[1])
	}
}
