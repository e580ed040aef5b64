package cpu

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// parallelFor calls fn on consecutive pieces of [0, n) of at least grain elements, one
// piece per goroutine, at most GOMAXPROCS pieces; the calling goroutine runs the first
// piece, so work below 2·grain never leaves it. fn must not depend on how [0, n) is
// split for its results to be deterministic.
func parallelFor(n, grain int, fn func(lo, hi int)) {
	p := min(runtime.GOMAXPROCS(0), n/max(grain, 1))
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
