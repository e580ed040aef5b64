package pinned

import "time"

// pollInterval is how often the background goroutine of pinned_use_background_threads
// processes events: PyTorch's thread sleeps 100 µs between rounds.
const pollInterval = 100 * time.Microsecond

// poller is the background goroutine of pinned_use_background_threads.
type poller struct {
	// stop is closed by Close to end the goroutine; done is closed by the goroutine as
	// it ends. Both immutable.
	stop, done chan struct{}
}

// startPolling starts the goroutine that retires parked blocks whose events have
// completed every interval, in Alloc's stead; Close stops it.
func (a *Allocator) startPolling(every time.Duration) {
	a.poller = &poller{stop: make(chan struct{}), done: make(chan struct{})}
	a.polling.Store(true)
	go a.pollEvents(a.poller, every)
}

// pollEvents is the goroutine's body. An error waits in pollErr for the next Alloc or
// Close to report (the first one, while none is waiting).
func (a *Allocator) pollEvents(p *poller, every time.Duration) {
	defer close(p.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			if err := a.processEvents(false); err != nil {
				a.pollErr.CompareAndSwap(nil, &err)
			}
		}
	}
}

// stopPolling ends the goroutine, if any, and waits for it; afterwards Alloc processes
// events itself again.
func (a *Allocator) stopPolling() {
	if a.poller == nil {
		return
	}
	close(a.poller.stop)
	<-a.poller.done
	a.poller = nil
	a.polling.Store(false)
}

// takePollErr returns the error the goroutine met since the last call, if any. It only
// reads pollErr when there is none, so that concurrent Allocs do not contend for it.
func (a *Allocator) takePollErr() error {
	if a.pollErr.Load() == nil {
		return nil
	}
	if p := a.pollErr.Swap(nil); p != nil {
		return *p
	}
	return nil
}
