package cuda

import (
	"fmt"
	"time"
	"unsafe"

	"github.com/subletml/sublet/device"
)

// live checks that s (0, the default stream, always is) and e (0: none to check) are
// live handles of this Device, before op hands them to the driver, which would
// dereference a stale one.
func (d *Device) live(op string, s device.Stream, e device.Event) error {
	if s == 0 && e == 0 { // every launch on the default stream: nothing to look up
		return nil
	}
	d.hmu.RLock()
	_, sOK := d.streams[s]
	_, eOK := d.events[e]
	d.hmu.RUnlock()
	switch {
	case s != 0 && !sOK:
		return fmt.Errorf("cuda: %s: %s: stream %#x is not a live stream of this device", d.name, op, uintptr(s))
	case e != 0 && !eOK:
		return fmt.Errorf("cuda: %s: %s: event %#x is not a live event of this device", d.name, op, uintptr(e))
	}
	return nil
}

// NewStream creates a stream that does not synchronize with the default stream
// (CU_STREAM_NON_BLOCKING), as PyTorch's side streams do: ordering between streams comes
// only from events.
func (d *Device) NewStream() (device.Stream, error) {
	var s device.Stream
	if r := d.call(d.drv.cuStreamCreate, uintptr(unsafe.Pointer(&s)), streamNonBlocking); r != success {
		return 0, d.drv.errorf(r, "cuStreamCreate(%s, non-blocking)", d.name)
	}
	d.hmu.Lock()
	d.streams[s] = struct{}{}
	d.hmu.Unlock()
	return s, nil
}

// DestroyStream destroys a stream from NewStream. Work already ordered on it still runs.
func (d *Device) DestroyStream(s device.Stream) error {
	if s == 0 {
		return fmt.Errorf("cuda: %s: DestroyStream(0): the default stream cannot be destroyed", d.name)
	}
	return destroy(d, d.streams, s, "DestroyStream", "stream", d.drv.cuStreamDestroy, "cuStreamDestroy")
}

// SynchronizeStream waits until all work ordered on s has completed.
func (d *Device) SynchronizeStream(s device.Stream) error {
	if err := d.live("SynchronizeStream", s, 0); err != nil {
		return err
	}
	if r := d.call(d.drv.cuStreamSynchronize, uintptr(s)); r != success {
		return d.drv.errorf(r, "cuStreamSynchronize(%#x)", uintptr(s))
	}
	return nil
}

// StreamWaitEvent makes work ordered on s after this call wait for e's last record.
func (d *Device) StreamWaitEvent(s device.Stream, e device.Event) error {
	if err := d.live("StreamWaitEvent", s, e); err != nil {
		return err
	}
	if r := d.call(d.drv.cuStreamWaitEvent, uintptr(s), uintptr(e), 0); r != success {
		return d.drv.errorf(r, "cuStreamWaitEvent(%#x, %#x)", uintptr(s), uintptr(e))
	}
	return nil
}

// NewEvent creates an event without timing (CU_EVENT_DISABLE_TIMING), the cheap kind the
// allocator records to know when a stream has finished with a block.
func (d *Device) NewEvent() (device.Event, error) { return d.newEvent(eventDisableTiming, "no timing") }

// NewTimingEvent creates an event that records a timestamp, for ElapsedTime.
func (d *Device) NewTimingEvent() (device.Event, error) { return d.newEvent(eventDefault, "timing") }

func (d *Device) newEvent(flags uintptr, kind string) (device.Event, error) {
	var e device.Event
	if r := d.call(d.drv.cuEventCreate, uintptr(unsafe.Pointer(&e)), flags); r != success {
		return 0, d.drv.errorf(r, "cuEventCreate(%s, %s)", d.name, kind)
	}
	d.hmu.Lock()
	d.events[e] = struct{}{}
	d.hmu.Unlock()
	return e, nil
}

// RecordEvent marks the current end of stream s with e.
func (d *Device) RecordEvent(e device.Event, s device.Stream) error {
	if err := d.live("RecordEvent", s, e); err != nil {
		return err
	}
	if r := d.call(d.drv.cuEventRecord, uintptr(e), uintptr(s)); r != success {
		return d.drv.errorf(r, "cuEventRecord(%#x, stream %#x)", uintptr(e), uintptr(s))
	}
	return nil
}

// QueryEvent reports whether the work before e's last record has completed; an event
// never recorded counts as completed, as in the driver.
func (d *Device) QueryEvent(e device.Event) (bool, error) {
	if err := d.live("QueryEvent", 0, e); err != nil {
		return false, err
	}
	switch r := d.call(d.drv.cuEventQuery, uintptr(e)); r {
	case success:
		return true, nil
	case errorNotReady:
		return false, nil
	default:
		return false, d.drv.errorf(r, "cuEventQuery(%#x)", uintptr(e))
	}
}

// SynchronizeEvent waits until the work before e's last record has completed.
func (d *Device) SynchronizeEvent(e device.Event) error {
	if err := d.live("SynchronizeEvent", 0, e); err != nil {
		return err
	}
	if r := d.call(d.drv.cuEventSynchronize, uintptr(e)); r != success {
		return d.drv.errorf(r, "cuEventSynchronize(%#x)", uintptr(e))
	}
	return nil
}

// ElapsedTime returns the GPU time between two completed records of timing events
// (resolution about half a microsecond).
func (d *Device) ElapsedTime(start, end device.Event) (time.Duration, error) {
	if err := d.live("ElapsedTime", 0, start); err != nil {
		return 0, err
	}
	if err := d.live("ElapsedTime", 0, end); err != nil {
		return 0, err
	}
	var ms float32
	if r := d.call(d.drv.cuEventElapsedTime, uintptr(unsafe.Pointer(&ms)), uintptr(start), uintptr(end)); r != success {
		return 0, d.drv.errorf(r, "cuEventElapsedTime(%#x, %#x)", uintptr(start), uintptr(end))
	}
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}

// DestroyEvent destroys an event; a record still pending completes normally.
func (d *Device) DestroyEvent(e device.Event) error {
	return destroy(d, d.events, e, "DestroyEvent", "event", d.drv.cuEventDestroy, "cuEventDestroy")
}

// destroy removes h from set (one of the Device's handle sets, guarded by hmu) and has
// the driver destroy it with fn (named call); h stays in set if the driver refuses.
func destroy[H ~uintptr](d *Device, set map[H]struct{}, h H, op, what string, fn uintptr, call string) error {
	d.hmu.Lock()
	_, ok := set[h]
	delete(set, h)
	d.hmu.Unlock()
	if !ok {
		return fmt.Errorf("cuda: %s: %s(%#x): not a live %s of this device", d.name, op, uintptr(h), what)
	}
	if r := d.call(fn, uintptr(h)); r != success {
		d.hmu.Lock()
		set[h] = struct{}{}
		d.hmu.Unlock()
		return d.drv.errorf(r, "%s(%#x)", call, uintptr(h))
	}
	return nil
}
