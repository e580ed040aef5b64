// Package profiler is a per-op profiler in the style of torch.profiler with
// profile_memory=True: for each op name (and, optionally, each call site) it counts
// calls, total and self time, bytes allocated and freed, and the op's peak contribution
// to allocated memory; it prints key_averages().table(sort_by=...) and writes a
// Chrome/Perfetto trace with memory counter tracks.
//
//	p, err := profiler.Start(profiler.Options{}, a) // a: the devices' allocators
//	s := tensor.NewScope(tensor.WithOpHook(p)) // its ops (and their backward) are profiled
//	// ... the ops to profile, on tensors of s ...
//	p.Stop()
//	p.Table(os.Stdout, profiler.SortSelfTime, 10, false)
//	p.WriteChromeTrace(f) // open in ui.perfetto.dev or chrome://tracing
//
// OpBegin and OpEnd are the OpHook interface, what a caller times its regions with
// (torch.profiler's record_function); the tensor package does not call them by itself
// yet. Memory is seen through the allocators' history sink (alloc.HistoryOptions.Sink):
// every alloc and free is attributed to the innermost op open at that moment. The
// profiler adds its sink to the history in force (a recorder's sink, a trace ring stay)
// and Stop puts the history back as it was.
//
// Invariants:
//   - Ops nest: OpEnd closes the innermost open op, the one whose token it is given
//     (a mismatch is counted in Mismatched and the op left open). One profiler follows
//     one goroutine's ops at a time, like the scope that holds it.
//   - Self time is total time minus the total time of the ops nested in it; self bytes
//     are those allocated or freed while the op was the innermost.
//   - Peak is the most allocated bytes above the level at the op's start, at any
//     moment while it was open (its nested ops included).
//   - Times are CPU wall time. With Options.DeviceTime, an op on a device that records
//     timed events (a GPU) also gets its device time: the time between events recorded
//     on the default stream when it began and when it ended, which covers the kernels it
//     launched there (ops run on their output's stream, the default one unless a program
//     moves them); and its kernel count, the launches of the device's kernels between
//     its begin and end. Device times are read once Stop has waited for the events;
//     self device time, like self time, leaves out the nested ops'.
package profiler

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/alloc/memsnap"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/kernels/cuda"
	"github.com/subletml/sublet/tensor"
)

// A *Profiler is the tensor.OpHook of the scopes it profiles (tensor.WithOpHook).
var _ tensor.OpHook = (*Profiler)(nil)

// Options configure a Profiler.
type Options struct {
	// Sites records each op's call site (the first frame outside sublet's library
	// packages), for grouping by site; it costs a stack capture per op.
	Sites bool
	// Now is the clock, time since an arbitrary origin; nil uses the monotonic clock.
	// Tests pass a fake one.
	Now func() time.Duration
	// DeviceTime times each op's work on its device where the device records timed
	// events (a GPU), and counts its kernels: two event records per op, read after Stop.
	DeviceTime bool
}

// timer is a device whose events record timestamps (device/cuda's Device).
type timer interface {
	device.Device
	NewTimingEvent() (device.Event, error)
	ElapsedTime(start, end device.Event) (time.Duration, error)
}

// Profiler aggregates ops. Its methods are safe for concurrent use.
type Profiler struct {
	opts Options

	mu sync.Mutex
	// undo take the profiler's sink away from the allocators' history; nil once Stop
	// has. Guarded by mu.
	undo []func()
	// open are the ops begun and not ended, innermost last. Guarded by mu.
	open []*span
	// done are the ended ops in end order. Guarded by mu.
	done []*span
	// next is the next token. Guarded by mu.
	next uint64
	// allocated and reserved follow the allocators' totals since Start. Guarded by mu.
	allocated, reserved int64
	// counters are the memory counter samples. Guarded by mu.
	counters []counter
	// mismatched counts OpEnd calls whose token was not the innermost op's. Guarded by mu.
	mismatched int
	// stopped is set by Stop: nothing more is recorded. Guarded by mu.
	stopped bool
	// refs is each timed device's reference event, recorded at its first op, and the
	// host time then: device timestamps are placed on the host's clock from it. Guarded
	// by mu.
	refs map[timer]ref
	// devErr joins the errors of device timing (an event that could not be made,
	// recorded or read); that op has no device time. Guarded by mu.
	devErr error
}

// ref is a timed device's reference event.
type ref struct {
	ev   device.Event
	host time.Duration
}

// span is one op call.
type span struct {
	token            uint64
	op, site, device string
	start, end       time.Duration
	childTime        time.Duration
	selfAlloc, freed int64
	totalAlloc       int64
	base, peakAbove  int64
	depth            int
	parent           *span
	// On a timed device: the events recorded at begin and end (0: none), the device
	// time between them and in nested ops (set by Stop), the device time of begin from
	// the device's reference, and the kernels launched while open and by nested ops.
	timer                   timer
	ev                      [2]device.Event
	devTime, childDevTime   time.Duration
	devStart                time.Duration
	launches, childLaunches int64
}

type counter struct {
	at                  time.Duration
	allocated, reserved int64
}

// Start profiles the ops that call OpBegin/OpEnd, with memory from allocs (the
// profiler's sink is added to each one's history, which is turned on with stacks of
// live blocks when it is off).
func Start(o Options, allocs ...*alloc.Allocator) (*Profiler, error) {
	if o.Now == nil {
		origin := time.Now()
		o.Now = func() time.Duration { return time.Since(origin) }
	}
	p := &Profiler{opts: o, next: 1}
	for _, a := range allocs {
		st := a.Stats()
		p.allocated += st.AllocatedBytes[alloc.StatAll].Current
		p.reserved += st.ReservedBytes[alloc.StatAll].Current
	}
	for _, a := range allocs {
		undo, err := a.AddHistorySink(p.sink)
		if err != nil {
			p.Stop()
			return nil, err
		}
		p.mu.Lock()
		p.undo = append(p.undo, undo)
		p.mu.Unlock()
	}
	return p, nil
}

// Stop ends profiling and puts the allocators' history back as it was before Start.
// Ops still open are dropped. With DeviceTime it waits for the ops' device work and
// reads their device times (Err reports what could not be read). A second Stop does
// nothing.
func (p *Profiler) Stop() {
	p.mu.Lock()
	first := !p.stopped
	p.stopped = true
	p.open = nil
	undo := p.undo
	p.undo = nil
	p.mu.Unlock()
	// Outside mu: an undo takes the allocator's lock, under which the sink takes mu.
	for _, u := range undo {
		u()
	}
	if first {
		p.readDeviceTimes()
	}
}

// readDeviceTimes waits for every op's end event and sets the device times, then
// destroys the events.
func (p *Profiler) readDeviceTimes() {
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	elapsed := func(t timer, a, b device.Event) time.Duration {
		if err := t.SynchronizeEvent(b); err != nil {
			errs = append(errs, err)
			return 0
		}
		d, err := t.ElapsedTime(a, b)
		if err != nil {
			errs = append(errs, err)
		}
		return d
	}
	for _, s := range p.done {
		if s.timer == nil || s.ev[0] == 0 || s.ev[1] == 0 {
			continue
		}
		s.devTime = elapsed(s.timer, s.ev[0], s.ev[1])
		if r, ok := p.refs[s.timer]; ok {
			s.devStart = r.host + elapsed(s.timer, r.ev, s.ev[0])
		}
	}
	for _, s := range p.done {
		if s.parent != nil {
			s.parent.childDevTime += s.devTime
		}
		for _, e := range s.ev {
			if e != 0 {
				errs = append(errs, s.timer.DestroyEvent(e))
			}
		}
		s.ev = [2]device.Event{}
	}
	for t, r := range p.refs {
		errs = append(errs, t.DestroyEvent(r.ev))
	}
	p.refs = nil
	p.devErr = errors.Join(append([]error{p.devErr}, errs...)...)
}

// Err returns what went wrong timing ops on their devices (nil when nothing did, or
// without DeviceTime).
func (p *Profiler) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.devErr
}

// OpBegin starts an op on dev and returns the token its OpEnd passes back.
func (p *Profiler) OpBegin(op string, dev device.Device) uint64 {
	var site string
	if p.opts.Sites {
		var pcs [24]uintptr
		n := runtime.Callers(2, pcs[:])
		var frames []alloc.Frame
		fs := runtime.CallersFrames(pcs[:n])
		for {
			f, more := fs.Next()
			frames = append(frames, alloc.Frame{Name: f.Function, Filename: f.File, Line: f.Line})
			if !more {
				break
			}
		}
		site = memsnap.SiteLabel(frames, "")
	}
	var t timer
	var ev device.Event
	var launches int64
	if p.opts.DeviceTime && dev != nil {
		if tt, ok := device.Innermost(dev).(timer); ok {
			p.reference(tt)
			t, ev = tt, p.record(tt)
			launches = cuda.Launches(dev)
		}
	}
	now := p.opts.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return 0
	}
	s := &span{token: p.next, op: op, site: site, start: now, base: p.allocated, depth: len(p.open), timer: t, launches: launches}
	s.ev[0] = ev
	if dev != nil {
		s.device = dev.Name()
	}
	if n := len(p.open); n > 0 {
		s.parent = p.open[n-1]
	}
	p.next++
	p.open = append(p.open, s)
	return s.token
}

// record makes a timing event on t and records it on the default stream; 0 (the
// error kept) when it cannot.
func (p *Profiler) record(t timer) device.Event {
	ev, err := t.NewTimingEvent()
	if err == nil {
		if err = t.RecordEvent(ev, 0); err != nil {
			err = errors.Join(err, t.DestroyEvent(ev))
		}
	}
	if err != nil {
		p.mu.Lock()
		p.devErr = errors.Join(p.devErr, fmt.Errorf("profiler: timing on %s: %w", t.Name(), err))
		p.mu.Unlock()
		return 0
	}
	return ev
}

// reference records t's reference event, once: the first op on t is timed from it.
func (p *Profiler) reference(t timer) {
	p.mu.Lock()
	_, have := p.refs[t]
	p.mu.Unlock()
	if have {
		return
	}
	r := ref{ev: p.record(t), host: p.opts.Now()}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, have := p.refs[t]; have || r.ev == 0 { // another goroutine's came first
		if r.ev != 0 {
			p.devErr = errors.Join(p.devErr, t.DestroyEvent(r.ev))
		}
		return
	}
	if p.refs == nil {
		p.refs = map[timer]ref{}
	}
	p.refs[t] = r
}

// OpEnd ends the op of token.
func (p *Profiler) OpEnd(token uint64) {
	now := p.opts.Now()
	p.mu.Lock()
	n := len(p.open)
	if n == 0 || p.open[n-1].token != token {
		if !p.stopped && token != 0 {
			p.mismatched++
		}
		p.mu.Unlock()
		return
	}
	s := p.open[n-1]
	p.open = p.open[:n-1]
	p.mu.Unlock()
	if s.timer != nil { // a driver call: outside mu, which the allocator's sink takes
		s.ev[1] = p.record(s.timer)
		s.launches = cuda.Launches(s.timer) - s.launches
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	s.end = now
	if n > 1 {
		parent := p.open[n-2]
		parent.childTime += s.end - s.start
		parent.totalAlloc += s.totalAlloc
		parent.peakAbove = max(parent.peakAbove, s.base+s.peakAbove-parent.base)
		parent.childLaunches += s.launches
	}
	p.done = append(p.done, s)
}

// Mismatched counts OpEnd calls that did not close the innermost op.
func (p *Profiler) Mismatched() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mismatched
}

// sink sees every allocator event (under that allocator's lock).
func (p *Profiler) sink(e alloc.HistoryEvent) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return
	}
	var inner *span
	if n := len(p.open); n > 0 {
		inner = p.open[n-1]
	}
	switch e.Action {
	case alloc.ActionAlloc:
		p.allocated += e.BlockSize
		if inner != nil {
			inner.selfAlloc += e.BlockSize
			inner.totalAlloc += e.BlockSize
			inner.peakAbove = max(inner.peakAbove, p.allocated-inner.base)
		}
	case alloc.ActionFreeRequested:
		p.allocated -= e.BlockSize
		if inner != nil {
			inner.freed += e.BlockSize
		}
	case alloc.ActionSegmentAlloc, alloc.ActionSegmentMap:
		p.reserved += e.Size
	case alloc.ActionSegmentFree, alloc.ActionSegmentUnmap:
		p.reserved -= e.Size
	default:
		return
	}
	p.counters = append(p.counters, counter{at: p.opts.Now(), allocated: p.allocated, reserved: p.reserved})
}
