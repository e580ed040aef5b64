package main

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
)

// concurrentWorkers are the goroutine counts the concurrent experiment runs.
var concurrentWorkers = []int{1, 4, 16, 64}

// runConcurrent runs churn in many goroutines on one allocator for the measuring time,
// each on its own slots; odd goroutines use a stream of their own. In the "memset" case
// every new block is also set on the goroutine's stream, a device call from whatever OS
// thread the goroutine is on (on a GPU a context left to chance fails there). It reports
// allocator operations per second and the number of errors, which must be 0.
func runConcurrent(b *bench, dev device.Device) error {
	for _, touch := range []bool{false, true} {
		for _, workers := range concurrentWorkers {
			ops, elapsed, errs, first := concurrentRun(dev, workers, touch, b.per)
			name := fmt.Sprintf("%d goroutines", workers)
			if touch {
				name += " + memset"
			}
			note := fmt.Sprintf("errors %d", errs)
			if first != nil {
				note += ": " + first.Error()
			}
			b.report(Result{Experiment: "concurrent", Device: dev.Name(), Case: name,
				Value: float64(ops) / elapsed.Seconds(), Unit: "ops/s", N: ops, Note: note})
			if first != nil {
				return fmt.Errorf("%s: %d errors, the first: %w", name, errs, first)
			}
		}
	}
	return nil
}

// concurrentRun is one case of runConcurrent. It returns the operations done (allocs
// and frees), the time taken, the number of errors and the first.
func concurrentRun(dev device.Device, workers int, touch bool, per time.Duration) (int64, time.Duration, int64, error) {
	a, err := newAllocator(dev)
	if err != nil {
		return 0, 0, 1, err
	}
	var ops, nerr atomic.Int64
	var firstMu sync.Mutex
	var first error
	fail := func(err error) {
		nerr.Add(1)
		firstMu.Lock()
		if first == nil {
			first = err
		}
		firstMu.Unlock()
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	start := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := churnWorker(dev, a, w, touch, &stop, &ops); err != nil {
				fail(fmt.Errorf("goroutine %d: %w", w, err))
			}
		}()
	}
	time.Sleep(per)
	stop.Store(true)
	wg.Wait()
	elapsed := time.Since(start)
	if err := drain(a); err != nil {
		fail(err)
	}
	return ops.Load(), elapsed, nerr.Load(), first
}

// churnWorker churns until stop is set, counting its operations into ops.
func churnWorker(dev device.Device, a *alloc.Allocator, id int, touch bool, stop *atomic.Bool, ops *atomic.Int64) (err error) {
	c := &churn{a: a, x: 42 + uint64(id)}
	if id%2 == 1 {
		if c.stream, err = dev.NewStream(); err != nil {
			return err
		}
		defer func() { err = errors.Join(err, dev.DestroyStream(c.stream)) }()
	}
	if touch {
		c.touch = func(p device.Ptr, size int64) error { return dev.Memset(p, byte(id), size, c.stream) }
	}
	defer func() { err = errors.Join(err, c.drain()) }()
	// Every goroutine does at least one batch, also one scheduled only after stop was
	// set on a busy machine: no case reports 0 operations for lack of a start.
	var n int64
	for done := false; !done; done = stop.Load() {
		for range 64 {
			if err := c.step(); err != nil {
				ops.Add(n)
				return err
			}
		}
		n += 64
		if n%(64*64) == 0 {
			runtime.Gosched() // let the scheduler move goroutines between threads
		}
	}
	ops.Add(n)
	if touch {
		return dev.SynchronizeStream(c.stream)
	}
	return nil
}
