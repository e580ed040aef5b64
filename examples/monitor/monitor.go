package main

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/examples/internal/demo"
)

// sample is the allocator at one moment, and the training step then.
type sample struct {
	at   time.Duration // since the monitor started
	step int64
	mem  demo.Memory
}

// alert is a sample over the threshold, with the growth per step since the last sample
// of an earlier step.
type alert struct {
	sample
	threshold, perStep int64
}

// monitor samples an allocator's statistics, from its own goroutine (run) or at the
// caller's moments (take), and raises an alert the first time allocated memory goes
// over a threshold, and again after it came back under.
type monitor struct {
	// Set by newMonitor, never changed.
	a         *alloc.Allocator
	threshold int64
	started   time.Time
	// step is the training loop's current step, set by the loop.
	step *atomic.Int64
	// alerts receives each alert; it is buffered and never blocks take (an alert no
	// one received in time is dropped from the channel, not from alerted).
	alerts chan alert

	mu sync.Mutex
	// samples and alerted are what take recorded; over is whether the last sample was
	// over the threshold. Guarded by mu.
	samples []sample
	alerted []alert
	over    bool
}

func newMonitor(a *alloc.Allocator, threshold int64, step *atomic.Int64) *monitor {
	return &monitor{a: a, threshold: threshold, started: time.Now(), step: step, alerts: make(chan alert, 16)}
}

// take samples the allocator now.
func (m *monitor) take() {
	s := sample{at: time.Since(m.started), step: m.step.Load(), mem: demo.Read(m.a)}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.samples = append(m.samples, s)
	over := s.mem.Allocated > m.threshold
	if over && !m.over {
		al := alert{sample: s, threshold: m.threshold}
		for i := len(m.samples) - 2; i >= 0; i-- {
			if p := m.samples[i]; p.step < s.step {
				al.perStep = (s.mem.Allocated - p.mem.Allocated) / (s.step - p.step)
				break
			}
		}
		m.alerted = append(m.alerted, al)
		select {
		case m.alerts <- al:
		default:
		}
	}
	m.over = over
}

// run samples every interval until ctx is done, then once more.
func (m *monitor) run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			m.take()
		case <-ctx.Done():
			m.take()
			return
		}
	}
}

// recorded returns copies of the samples and alerts so far.
func (m *monitor) recorded() ([]sample, []alert) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]sample(nil), m.samples...), append([]alert(nil), m.alerted...)
}
