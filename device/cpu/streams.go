package cpu

import (
	"fmt"

	"github.com/subletml/sublet/device"
)

// CPU work is synchronous, so streams order nothing and every event is complete once
// recorded; the handles are checked all the same, so misuse shows on the CPU as it would
// on a GPU.

// checkStreamLocked reports an unknown stream. Caller holds streamMu.
func (d *Device) checkStreamLocked(op string, s device.Stream) error {
	if !d.streams[s] {
		return fmt.Errorf("cpu: %s: unknown stream %d (destroyed, or not from this device's NewStream)", op, s)
	}
	return nil
}

// checkEventLocked reports an unknown event. Caller holds streamMu.
func (d *Device) checkEventLocked(op string, e device.Event) error {
	if !d.events[e] {
		return fmt.Errorf("cpu: %s: unknown event %d (destroyed, or not from this device's NewEvent)", op, e)
	}
	return nil
}

func (d *Device) checkStream(op string, s device.Stream) error {
	d.streamMu.Lock()
	defer d.streamMu.Unlock()
	return d.checkStreamLocked(op, s)
}

func (d *Device) checkEvent(op string, e device.Event) error {
	d.streamMu.Lock()
	defer d.streamMu.Unlock()
	return d.checkEventLocked(op, e)
}

// NewStream creates a stream; handles are never reused.
func (d *Device) NewStream() (device.Stream, error) {
	d.streamMu.Lock()
	defer d.streamMu.Unlock()
	d.lastStream++
	d.streams[d.lastStream] = true
	return d.lastStream, nil
}

// DestroyStream destroys s.
func (d *Device) DestroyStream(s device.Stream) error {
	d.streamMu.Lock()
	defer d.streamMu.Unlock()
	if s == 0 {
		return fmt.Errorf("cpu: DestroyStream: the default stream 0 cannot be destroyed")
	}
	if err := d.checkStreamLocked("DestroyStream", s); err != nil {
		return err
	}
	delete(d.streams, s)
	return nil
}

// SynchronizeStream returns at once: nothing on s is pending.
func (d *Device) SynchronizeStream(s device.Stream) error {
	return d.checkStream("SynchronizeStream", s)
}

// Synchronize returns at once: nothing is pending.
func (d *Device) Synchronize() error { return nil }

// NewEvent creates an event; handles are never reused.
func (d *Device) NewEvent() (device.Event, error) {
	d.streamMu.Lock()
	defer d.streamMu.Unlock()
	d.lastEvent++
	d.events[d.lastEvent] = true
	return d.lastEvent, nil
}

// RecordEvent checks e and s; the event is complete at once.
func (d *Device) RecordEvent(e device.Event, s device.Stream) error {
	d.streamMu.Lock()
	defer d.streamMu.Unlock()
	if err := d.checkEventLocked("RecordEvent", e); err != nil {
		return err
	}
	return d.checkStreamLocked("RecordEvent", s)
}

// QueryEvent reports every known event as complete.
func (d *Device) QueryEvent(e device.Event) (bool, error) {
	if err := d.checkEvent("QueryEvent", e); err != nil {
		return false, err
	}
	return true, nil
}

// SynchronizeEvent returns at once: every event is complete.
func (d *Device) SynchronizeEvent(e device.Event) error {
	return d.checkEvent("SynchronizeEvent", e)
}

// DestroyEvent destroys e.
func (d *Device) DestroyEvent(e device.Event) error {
	d.streamMu.Lock()
	defer d.streamMu.Unlock()
	if err := d.checkEventLocked("DestroyEvent", e); err != nil {
		return err
	}
	delete(d.events, e)
	return nil
}
