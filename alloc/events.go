package alloc

import (
	"fmt"

	"github.com/subletml/sublet/device"
)

// eventState holds the frees deferred until other streams' work completes, and the
// events recorded for them. Guarded by Allocator.mu.
type eventState struct {
	// pending is the number of queued (event, block) pairs, over all queues.
	pending int
	// queues holds one FIFO per stream that events were recorded on.
	queues []*eventQueue
	// spare are completed events kept for reuse (PyTorch's EventPool).
	spare []device.Event
	// deferred are blocks freed during a capture while used on other streams, whose
	// events are recorded once no capture is underway; they stay active until then.
	deferred []*block
}

// eventQueue is the FIFO of one stream: events complete in the order recorded. Guarded
// by Allocator.mu.
type eventQueue struct {
	stream device.Stream
	q      []pendingFree
}

type pendingFree struct {
	ev device.Event
	b  *block
}

// RecordStream marks the allocation at p as used by work ordered on stream s as well:
// when p is freed, its block is reused only after the work queued on s by then has
// completed. Naming the allocation's own stream does nothing, and so does p == 0.
func (a *Allocator) RecordStream(p device.Ptr, s device.Stream) error {
	if p == 0 {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	b := a.ptrs.get(p)
	if b == nil {
		return fmt.Errorf("alloc: RecordStream(%#x, %d) on %s: not a live allocation of this allocator", uintptr(p), s, a.dev.Name())
	}
	if s == b.seg.stream {
		return nil
	}
	for _, u := range b.streamUses {
		if u == s {
			return nil
		}
	}
	b.streamUses = append(b.streamUses, s)
	return nil
}

// streamEvent is an event recorded on a stream.
type streamEvent struct {
	s  device.Stream
	ev device.Event
}

// recordUses records an event on every stream that used b (PyTorch's insert_events,
// first half). A stream on which no event can be recorded is synchronized instead and
// needs none. If that fails too, nothing is changed and the error returned.
func (a *Allocator) recordUses(b *block) ([]streamEvent, error) {
	evs := make([]streamEvent, 0, len(b.streamUses))
	for _, s := range b.streamUses {
		ev, err := a.recordEvent(s)
		if err == nil {
			evs = append(evs, streamEvent{s, ev})
			continue
		}
		if serr := a.dev.SynchronizeStream(s); serr != nil {
			for _, e := range evs {
				a.events.spare = append(a.events.spare, e.ev)
			}
			return nil, fmt.Errorf("recording an event on stream %d: %w; synchronizing it instead: %w", s, err, serr)
		}
	}
	return evs, nil
}

// deferFree queues freed block b behind the events recorded for its other streams; it
// stays active until they have all completed (insert_events, second half).
func (a *Allocator) deferFree(b *block, evs []streamEvent) {
	b.streamUses = b.streamUses[:0]
	for _, e := range evs {
		b.eventCount++
		q := a.eventQueue(e.s)
		q.q = append(q.q, pendingFree{e.ev, b})
		a.events.pending++
	}
	if b.eventCount == 0 {
		a.freeBlock(b)
	}
}

// recordEvent records an event from the pool on stream s.
func (a *Allocator) recordEvent(s device.Stream) (device.Event, error) {
	var ev device.Event
	if n := len(a.events.spare); n > 0 {
		ev = a.events.spare[n-1]
		a.events.spare = a.events.spare[:n-1]
	} else {
		var err error
		if ev, err = a.dev.NewEvent(); err != nil {
			return 0, err
		}
	}
	if err := a.dev.RecordEvent(ev, s); err != nil {
		a.events.spare = append(a.events.spare, ev)
		return 0, err
	}
	return ev, nil
}

func (a *Allocator) eventQueue(s device.Stream) *eventQueue {
	for _, q := range a.events.queues {
		if q.stream == s {
			return q
		}
	}
	q := &eventQueue{stream: s}
	a.events.queues = append(a.events.queues, q)
	return q
}

// processEvents is PyTorch's process_events: on each stream, pop the completed events
// from the head of the queue and free the blocks whose last event that was.
func (a *Allocator) processEvents() error {
	for _, q := range a.events.queues {
		n := 0
		for n < len(q.q) {
			done, err := a.dev.QueryEvent(q.q[n].ev)
			if err != nil {
				a.popEvents(q, n)
				return err
			}
			if !done {
				break
			}
			n++
		}
		a.popEvents(q, n)
	}
	return nil
}

// synchronizeAndFreeEvents is PyTorch's synchronize_and_free_events: wait for every
// pending event and free the blocks.
func (a *Allocator) synchronizeAndFreeEvents() error {
	a.stats.NumSyncAllStreams++
	for _, q := range a.events.queues {
		n := 0
		for n < len(q.q) {
			if err := a.dev.SynchronizeEvent(q.q[n].ev); err != nil {
				a.popEvents(q, n)
				return err
			}
			n++
		}
		a.popEvents(q, n)
	}
	return nil
}

// popEvents retires the first n (completed) events of q.
func (a *Allocator) popEvents(q *eventQueue, n int) {
	for _, pf := range q.q[:n] {
		a.events.spare = append(a.events.spare, pf.ev)
		a.events.pending--
		pf.b.eventCount--
		if pf.b.eventCount == 0 {
			a.freeBlock(pf.b)
		}
	}
	rest := copy(q.q, q.q[n:])
	clear(q.q[rest:])
	q.q = q.q[:rest]
}
