package cuda

import (
	"fmt"
	"time"
	"unsafe"

	"github.com/subletml/sublet/device"
)

// NewStream creates a stream that does not synchronize with the default stream
// (CU_STREAM_NON_BLOCKING), as PyTorch's side streams do: ordering between streams comes
// only from events.
func (d *Device) NewStream() (device.Stream, error) {
	var s device.Stream
	if r := d.call(d.drv.cuStreamCreate, uintptr(unsafe.Pointer(&s)), streamNonBlocking); r != success {
		return 0, d.drv.errorf(r, "cuStreamCreate(%s, non-blocking)", d.name)
	}
	return s, nil
}

// DestroyStream destroys a stream from NewStream. Work already ordered on it still runs.
func (d *Device) DestroyStream(s device.Stream) error {
	if s == 0 {
		return fmt.Errorf("cuda: %s: DestroyStream(0): the default stream cannot be destroyed", d.name)
	}
	if r := d.call(d.drv.cuStreamDestroy, uintptr(s)); r != success {
		return d.drv.errorf(r, "cuStreamDestroy(%#x)", uintptr(s))
	}
	return nil
}

// SynchronizeStream waits until all work ordered on s has completed.
func (d *Device) SynchronizeStream(s device.Stream) error {
	if r := d.call(d.drv.cuStreamSynchronize, uintptr(s)); r != success {
		return d.drv.errorf(r, "cuStreamSynchronize(%#x)", uintptr(s))
	}
	return nil
}

// StreamWaitEvent makes work ordered on s after this call wait for e's last record.
func (d *Device) StreamWaitEvent(s device.Stream, e device.Event) error {
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
	return e, nil
}

// RecordEvent marks the current end of stream s with e.
func (d *Device) RecordEvent(e device.Event, s device.Stream) error {
	if r := d.call(d.drv.cuEventRecord, uintptr(e), uintptr(s)); r != success {
		return d.drv.errorf(r, "cuEventRecord(%#x, stream %#x)", uintptr(e), uintptr(s))
	}
	return nil
}

// QueryEvent reports whether the work before e's last record has completed; an event
// never recorded counts as completed, as in the driver.
func (d *Device) QueryEvent(e device.Event) (bool, error) {
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
	if r := d.call(d.drv.cuEventSynchronize, uintptr(e)); r != success {
		return d.drv.errorf(r, "cuEventSynchronize(%#x)", uintptr(e))
	}
	return nil
}

// ElapsedTime returns the GPU time between two completed records of timing events
// (resolution about half a microsecond).
func (d *Device) ElapsedTime(start, end device.Event) (time.Duration, error) {
	var ms float32
	if r := d.call(d.drv.cuEventElapsedTime, uintptr(unsafe.Pointer(&ms)), uintptr(start), uintptr(end)); r != success {
		return 0, d.drv.errorf(r, "cuEventElapsedTime(%#x, %#x)", uintptr(start), uintptr(end))
	}
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}

// DestroyEvent destroys an event; a record still pending completes normally.
func (d *Device) DestroyEvent(e device.Event) error {
	if r := d.call(d.drv.cuEventDestroy, uintptr(e)); r != success {
		return d.drv.errorf(r, "cuEventDestroy(%#x)", uintptr(e))
	}
	return nil
}
