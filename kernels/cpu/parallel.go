package cpu

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// workers is how many pieces parallelFor cuts n elements into for a grain: at most
// GOMAXPROCS, 1 below 2·grain. Small work is decided without asking the runtime:
// runtime.GOMAXPROCS takes the scheduler's lock, which every goroutine shares.
func workers(n, grain int) int {
	grain = max(grain, 1)
	if n < 2*grain {
		return 1
	}
	return min(runtime.GOMAXPROCS(0), n/grain)
}

// parallelFor calls fn on consecutive pieces of [0, n) of at least grain elements, one
// piece per goroutine, at most GOMAXPROCS pieces; the calling goroutine runs the first
// piece, so work below 2·grain never leaves it. fn must not depend on how [0, n) is
// split for its results to be deterministic.
//
// fn escapes (the goroutines hold it), and with it what it captures: a kernel that must
// not allocate when its work stays on the calling goroutine uses forRange.
func parallelFor(n, grain int, fn func(lo, hi int)) {
	p := workers(n, grain)
	if p <= 1 {
		if n > 0 {
			fn(0, n)
		}
		return
	}
	var wg sync.WaitGroup
	for i := 1; i < p; i++ {
		lo, hi := n*i/p, n*(i+1)/p
		wg.Go(func() { fn(lo, hi) })
	}
	fn(0, n/p)
	wg.Wait()
}

// ranged is the state of a kernel that forRange cuts into pieces: run computes the
// elements [lo, hi). It has a value receiver: forRange holds no pointer to the state.
type ranged interface{ run(lo, hi int) }

// forRange is parallelFor over the pieces of a kernel whose state is s: work that stays
// on the calling goroutine (below 2·grain, or GOMAXPROCS 1) allocates nothing, where a
// closure handed to parallelFor is always allocated, with what it captures (and a
// function value in generic code carries its dictionary). Pieces on other goroutines
// copy s from one copy on the heap.
func forRange[S ranged](n, grain int, s S) {
	if workers(n, grain) <= 1 {
		if n > 0 {
			s.run(0, n)
		}
		return
	}
	h := new(S)
	*h = s
	parallelFor(n, grain, func(lo, hi int) { (*h).run(lo, hi) })
}

// parallelTasks calls fn(t) once for every t in [0, tasks), handing tasks to at most
// GOMAXPROCS goroutines as they finish earlier ones (the calling goroutine among
// them). Results are deterministic when each task writes only its own outputs.
func parallelTasks(tasks int, fn func(t int)) {
	p := min(runtime.GOMAXPROCS(0), tasks)
	if p <= 1 {
		for t := range tasks {
			fn(t)
		}
		return
	}
	var next atomic.Int64
	work := func() {
		for {
			t := int(next.Add(1) - 1)
			if t >= tasks {
				return
			}
			fn(t)
		}
	}
	var wg sync.WaitGroup
	for range p - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
}
