package cuda

import (
	"errors"
	"runtime"
	"sync"
	"unsafe"

	"github.com/subletml/sublet/device"
)

// stageMin is the smallest copy CopyToDevice stages through pinned buffers; below it the
// driver's own path costs less than the extra host copy.
const stageMin = 1 << 20

// stageChunk is each pinned staging buffer's size: large enough that a transfer's fixed
// cost is small beside it, small enough that two of them cost little pinned memory.
const stageChunk = 8 << 20

// stageCopiers is how many goroutines fill a chunk at once: one core's memcpy moves
// about a third of what the link does.
const stageCopiers = 4

// stager moves pageable host memory (a Go slice) to the device through two pinned
// buffers. From pageable memory the driver copies through a small bounce buffer of its
// own, a fraction of the link's speed (about 4 GB/s for 64 MB on the H100's host,
// against the link's 50); here each chunk is copied into a pinned buffer, by
// stageCopiers goroutines, and handed to the copy engine, which takes it while the
// other buffer is filled. The buffers are the Device's own, outside Usage (like the
// driver's own memory), made on the first large copy and freed by Close.
type stager struct {
	mu sync.Mutex // held for a whole staged copy: the buffers serve one copy at a time
	// Guarded by mu.
	buf  [2][]byte       // pinned (cuMemHostAlloc); nil until the first staged copy
	done [2]device.Event // recorded after each buffer's last transfer
	used [2]bool         // done[i] was recorded since the buffer was made
}

// stagedCopyToDevice copies src to dst, ordered on s, through the pinned buffers, then
// waits for s: CopyToDevice's contract, at the link's pinned speed.
func (d *Device) stagedCopyToDevice(dst device.Ptr, src []byte, s device.Stream) error {
	st := &d.stage
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.buf[0] == nil {
		if err := d.makeStaging(); err != nil {
			return err
		}
	}
	for off, k := 0, 0; off < len(src); off, k = off+stageChunk, 1-k {
		n := min(stageChunk, len(src)-off)
		if st.used[k] { // the buffer's last transfer must be over before it is refilled
			if r := d.call(d.drv.cuEventSynchronize, uintptr(st.done[k])); r != success {
				return d.drv.errorf(r, "cuEventSynchronize(%#x) (staging buffer %d)", uintptr(st.done[k]), k)
			}
		}
		parallelCopy(st.buf[k][:n], src[off:off+n])
		if r := d.call(d.drv.cuMemcpyHtoDAsync, uintptr(dst)+uintptr(off), uintptr(unsafe.Pointer(&st.buf[k][0])), uintptr(n), uintptr(s)); r != success {
			return d.drv.errorf(r, "cuMemcpyHtoDAsync(%#x, %d staged bytes, stream %#x)", uintptr(dst)+uintptr(off), n, uintptr(s))
		}
		if r := d.call(d.drv.cuEventRecord, uintptr(st.done[k]), uintptr(s)); r != success {
			return d.drv.errorf(r, "cuEventRecord(%#x, stream %#x) (staging buffer %d)", uintptr(st.done[k]), uintptr(s), k)
		}
		st.used[k] = true
	}
	if r := d.call(d.drv.cuStreamSynchronize, uintptr(s)); r != success {
		return d.drv.errorf(r, "cuStreamSynchronize(%#x) after a staged copy", uintptr(s))
	}
	return nil
}

// parallelCopy copies src into dst (of its length) with up to stageCopiers goroutines.
func parallelCopy(dst, src []byte) {
	parts := min(stageCopiers, runtime.GOMAXPROCS(0), max(1, len(src)/(1<<20)))
	if parts <= 1 {
		copy(dst, src)
		return
	}
	var wg sync.WaitGroup
	per := (len(src) + parts - 1) / parts
	for lo := 0; lo < len(src); lo += per {
		hi := min(lo+per, len(src))
		wg.Add(1)
		go func() {
			defer wg.Done()
			copy(dst[lo:hi], src[lo:hi])
		}()
	}
	wg.Wait()
}

// makeStaging allocates the pinned buffers and their events; stage.mu is held.
func (d *Device) makeStaging() error {
	st := &d.stage
	for k := range st.buf {
		var p *byte
		if r := d.call(d.drv.cuMemHostAlloc, uintptr(unsafe.Pointer(&p)), stageChunk, hostAllocDefault); r != success {
			err := d.drv.errorf(r, "cuMemHostAlloc(%d bytes) for a staging buffer", stageChunk)
			return errors.Join(err, d.freeStaging())
		}
		st.buf[k] = unsafe.Slice(p, stageChunk)
		var e device.Event
		if r := d.call(d.drv.cuEventCreate, uintptr(unsafe.Pointer(&e)), eventDisableTiming); r != success {
			err := d.drv.errorf(r, "cuEventCreate for a staging buffer")
			return errors.Join(err, d.freeStaging())
		}
		st.done[k] = e
	}
	return nil
}

// freeStaging frees the pinned buffers and events once their transfers are over;
// stage.mu is held (or the Device is closing).
func (d *Device) freeStaging() error {
	st := &d.stage
	var errs []error
	for k := range st.buf {
		if st.done[k] != 0 {
			if st.used[k] {
				if r := d.call(d.drv.cuEventSynchronize, uintptr(st.done[k])); r != success {
					errs = append(errs, d.drv.errorf(r, "cuEventSynchronize(%#x) (staging buffer %d)", uintptr(st.done[k]), k))
				}
			}
			if r := d.call(d.drv.cuEventDestroy, uintptr(st.done[k])); r != success {
				errs = append(errs, d.drv.errorf(r, "cuEventDestroy(%#x) (staging buffer %d)", uintptr(st.done[k]), k))
			}
		}
		if st.buf[k] != nil {
			if r := d.call(d.drv.cuMemFreeHost, uintptr(unsafe.Pointer(&st.buf[k][0]))); r != success {
				errs = append(errs, d.drv.errorf(r, "cuMemFreeHost (staging buffer %d)", k))
			}
		}
		st.buf[k], st.done[k], st.used[k] = nil, 0, false
	}
	return errors.Join(errs...)
}

// pinned reports whether b lies inside a live HostAlloc allocation or HostRegister
// range of d: the copy engine reads it directly, no staging needed.
func (d *Device) pinned(b []byte) bool {
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	hi := lo + uintptr(len(b))
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, m := range []map[uintptr]int64{d.host, d.registered} {
		for base, size := range m {
			if lo >= base && hi <= base+uintptr(size) {
				return true
			}
		}
	}
	return false
}
