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
//   - Times are CPU wall time; device time of asynchronous kernels is not measured.
package profiler

import (
	"runtime"
	"sync"
	"time"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/alloc/memsnap"
	"github.com/subletml/sublet/device"
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
// Ops still open are dropped. A second Stop does nothing.
func (p *Profiler) Stop() {
	p.mu.Lock()
	p.stopped = true
	p.open = nil
	undo := p.undo
	p.undo = nil
	p.mu.Unlock()
	// Outside mu: an undo takes the allocator's lock, under which the sink takes mu.
	for _, u := range undo {
		u()
	}
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
	now := p.opts.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return 0
	}
	s := &span{token: p.next, op: op, site: site, start: now, base: p.allocated, depth: len(p.open)}
	if dev != nil {
		s.device = dev.Name()
	}
	p.next++
	p.open = append(p.open, s)
	return s.token
}

// OpEnd ends the op of token.
func (p *Profiler) OpEnd(token uint64) {
	now := p.opts.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.open)
	if n == 0 || p.open[n-1].token != token {
		if !p.stopped && token != 0 {
			p.mismatched++
		}
		return
	}
	s := p.open[n-1]
	p.open = p.open[:n-1]
	s.end = now
	if n > 1 {
		parent := p.open[n-2]
		parent.childTime += s.end - s.start
		parent.totalAlloc += s.totalAlloc
		parent.peakAbove = max(parent.peakAbove, s.base+s.peakAbove-parent.base)
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
