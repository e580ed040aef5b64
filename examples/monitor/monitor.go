package main

import (
	"context"
	"sync"
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

// alert is a sample over the threshold, with the growth of the last step the loop
// completed before it (0 before two had).
type alert struct {
	sample
	threshold, perStep int64
}

// progress is what the training loop tells the monitor: the step under way, and the
// bytes allocated at the end of each step it completed. Between steps a leak shows
// alone; a sample within a step also counts the step's activations, which come and go.
type progress struct {
	mu sync.Mutex
	// step is the step under way; ended[i] the bytes allocated at the end of step i+1.
	// Guarded by mu.
	step  int64
	ended []int64
}

// begin says step i has started.
func (p *progress) begin(i int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.step = i
}

// end says the step under way has ended with allocated bytes allocated.
func (p *progress) end(allocated int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ended = append(p.ended, allocated)
}

// now returns the step under way and the growth of the last completed step.
func (p *progress) now() (step, growth int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.ended); n >= 2 {
		growth = p.ended[n-1] - p.ended[n-2]
	}
	return p.step, growth
}

// monitor samples an allocator's statistics, from its own goroutine (run) or at the
// caller's moments (take), and raises an alert the first time allocated memory goes
// over a threshold, and again after it came back under.
type monitor struct {
	// Set by newMonitor, never changed.
	a         *alloc.Allocator
	threshold int64
	started   time.Time
	// loop is what the training loop tells of its progress.
	loop *progress
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

func newMonitor(a *alloc.Allocator, threshold int64, loop *progress) *monitor {
	return &monitor{a: a, threshold: threshold, started: time.Now(), loop: loop, alerts: make(chan alert, 16)}
}

// take samples the allocator now.
func (m *monitor) take() {
	step, growth := m.loop.now()
	s := sample{at: time.Since(m.started), step: step, mem: demo.Read(m.a)}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.samples = append(m.samples, s)
	over := s.mem.Allocated > m.threshold
	if over && !m.over {
		al := alert{sample: s, threshold: m.threshold, perStep: growth}
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
