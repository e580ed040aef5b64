package data

import (
	"errors"
	"fmt"
	"time"
	"unsafe"

	"github.com/subletml/sublet/alloc/pinned"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
)

// Dataset is a set of labelled samples of one size, read by index.
type Dataset interface {
	// Len is the number of samples.
	Len() int
	// Features is the number of float32 values of each sample (at least 1).
	Features() int
	// Sample writes the features of sample i into x (Features() values: the sample's row
	// of its batch, the one copy collating makes) and returns its label. It is called
	// from the loader's goroutine, one call at a time.
	Sample(i int, x []float32) (label int64, err error)
}

// Config says where a Loader's batches go and how they get there.
type Config struct {
	// Device is where batches go.
	Device device.Device
	// Prefetch is how many batches the loader's goroutine makes ahead of the consumer;
	// 0 makes each batch in Next, on the consumer's goroutine.
	Prefetch int
	// Pinned, when not nil, is the host allocator batches are collated in, an allocator
	// for Device (pinned.New(Device)); nil collates each batch in new Go slices.
	Pinned *pinned.Allocator
}

// Loader makes the batches of a Dataset in a Sampler's order (see the package doc).
type Loader struct {
	// Set by NewLoader, never changed.
	ds Dataset
	s  Sampler
	c  Config
	// async is set when batches are copied asynchronously: the device has pinned memory
	// and the host allocator's memory is page-locked.
	async bool
}

// NewLoader returns a loader of ds's samples in the batches s makes, or an error naming
// a bad setting.
func NewLoader(ds Dataset, s Sampler, c Config) (*Loader, error) {
	switch {
	case ds == nil || s == nil || c.Device == nil:
		return nil, errors.New("data.NewLoader: need a dataset, a sampler and Config.Device")
	case ds.Features() < 1:
		return nil, fmt.Errorf("data.NewLoader: the dataset has %d features per sample; need at least 1", ds.Features())
	case c.Prefetch < 0:
		return nil, fmt.Errorf("data.NewLoader: Prefetch %d; need 0 (none) or more", c.Prefetch)
	case c.Pinned != nil && c.Pinned.Device() != c.Device:
		return nil, fmt.Errorf("data.NewLoader: the pinned allocator serves %s, the batches go to %s; make it with pinned.New(Config.Device)",
			c.Pinned.Device().Name(), c.Device.Name())
	}
	_, ph := c.Device.(device.PinnedHost)
	return &Loader{ds: ds, s: s, c: c, async: ph && c.Pinned != nil && c.Pinned.Pinned()}, nil
}

// Async reports whether the loader copies batches asynchronously, on a stream of its
// own (see the package doc).
func (l *Loader) Async() bool { return l.async }

// Batch is one batch on the device. X is [n, features] F32 and Y the n labels (I64);
// the caller owns both (no scope does): bind them into the step's scope with
// Scope.Bind, and Release the batch when done.
type Batch struct {
	X, Y *tensor.Tensor
	// Index lists the samples, in the order of their rows.
	Index []int
	// copied, when not 0, is the event recorded after the batch's asynchronous copies;
	// Next waits for it and destroys it.
	copied device.Event
}

// Release releases X and Y. Releasing again does nothing.
func (b *Batch) Release() {
	b.X.Release()
	b.Y.Release()
}

// Stats are an epoch's counters so far.
type Stats struct {
	// Batches and Samples count what Next returned.
	Batches, Samples int
	// Waited is the time Next spent before returning: waiting for the loader's goroutine
	// (or, without prefetch, making the batch) and for its copies.
	Waited time.Duration
	// HostBytes is the size of the host buffers the batches were collated in.
	HostBytes int64
	// Slices counts the Go slices the batches were collated in, each a new allocation
	// on the Go heap: a slice of labels and one of features per batch without a pinned
	// allocator, none with one (the batches are views of its buffers, which it reuses;
	// its own statistics count what it took from the system).
	Slices int
}

// Iter is one epoch: Next returns its batches in order.
type Iter struct {
	l       *Loader
	batches [][]int
	// stream is where asynchronous copies are ordered (async loaders only).
	stream device.Stream

	// Set when prefetching: the goroutine sends batches (and at most one error) on
	// ready, closes it when it returns, and returns early once stop is closed.
	ready chan made
	stop  chan struct{}

	// The consumer's state.
	next   int   // without prefetch: the next batch to make
	err    error // the error that ended the epoch; errClosed after Close
	closed bool
	stats  Stats
}

// made is a batch the goroutine made, or the error that stopped it.
type made struct {
	b         *Batch
	hostBytes int64
	// slices is how many Go slices the batch was collated in (Stats.Slices).
	slices int
	err    error
}

var errClosed = errors.New("data: Next after Close")

// Epoch starts epoch e (counted from 0): with Prefetch, its goroutine starts making
// batches now. Close it when done, also after the last batch.
func (l *Loader) Epoch(e int) *Iter {
	it := &Iter{l: l}
	it.batches, it.err = l.s.Batches(e)
	if it.err == nil {
		it.err = checkBatches(it.batches, l.ds.Len())
	}
	if it.err == nil && l.async {
		it.stream, it.err = l.c.Device.NewStream()
	}
	if it.err != nil {
		it.err = fmt.Errorf("data: epoch %d: %w", e, it.err)
		return it
	}
	if l.c.Prefetch > 0 {
		it.ready, it.stop = make(chan made, l.c.Prefetch), make(chan struct{})
		go it.prefetch()
	}
	return it
}

// checkBatches reports the first batch that is empty or lists a sample outside
// [0, n): the dataset would be asked for a sample it does not have.
func checkBatches(batches [][]int, n int) error {
	for k, idx := range batches {
		if len(idx) == 0 {
			return fmt.Errorf("batch %d is empty: a sampler's batch lists at least one sample", k)
		}
		for _, i := range idx {
			if i < 0 || i >= n {
				return fmt.Errorf("batch %d lists sample %d, but the dataset has %d samples (samples 0 to %d): check the sampler's N or Lengths", k, i, n, n-1)
			}
		}
	}
	return nil
}

// prefetch makes the batches in order and hands them over, until the last, an error,
// or Close.
func (it *Iter) prefetch() {
	defer close(it.ready)
	for _, idx := range it.batches {
		m := it.make(idx)
		select {
		case it.ready <- m:
		case <-it.stop:
			if m.b != nil {
				it.discard(m.b) // Close reports the errors of what it drains, not this
			}
			return
		}
		if m.err != nil {
			return
		}
	}
}

// Next returns the epoch's next batch, nil (and no error) after the last, or the error
// that ended the epoch.
func (it *Iter) Next() (*Batch, error) {
	if it.err != nil {
		return nil, it.err
	}
	start := time.Now()
	var m made
	if it.ready == nil {
		if it.next == len(it.batches) {
			return nil, nil
		}
		m = it.make(it.batches[it.next])
		it.next++
	} else {
		var ok bool
		if m, ok = <-it.ready; !ok {
			return nil, nil
		}
	}
	if m.err == nil && m.b.copied != 0 {
		if err := it.waitCopies(m.b); err != nil {
			m.b.Release()
			m = made{err: err}
		}
	}
	it.stats.Waited += time.Since(start)
	if m.err != nil {
		it.err = m.err
		return nil, m.err
	}
	it.stats.Batches++
	it.stats.Samples += len(m.b.Index)
	it.stats.HostBytes += m.hostBytes
	it.stats.Slices += m.slices
	return m.b, nil
}

// Stats returns the epoch's counters so far.
func (it *Iter) Stats() Stats { return it.stats }

// Close ends the epoch: it stops the goroutine, releases the batches Next has not
// returned (after their copies completed) and destroys the copy stream. Closing again
// does nothing; Next afterwards is an error.
func (it *Iter) Close() error {
	if it.closed {
		return nil
	}
	it.closed = true
	var errs []error
	if it.ready != nil {
		close(it.stop)
		for m := range it.ready {
			if m.b != nil {
				errs = append(errs, it.discard(m.b))
			}
		}
	}
	if it.stream != 0 {
		errs = append(errs, it.l.c.Device.DestroyStream(it.stream))
	}
	if it.err == nil {
		it.err = errClosed
	}
	return errors.Join(errs...)
}

// discard releases a batch nobody will receive, once its copies have completed.
func (it *Iter) discard(b *Batch) error {
	var err error
	if b.copied != 0 {
		err = it.waitCopies(b)
	}
	b.Release()
	return err
}

// waitCopies waits for b's asynchronous copies and destroys their event.
func (it *Iter) waitCopies(b *Batch) error {
	dev := it.l.c.Device
	err := dev.SynchronizeEvent(b.copied)
	err = errors.Join(err, dev.DestroyEvent(b.copied))
	b.copied = 0
	if err != nil {
		return fmt.Errorf("data: waiting for the copies of a batch to %s: %w", dev.Name(), err)
	}
	return nil
}

// make collates the samples idx into a host buffer and moves them to the device.
func (it *Iter) make(idx []int) made {
	h, err := it.collate(idx)
	if err != nil {
		return made{err: err}
	}
	var b *Batch
	var moveErr error
	err = tensor.Try(func() { b, moveErr = it.move(h) })
	if err = errors.Join(err, moveErr, h.free()); err != nil {
		if b != nil {
			err = errors.Join(err, it.discard(b))
		}
		return made{err: fmt.Errorf("data: moving a batch of %d samples to %s: %w", len(idx), it.l.c.Device.Name(), err)}
	}
	b.Index = idx
	m := made{b: b, hostBytes: h.size}
	if h.raw == nil {
		m.slices = 2
	}
	return m
}

// hostBatch is a batch collated on the host: the labels and then the features, in one
// pinned buffer (raw) or in two Go slices.
type hostBatch struct {
	labels []int64
	x      []float32
	// raw is the pinned buffer the slices alias, nil for Go slices; size is the bytes
	// collated either way.
	raw  []byte
	size int64
	// alloc is the allocator raw came from.
	alloc *pinned.Allocator
}

// free gives the pinned buffer back (a buffer an asynchronous copy recorded is kept
// from reuse until the copy has completed).
func (h hostBatch) free() error {
	if h.raw == nil {
		return nil
	}
	return h.alloc.Free(h.raw)
}

// collate writes the samples idx into a new host batch.
func (it *Iter) collate(idx []int) (hostBatch, error) {
	n, f := len(idx), it.l.ds.Features()
	h := hostBatch{size: int64(n)*8 + int64(n*f)*4, alloc: it.l.c.Pinned}
	if h.alloc == nil {
		h.labels, h.x = make([]int64, n), make([]float32, n*f)
	} else {
		raw, err := h.alloc.Alloc(h.size)
		if err != nil {
			return h, fmt.Errorf("data: a host buffer for a batch of %d samples: %w", n, err)
		}
		// The labels first: the buffer is page-aligned, so both views are aligned.
		h.raw = raw
		h.labels = unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(raw))), n)
		h.x = unsafe.Slice((*float32)(unsafe.Pointer(&raw[n*8])), n*f)
	}
	for r, i := range idx {
		label, err := it.l.ds.Sample(i, h.x[r*f:(r+1)*f])
		if err != nil {
			return h, errors.Join(fmt.Errorf("data: sample %d: %w", i, err), h.free())
		}
		h.labels[r] = label
	}
	return h, nil
}

// move makes the batch's tensors on the device from h: by tensor.FromSlice, or, for an
// async loader, as empty tensors filled by copies ordered on the loader's stream, with
// an event recorded after them and the stream recorded on the host buffer.
func (it *Iter) move(h hostBatch) (*Batch, error) {
	dev := it.l.c.Device
	s := tensor.NewScope(tensor.NoGrad())
	defer s.Close()
	n, f := len(h.labels), len(h.x)/max(len(h.labels), 1)
	if !it.l.async {
		x := tensor.FromSlice(s, dev, dtype.F32, h.x, n, f)
		y := tensor.FromSlice(s, dev, dtype.I64, h.labels)
		return &Batch{X: s.Keep(x), Y: s.Keep(y)}, nil
	}
	x, y := s.Empty(dev, dtype.F32, n, f), s.Empty(dev, dtype.I64, n)
	// The blocks may have been freed by work still queued on the default stream, where
	// the tensor ops run: the copies must not overwrite them before it is done.
	if err := dev.SynchronizeStream(0); err != nil {
		return nil, err
	}
	ph := dev.(device.PinnedHost)
	labels, features := h.raw[:n*8], h.raw[n*8:]
	err := ph.CopyToDeviceAsync(x.Storage().Ptr(), features, it.stream)
	if err == nil {
		err = ph.CopyToDeviceAsync(y.Storage().Ptr(), labels, it.stream)
	}
	if err != nil {
		// A copy may have been ordered: wait for it before the buffer and the tensors go.
		return nil, errors.Join(err, dev.SynchronizeStream(it.stream))
	}
	// From here the buffer must wait for the copies (RecordEvent), and so must the
	// tensors (waitCopies), even if what follows fails.
	b := &Batch{X: s.Keep(x), Y: s.Keep(y)}
	ev, err := dev.NewEvent()
	if err == nil {
		b.copied = ev
		err = dev.RecordEvent(ev, it.stream)
	}
	if err != nil {
		err = errors.Join(err, dev.SynchronizeStream(it.stream))
	}
	return b, errors.Join(err, h.alloc.RecordEvent(h.raw, it.stream))
}
