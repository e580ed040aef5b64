package cpu

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// The kernels' parallel work runs on a pool of worker goroutines, at most GOMAXPROCS-1,
// started as forks first need them and kept for the life of the process. A kernel that
// forks cuts its work into pieces whose bounds depend only on the sizes and GOMAXPROCS,
// hands the job to the workers it finds free, and runs pieces itself; each piece goes
// to whoever asks first, so a worker that comes late (a sleeping one takes 60-165 µs to
// run on the 2-core development machine, a parked thread on an idle vCPU) finds nothing
// left, and the kernel never waits for a worker that holds no piece. A worker that has
// run its pieces watches for the next job for workerSpin before it sleeps: the parallel
// kernels of a training step follow each other closer than that and find it awake.
// How many goroutines a kernel splits over is one rule for every kernel (workers: a
// least share of work each, at most GOMAXPROCS and the cores; BenchmarkWorkers).
// Work too small to be worth waiting for a sleeping worker runs with the awake ones
// only and rouses the others for the kernels that follow. Products hand out their
// tasks the same way (parallelTasks): no task waits for another.
//
// What a fork costs (BenchmarkForkEmpty, BenchmarkForkAsleep, BenchmarkFork at 1 and
// 2 threads, docs/benchmarks.md): about 0.2 µs with the worker awake (the pieces start
// 0.2-0.5 µs apart); waking a sleeping worker costs the forking goroutine 17-20 µs.

// workerSpin is how long a worker that has run its pieces watches for the next job
// before it sleeps on a channel (bounded: an idle program burns no CPU past it). In
// the tiny training case (sublet-bench tiny-sgd, GOMAXPROCS 2) the products come with
// serial kernels between them: 50 µs trained 1116-1335 steps/s, 100 µs 1145-1423,
// 200 µs 1468-1572, 500 µs no more; what a worker burns while it spins shows as CPU
// time per step (1.4 ms where the kernels without a pool took 1.1).
const workerSpin = 200 * time.Microsecond

// spinPolls is how many times a spinning goroutine looks before its first reading of
// the clock (a few µs), back to back: a fork's pieces are picked up and their end seen
// within a few hundred ns. Past that, the wait is for work that takes longer (a
// product's last tasks), and the goroutine relaxes after each look, relaxPolls looks
// between readings of the clock (a few µs again: relax takes 16 ns on the development
// machine's Zen 5, about 140 cycles on recent Intel cores). Relaxing from the first
// look made an empty fork 5-7 % slower there (622-659 ns against 591-618).
const (
	spinPolls  = 4096
	relaxPolls = 64
)

// spinYield is how long a spinning goroutine goes between yields to the scheduler: a
// yield lets a goroutine queued on its thread run (one its own work has woken sits
// there until the thread yields or another steals it), but it takes the scheduler's
// lock, which every thread shares, may move the goroutine to another thread (away from
// the caches that hold its data), and wakes an idle thread to look for work. With
// spare Ps there is no need to yield (spare). Yielding every few µs, the tiny training
// case at GOMAXPROCS 16 on the 2-core development machine trained at 657-943 steps/s
// against 1338-1352 at GOMAXPROCS 2 (the kernels on 2 goroutines in both); every 50 µs,
// 941-1057; without yields with spare Ps, 1198-1232 against 1332-1347.
const spinYield = 50 * time.Microsecond

// awaitSpin is how long a goroutine that waits for a counter spins before it sleeps
// until the counter moves: a fork's last pieces end within a product's length of each
// other, and a sleeping goroutine takes tens of microseconds to wake. On the 16-core
// host a 1024³ product's tasks end up to hundreds of µs apart (2 ms a product): with
// 50 µs the forking goroutine slept and woke late, and 1 ms ran the deep training
// case's products up to 16 % faster (-1 to +16 % in the same call) and trained the
// tiny case 13 % faster (docs/benchmarks.md, branch cpu16b). Spinning costs CPU only
// while a fork is still running.
const awaitSpin = time.Millisecond

// wakeGrains is the least work, in grains, for which a fork wakes sleeping workers to
// run it (1M elements of an elementwise kernel): an Add that wakes one runs slower
// than on one thread at 64K and 256K elements, about as fast at 1M and 1.4-1.6× faster
// at 4M (BenchmarkForkAsleep), since the worker comes 60-165 µs late. The tests lower
// it.
var wakeGrains = 64

// burst is how soon after the previous fork a fork too small to wake the workers
// rouses them: rousing a sleeping worker slows the rousing goroutine's own work by
// 10-20 µs on the dev machine (an Add of 256K elements: 30-36 µs median alone, 38-55
// with a worker roused at its start; a worker spinning on the other core costs it
// nothing), which pays only when more forks follow. A kernel on its own leaves them
// asleep.
const burst = time.Millisecond

// lastFork is when the latest fork with more than one piece came, in ns since epoch.
var (
	lastFork atomic.Int64
	epoch    = time.Now()
)

// following records a fork and reports whether it follows the previous one within
// burst.
func following() bool {
	now := int64(time.Since(epoch))
	return now-lastFork.Swap(now) < int64(burst)
}

// workers is how many goroutines share work units of a kernel that gives each at
// least least of them: 1 below 2·least, else work/least, at most procs. It is the one
// rule of every parallel kernel (the pieces of parallelFor and forRange, the tasks of a
// product, the optimizer steps): each states its work and the least share that pays
// for the goroutine that runs it, measured on that kernel (grain, gemmGrain). Small
// work is decided without asking the runtime: runtime.GOMAXPROCS takes the scheduler's
// lock, which every goroutine shares.
func workers(work, least int) int {
	least = max(least, 1)
	if work < 2*least {
		return 1
	}
	return min(procs(), work/least)
}

// cores is how many CPUs the process may run on (runtime.NumCPU, read at start). The
// tests raise it to run many workers on a small machine.
var cores = runtime.NumCPU()

// procs is the most goroutines a kernel runs on: GOMAXPROCS, and no more than cores.
// Past the cores a worker only waits for one, and spinning it takes turns from the
// ones that work: on the 2-core development machine GOMAXPROCS 16 trained the tiny
// case at 608 steps/s where GOMAXPROCS 2 gave 1448 (sublet-bench tiny-sgd).
func procs() int {
	n := runtime.GOMAXPROCS(0)
	spare.Store(n > cores)
	return min(n, cores)
}

// spare is whether GOMAXPROCS was above the cores when procs last read it: the
// scheduler then has idle Ps (the kernels run on no more goroutines than cores),
// whose threads take a goroutine that is ready to run from a busy one, so a spinning
// goroutine need not yield to let it run (spin).
var spare atomic.Bool

// forks is how many pieces a fork of n elements for a grain is cut into (1: the work
// stays on the calling goroutine, in one piece), and whether it wakes sleeping
// workers: 1 below 2·grain, and 1 for work too small to wake workers when none is
// awake (within a burst of forks it rouses them for the forks that follow).
func forks(n, grain int) (p int, wake bool) {
	if p = workers(n, grain); p <= 1 {
		return 1, false
	}
	wake = n >= wakeGrains*max(grain, 1)
	if following := following(); !wake && awake() == 0 {
		if following {
			hire(nil, p-1, false)
		}
		return 1, false
	}
	return p, wake
}

// parallelFor calls fn on consecutive pieces of [0, n) of at least grain elements, at
// most GOMAXPROCS pieces, run by the calling goroutine and the pool's free workers;
// work below 2·grain never leaves the calling goroutine, nor work below wakeGrains
// grains when no worker is awake. fn must not depend on how [0, n) is split for its
// results to be deterministic (the pieces' bounds do not depend on who runs them).
//
// fn escapes (the workers hold it), and with it what it captures: a kernel that must
// not allocate when its work stays on the calling goroutine uses forRange.
func parallelFor(n, grain int, fn func(lo, hi int)) {
	p, wake := forks(n, grain)
	forPieces(n, p, wake, fn)
}

// forPieces is parallelFor in p pieces, as forks decided.
func forPieces(n, p int, wake bool, fn func(lo, hi int)) {
	if p <= 1 {
		if n > 0 {
			fn(0, n)
		}
		return
	}
	j := newJob(n, p)
	j.fn = fn
	j.fork(p-1, wake)
}

// ranged is the state of a kernel that forRange cuts into pieces: run computes the
// elements [lo, hi). It has a value receiver: forRange holds no pointer to the state.
type ranged interface{ run(lo, hi int) }

// forRange is parallelFor over the pieces of a kernel whose state is s: work that stays
// on the calling goroutine (forks) allocates nothing, where a closure handed to
// parallelFor is always allocated, with what it captures (and a function value in
// generic code carries its dictionary). Pieces on other goroutines copy s from one
// copy on the heap, which the job holds.
func forRange[S ranged](n, grain int, s S) {
	p, wake := forks(n, grain)
	if p <= 1 {
		if n > 0 {
			s.run(0, n)
		}
		return
	}
	j := newJob(n, p)
	j.pieces = &onHeapRanged[S]{s}
	j.fork(p-1, wake)
}

// onHeapRanged is a forRange state on the heap, for the job that runs its pieces.
type onHeapRanged[S ranged] struct{ s S }

func (h *onHeapRanged[S]) run(lo, hi int) { h.s.run(lo, hi) }

// parallelTasks calls fn(t) once for every t in [0, tasks), run by the calling
// goroutine and up to p-1 free workers (asleep ones too, woken, with wake), each
// taking the next task when it is done with one. Results are deterministic when each
// task writes only its own outputs.
func parallelTasks(tasks, p int, wake bool, fn func(t int)) {
	p = min(p, tasks)
	if p <= 1 {
		for t := range tasks {
			fn(t)
		}
		return
	}
	j := newJob(tasks, tasks)
	j.task = fn
	j.fork(p-1, wake)
}

// job is one fork of a kernel: p pieces, each run once by whichever of the forking
// goroutine and the workers it hired claims it first. The forking goroutine writes the
// fields above next before it hands the job to anyone; a job goes back to jobs when
// all who held it have let go (refs), so a late worker never sees a later fork's
// fields.
type job struct {
	fn       func(lo, hi int) // piece i is fn(n·i/p, n·(i+1)/p) ...
	pieces   ranged           // ... or pieces.run(n·i/p, n·(i+1)/p) (forRange's) ...
	task     func(t int)      // ... or task(i), when fn and pieces are nil
	n, p     int
	next     atomic.Int64 // the next piece to claim
	finished atomic.Int64 // pieces run
	refs     atomic.Int32 // the forking goroutine, and each worker or goroutine handed the job
	progress              // the forking goroutine sleeps here until finished is p
}

// jobs keeps forks free of allocations.
var jobs = sync.Pool{New: func() any { return new(job) }}

func newJob(n, p int) *job {
	j := jobs.Get().(*job)
	j.n, j.p = n, p
	j.next.Store(0)
	j.finished.Store(0)
	j.refs.Store(1)
	return j
}

// fork hands j to up to helpers workers, awake ones, and asleep ones too with wake,
// runs pieces of it, and returns once every piece has run.
func (j *job) fork(helpers int, wake bool) {
	hire(j, helpers, wake)
	j.work()
	j.await(&j.finished, int64(j.p))
	j.release()
}

// work runs the pieces that are left, one after the other.
func (j *job) work() {
	for {
		i := int(j.next.Add(1) - 1)
		if i >= j.p {
			return
		}
		switch {
		case j.fn != nil:
			j.fn(j.n*i/j.p, j.n*(i+1)/j.p)
		case j.pieces != nil:
			j.pieces.run(j.n*i/j.p, j.n*(i+1)/j.p)
		default:
			j.task(i)
		}
		if j.finished.Add(1) == int64(j.p) {
			j.moved()
		}
	}
}

// help is a goroutine's part of a job handed to it: its pieces, then letting go.
func (j *job) help() {
	j.work()
	j.release()
}

// release lets go of j; the last one to hold it puts it back in jobs.
func (j *job) release() {
	if j.refs.Add(-1) == 0 {
		j.fn, j.pieces, j.task = nil, nil, nil
		jobs.Put(j)
	}
}

// A worker's states: free (spinning, watching job), asleep (waiting on wake), or
// taken (a forker has handed it a job, or is about to).
const (
	free int32 = iota
	asleep
	taken
)

// worker is a goroutine of the pool. Only the worker sets its state from free to
// asleep and from taken to free; a forker sets it from free or asleep to taken (to
// hand it a job) and from asleep to free (to rouse it), by compare-and-swap, so one
// forker at a time hands it a job.
type worker struct {
	state atomic.Int32
	job   atomic.Pointer[job] // set by the forker that took the worker, cleared by the worker
	wake  chan struct{}       // one send each time another goroutine moves state from asleep (buffered)
	_     [40]byte            // a cache line each: a spinning worker reads its own
}

// pool holds the workers.
var pool struct {
	mu      sync.Mutex                // serializes adding workers
	workers atomic.Pointer[[]*worker] // replaced, never changed, under mu
}

// poolNow is the pool's workers.
func poolNow() []*worker {
	if p := pool.workers.Load(); p != nil {
		return *p
	}
	return nil
}

// hire hands j to up to want of the pool's workers, free ones first. With wake, asleep ones take it too (woken), and new ones are started
// with it while the pool has fewer than want (which is below GOMAXPROCS). Without,
// it rouses as many asleep ones as it lacks, and starts new ones with no job, so that
// the forks that follow find them awake. A nil j rouses only.
func hire(j *job, want int, wake bool) {
	ws := poolNow()
	hired := 0
	for _, w := range ws {
		if j == nil || hired == want {
			break
		}
		if w.state.CompareAndSwap(free, taken) {
			w.take(j)
			hired++
		}
	}
	wake = wake && j != nil
	lack := want - hired
	for _, w := range ws {
		if lack == 0 {
			break
		}
		if wake && w.state.CompareAndSwap(asleep, taken) {
			w.take(j)
			w.wake <- struct{}{}
			lack--
		} else if !wake && w.state.CompareAndSwap(asleep, free) {
			w.wake <- struct{}{}
			lack--
		}
	}
	for ; lack > 0 && len(ws) < want; lack-- {
		first := j
		if !wake {
			first = nil
		}
		if ws = grow(first, want); ws == nil {
			break
		}
	}
}

// take hands j to w, which a forker has just taken.
func (w *worker) take(j *job) {
	j.refs.Add(1)
	w.job.Store(j)
}

// grow starts a worker, with j as its first job unless j is nil, if the pool has
// fewer than want, and returns the pool it made (nil when it had enough).
func grow(j *job, want int) []*worker {
	pool.mu.Lock()
	defer pool.mu.Unlock()
	ws := poolNow()
	if len(ws) >= want {
		return nil
	}
	w := &worker{wake: make(chan struct{}, 1)}
	if j != nil {
		w.state.Store(taken)
		j.refs.Add(1)
	}
	ws = append(ws[:len(ws):len(ws)], w)
	pool.workers.Store(&ws)
	go w.run(j)
	return ws
}

// awake is how many of the pool's workers are not asleep: the free ones (spinning) a
// fork that wakes none would find, unless another fork takes them first, and the
// taken ones, which are free again once their job is done. (A worker stays taken a
// moment after the last piece of its job has run, when the forker already goes on:
// counting only the free ones, a product right after another ran on one goroutine.)
func awake() int {
	n := 0
	for _, w := range poolNow() {
		if w.state.Load() != asleep {
			n++
		}
	}
	return n
}

// run is the worker's life: its first job if it has one, then the next, and so on.
func (w *worker) run(j *job) {
	for {
		if j != nil {
			j.help()
			w.state.Store(free)
		}
		j = w.next()
	}
}

// next returns the worker's next job: it watches for one for workerSpin, then sleeps
// until a forker takes it or rouses it (and then watches again).
func (w *worker) next() *job {
	for {
		if !spin(workerSpin, func() bool { return w.job.Load() != nil }) && w.state.CompareAndSwap(free, asleep) {
			<-w.wake
			if w.state.Load() == free {
				continue // roused, with no job
			}
		}
		for { // taken: the forker stores the job right after
			if j := w.job.Swap(nil); j != nil {
				return j
			}
			runtime.Gosched()
		}
	}
}

// spin looks at done until it holds or d has passed, yielding the thread every
// spinYield, and reports whether done held.
func spin(d time.Duration, done func() bool) bool {
	start := time.Now()
	yielded := time.Duration(0)
	for polls, relaxing := spinPolls, false; ; polls, relaxing = relaxPolls, true {
		for range polls {
			if done() {
				return true
			}
			if relaxing {
				relax()
			}
		}
		t := time.Since(start)
		if t > d {
			return false
		}
		if t-yielded >= spinYield && !spare.Load() {
			runtime.Gosched()
			yielded = t
		}
	}
}

// progress lets goroutines wait for atomic counters that others move: a waiter spins
// for awaitSpin, then sleeps until whoever moves a counter calls moved.
type progress struct {
	mu       sync.Mutex   // guards wake.L and nothing else: sleepers wait on it
	wake     sync.Cond    // broadcast when a counter moves while sleepers > 0
	sleepers atomic.Int32 // goroutines asleep in await
}

// await returns once counter c has reached want.
func (p *progress) await(c *atomic.Int64, want int64) {
	if spin(awaitSpin, func() bool { return c.Load() >= want }) {
		return
	}
	p.mu.Lock()
	p.wake.L = &p.mu
	p.sleepers.Add(1)
	for c.Load() < want {
		p.wake.Wait()
	}
	p.sleepers.Add(-1)
	p.mu.Unlock()
}

// moved wakes the sleepers after a counter has moved. A sleeper counts itself before
// it reads the counter, and the counter is stored before moved reads sleepers, so
// either the sleeper sees the new value or moved sees the sleeper.
func (p *progress) moved() {
	if p.sleepers.Load() > 0 {
		p.mu.Lock()
		p.wake.Broadcast()
		p.mu.Unlock()
	}
}
