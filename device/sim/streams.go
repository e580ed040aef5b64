package sim

import (
	"fmt"

	"github.com/subletml/sublet/device"
)

// The simulated device runs nothing asynchronously: copies and memsets take effect when
// called. What it models is completion: an event recorded on a stream completes at once,
// unless the stream is held (HoldStream), in which case it stays pending until the stream
// is released or synchronized, or the event itself is synchronized. That is what lets the
// caching allocator's deferred frees (record_stream, then events) be tested.

// stream is the state of one stream. Guarded by Device.streamMu.
type stream struct {
	held bool
	// recorded numbers the events recorded on the stream; completed is the number of
	// the last recorded event that has completed (completion is in order).
	recorded, completed uint64
}

// event is the state of one event. Guarded by Device.streamMu.
type event struct {
	// s is the stream of the last record (nil: never recorded), seq its number there.
	s   *stream
	seq uint64
}

func (e *event) done() bool { return e.s == nil || e.s.completed >= e.seq }

// streamLocked returns the state of s. Caller holds streamMu.
func (d *Device) streamLocked(op string, s device.Stream) (*stream, error) {
	st, ok := d.streams[s]
	if !ok {
		return nil, fmt.Errorf("sim: %s: unknown stream %d (destroyed, or not from this device's NewStream)", op, s)
	}
	return st, nil
}

// eventLocked returns the state of e. Caller holds streamMu.
func (d *Device) eventLocked(op string, e device.Event) (*event, error) {
	ev, ok := d.events[e]
	if !ok {
		return nil, fmt.Errorf("sim: %s: unknown event %d (destroyed, or not from this device's NewEvent)", op, e)
	}
	return ev, nil
}

// checkStream reports an unknown stream.
func (d *Device) checkStream(op string, s device.Stream) error {
	d.streamMu.Lock()
	defer d.streamMu.Unlock()
	_, err := d.streamLocked(op, s)
	return err
}

// NewStream creates a stream; handles are never reused.
func (d *Device) NewStream() (device.Stream, error) {
	d.streamMu.Lock()
	defer d.streamMu.Unlock()
	d.lastStream++
	d.streams[d.lastStream] = &stream{}
	return d.lastStream, nil
}

// DestroyStream destroys s; its pending events complete, as work on a destroyed CUDA
// stream still runs to the end.
func (d *Device) DestroyStream(s device.Stream) error {
	d.streamMu.Lock()
	defer d.streamMu.Unlock()
	if s == 0 {
		return fmt.Errorf("sim: DestroyStream: the default stream 0 cannot be destroyed")
	}
	st, err := d.streamLocked("DestroyStream", s)
	if err != nil {
		return err
	}
	st.completed = st.recorded
	delete(d.streams, s)
	return nil
}

// HoldStream makes events recorded on s from now on stay pending until ReleaseStream(s),
// a synchronization of s or of the device, or SynchronizeEvent of the event.
func (d *Device) HoldStream(s device.Stream) error {
	d.streamMu.Lock()
	defer d.streamMu.Unlock()
	st, err := d.streamLocked("HoldStream", s)
	if err != nil {
		return err
	}
	st.held = true
	return nil
}

// ReleaseStream completes the events pending on s and ends HoldStream.
func (d *Device) ReleaseStream(s device.Stream) error {
	d.streamMu.Lock()
	defer d.streamMu.Unlock()
	st, err := d.streamLocked("ReleaseStream", s)
	if err != nil {
		return err
	}
	st.held = false
	st.completed = st.recorded
	return nil
}

// SynchronizeStream completes the events pending on s; a held stream stays held.
func (d *Device) SynchronizeStream(s device.Stream) error {
	d.streamMu.Lock()
	defer d.streamMu.Unlock()
	st, err := d.streamLocked("SynchronizeStream", s)
	if err != nil {
		return err
	}
	st.completed = st.recorded
	d.syncs.StreamSyncs++
	return nil
}

// Synchronize completes the events pending on every stream.
func (d *Device) Synchronize() error {
	d.streamMu.Lock()
	defer d.streamMu.Unlock()
	for _, st := range d.streams {
		st.completed = st.recorded
	}
	d.syncs.DeviceSyncs++
	return nil
}

// NewEvent creates an event; handles are never reused. An event never recorded counts as
// completed.
func (d *Device) NewEvent() (device.Event, error) {
	d.streamMu.Lock()
	defer d.streamMu.Unlock()
	d.lastEvent++
	d.events[d.lastEvent] = &event{}
	return d.lastEvent, nil
}

// RecordEvent records e at the current end of s: completed at once unless s is held.
func (d *Device) RecordEvent(e device.Event, s device.Stream) error {
	d.streamMu.Lock()
	defer d.streamMu.Unlock()
	ev, err := d.eventLocked("RecordEvent", e)
	if err != nil {
		return err
	}
	st, err := d.streamLocked("RecordEvent", s)
	if err != nil {
		return err
	}
	st.recorded++
	if !st.held {
		st.completed = st.recorded
	}
	ev.s, ev.seq = st, st.recorded
	return nil
}

// QueryEvent reports whether e's last record has completed.
func (d *Device) QueryEvent(e device.Event) (bool, error) {
	d.streamMu.Lock()
	defer d.streamMu.Unlock()
	ev, err := d.eventLocked("QueryEvent", e)
	if err != nil {
		return false, err
	}
	d.syncs.EventQueries++
	return ev.done(), nil
}

// SynchronizeEvent completes e's last record and everything recorded before it on its
// stream.
func (d *Device) SynchronizeEvent(e device.Event) error {
	d.streamMu.Lock()
	defer d.streamMu.Unlock()
	ev, err := d.eventLocked("SynchronizeEvent", e)
	if err != nil {
		return err
	}
	if ev.s != nil {
		ev.s.completed = max(ev.s.completed, ev.seq)
	}
	d.syncs.EventSyncs++
	return nil
}

// DestroyEvent destroys e.
func (d *Device) DestroyEvent(e device.Event) error {
	d.streamMu.Lock()
	defer d.streamMu.Unlock()
	if _, err := d.eventLocked("DestroyEvent", e); err != nil {
		return err
	}
	delete(d.events, e)
	return nil
}
