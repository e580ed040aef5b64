// Package recorder records a running program's allocations as the JSONL trace that
// package alloc/replay and `sublet replay` read, so the workload can be replayed under
// other allocator settings ("would expandable segments have avoided my OOM?"):
//
//	r, err := recorder.Start(a)      // a is the device's *alloc.Allocator
//	// ... run the workload ...
//	err = r.WriteFile("run.jsonl.gz") // then: sublet replay -trace run.jsonl.gz -conf expandable_segments:True
//
// Invariants of what a Recorder holds:
//   - Every Alloc since Start is an alloc event with a new id and the lifetime hint of
//     its Tag (so that a replay under the planned policy places it as the program's
//     allocator did); its Free is a free event of that id. An allocation that failed with out of memory is an alloc event whose
//     id is never freed, so that a replay asks for it too.
//   - Blocks allocated before Start are not in the trace; their frees are left out.
//   - Device streams become trace streams numbered in the order first seen, 0 staying
//     the default stream. EmptyCache calls are empty_cache events.
//   - The events always form a valid trace (replay.Validate).
package recorder

import (
	"fmt"
	"sync"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/alloc/replay"
	"github.com/subletml/sublet/device"
)

// Recorder collects one allocator's events. Its methods are safe for concurrent use.
type Recorder struct {
	// undo puts the allocator's history back as it was before Start.
	undo func()

	mu sync.Mutex
	// events is the trace so far. Guarded by mu.
	events []replay.Event
	// ids maps each live allocation made since Start to its trace id. Guarded by mu.
	ids map[device.Ptr]int64
	// next is the next trace id. Guarded by mu.
	next int64
	// streams maps device streams to trace streams. Guarded by mu.
	streams map[device.Stream]int64
	// stopped is set by Stop. Guarded by mu.
	stopped bool
}

// Start records a's allocations from now on. It adds the recorder's sink to a's memory
// history (alloc.Allocator.AddHistorySink: what the program records stays); Stop puts
// the history back as it was.
func Start(a *alloc.Allocator) (*Recorder, error) {
	r := &Recorder{ids: make(map[device.Ptr]int64), streams: map[device.Stream]int64{0: 0}}
	undo, err := a.AddHistorySink(r.sink)
	if err != nil {
		return nil, fmt.Errorf("recorder.Start: %w", err)
	}
	r.undo = undo
	return r, nil
}

func (r *Recorder) sink(e alloc.HistoryEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return
	}
	switch e.Action {
	case alloc.ActionAlloc, alloc.ActionOOM:
		if e.Action == alloc.ActionAlloc {
			r.ids[e.Addr] = r.next
		}
		r.events = append(r.events, replay.Event{Op: replay.OpAlloc, ID: r.next, Size: e.Size, Stream: r.stream(e.Stream), Lifetime: e.Tag.Lifetime})
		r.next++
	case alloc.ActionFreeRequested:
		if id, ok := r.ids[e.Addr]; ok {
			delete(r.ids, e.Addr)
			r.events = append(r.events, replay.Event{Op: replay.OpFree, ID: id})
		}
	case alloc.ActionEmptyCache:
		r.events = append(r.events, replay.Event{Op: replay.OpEmptyCache})
	}
}

func (r *Recorder) stream(s device.Stream) int64 {
	n, ok := r.streams[s]
	if !ok {
		n = int64(len(r.streams))
		r.streams[s] = n
	}
	return n
}

// Stop ends the recording and puts the allocator's history back as it was. A second
// Stop does nothing.
func (r *Recorder) Stop() {
	r.mu.Lock()
	undo := r.undo
	r.stopped, r.undo = true, nil
	r.mu.Unlock()
	if undo != nil {
		undo()
	}
}

// Events returns a copy of the trace so far.
func (r *Recorder) Events() []replay.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]replay.Event(nil), r.events...)
}

// WriteFile writes the trace so far to path (gzip-compressed when it ends in ".gz").
func (r *Recorder) WriteFile(path string) error {
	return replay.WriteFile(path, r.Events())
}
