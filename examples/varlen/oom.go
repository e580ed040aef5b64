package main

import (
	"fmt"
	"slices"
	"time"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/data"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/sim"
	"github.com/subletml/sublet/examples/internal/demo"
	"github.com/subletml/sublet/tensor"
)

// policy is what to do when a step runs out of memory.
type policy int

const (
	halveAtOnce    policy = iota // train the batch in pieces
	retrySame                    // try the same batch once more, then pieces
	emptyThenRetry               // the seeds' way: EmptyCache, the same batch, then pieces
	expandable                   // halve at once, with expandable segments
	numPolicies
)

var policyNames = [numPolicies]string{"halve at once", "retry the same batch", "EmptyCache, then retry (the seeds)", "halve at once, expandable segments"}

// budget is the device of part 2: its capacity between what a full batch padded to the
// longest sequence needs at its peak and what half of one needs.
type budget struct {
	capacity, needFull, needHalf int64
}

func newBudget(c config, corp corpus) (budget, error) {
	var b budget
	longest := slices.Max(corp.lengths)
	var err error
	if b.needFull, err = peakOf(c, c.batch, longest); err != nil {
		return b, err
	}
	if b.needHalf, err = peakOf(c, c.batch/2, longest); err != nil {
		return b, err
	}
	b.capacity = c.capacityMiB * mib
	if b.capacity == 0 {
		b.capacity = (b.needHalf + (b.needFull-b.needHalf)/2) / (2 * mib) * (2 * mib)
	}
	return b, nil
}

// failure is one batch that ran out of memory at full size and what was done about it.
type failure struct {
	batch, size, length int
	// need is the step's peak on this batch, measured on the meta device.
	need int64
	err  error
	// retriesBefore and retriesAfter are num_alloc_retries around the failing step.
	retriesBefore, retriesAfter int64
	// reservedAfterFail is what the allocator held after the failure and
	// reservedAfterEmpty after EmptyCache (emptyThenRetry only).
	reservedAfterFail, reservedAfterEmpty int64
	// retried is set when the batch was tried again at full size; retryErr is that
	// attempt's error (nil: it trained).
	retried  bool
	retryErr error
	// pieces is how many pieces the batch was trained in (0: it was not).
	pieces int
}

// outcome is one epoch under one policy.
type outcome struct {
	policy   policy
	failures []failure
	// batches and samples count what the epoch trained; ooms the out-of-memory errors
	// (the allocator's num_ooms).
	batches, samples, ooms int
	// deviceAllocs and deviceFrees count the device's Malloc and Free calls; driver is
	// the simulated time charged for them; retries is num_alloc_retries: allocations
	// that released the cache and tried again, whether they then failed or not.
	deviceAllocs, deviceFrees, retries int64
	driver                             time.Duration
	peakReserved                       int64
}

// retryWorked lists the batches a retry at full size trained.
func (o outcome) retryWorked() []int {
	var b []int
	for _, f := range o.failures {
		if f.retried && f.retryErr == nil {
			b = append(b, f.batch)
		}
	}
	return b
}

// split divides the failures into those of batches that need more than capacity at
// their peak and the others, which failed for fragmentation.
func (o outcome) split(capacity int64) (tooBig, fragmented []failure) {
	for _, f := range o.failures {
		if f.need > capacity {
			tooBig = append(tooBig, f)
		} else {
			fragmented = append(fragmented, f)
		}
	}
	return tooBig, fragmented
}

// inPieces counts the batches trained in pieces.
func (o outcome) inPieces() int {
	n := 0
	for _, f := range o.failures {
		if f.pieces > 0 {
			n++
		}
	}
	return n
}

// recoverEpoch trains one epoch in random order on a fresh meta device of b's capacity,
// meeting each out-of-memory step with policy p.
func recoverEpoch(c config, corp corpus, b budget, p policy) (outcome, error) {
	o := outcome{policy: p}
	dev, a, err := metaDevice(b.capacity, alloc.Config{ExpandableSegments: p == expandable})
	if err != nil {
		return o, err
	}
	m, err := newModel(dev, c.seed, c.vocab, c.dim, c.hidden, c.classes, c.lr)
	if err != nil {
		return o, err
	}
	defer m.release()
	batches, err := data.Shuffle{N: c.sequences, Batch: c.batch, Seed: c.seed}.Batches(0)
	if err != nil {
		return o, err
	}
	a.ResetPeakStats()
	start, driver := demo.Read(a), dev.Elapsed()
	for i, idx := range batches {
		before := demo.Read(a).Retries
		err := tryPieces(dev, m, corp, idx, 1)
		if err == nil {
			o.batches++
			o.samples += len(idx)
			continue
		}
		if !isOOM(err) {
			return o, fmt.Errorf("batch %d: %w", i, err)
		}
		f, err := handle(c, dev, a, m, corp, p, i, idx, before, err)
		if err != nil {
			return o, fmt.Errorf("batch %d: %w", i, err)
		}
		o.failures = append(o.failures, f)
		o.batches++
		o.samples += len(idx)
	}
	end := demo.Read(a)
	o.deviceAllocs, o.deviceFrees = end.DeviceAllocs-start.DeviceAllocs, end.DeviceFrees-start.DeviceFrees
	o.retries, o.ooms = end.Retries-start.Retries, int(end.OOMs-start.OOMs)
	o.peakReserved, o.driver = end.PeakReserved, dev.Elapsed()-driver
	if end.Tensors() != m.bytes() {
		return o, fmt.Errorf("after the epoch %d bytes are requested, not the model's %d: a failed step leaked", end.Tensors(), m.bytes())
	}
	return o, nil
}

// handle meets the failure err of batch i under policy p, and trains the batch.
func handle(c config, dev *sim.Device, a *alloc.Allocator, m *model, corp corpus, p policy, i int, idx []int, retriesBefore int64, err error) (failure, error) {
	_, _, length := corp.padded(idx)
	f := failure{batch: i, size: len(idx), length: length, err: err, retriesBefore: retriesBefore}
	now := demo.Read(a)
	f.retriesAfter, f.reservedAfterFail = now.Retries, now.Reserved
	var nerr error
	if f.need, nerr = peakOf(c, len(idx), length); nerr != nil {
		return f, nerr
	}
	if p == emptyThenRetry {
		if err := a.EmptyCache(); err != nil {
			return f, err
		}
		f.reservedAfterEmpty = demo.Read(a).Reserved
	}
	if p == retrySame || p == emptyThenRetry {
		f.retried = true
		f.retryErr = tryPieces(dev, m, corp, idx, 1)
		if f.retryErr == nil {
			return f, nil
		}
		if !isOOM(f.retryErr) {
			return f, f.retryErr
		}
	}
	f.pieces, err = halve(dev, m, corp, idx)
	return f, err
}

// halve trains the batch idx in ever smaller pieces until they fit: 2, 4, … pieces,
// their gradients accumulated into one step. It returns how many pieces it took.
func halve(dev device.Device, m *model, corp corpus, idx []int) (int, error) {
	var err error
	for pieces := 2; pieces <= 2*len(idx); pieces *= 2 {
		if err = tryPieces(dev, m, corp, idx, pieces); err == nil || !isOOM(err) {
			return pieces, err
		}
	}
	return 0, fmt.Errorf("even one sequence at a time runs out of memory: %w", err)
}

// tryPieces trains the batch idx in n pieces, each padded to its own longest sequence,
// whose gradients accumulate (each loss weighted by its share of the batch), then
// steps. A piece that runs out of memory drops the gradients so far and returns the
// error: the model is as before.
func tryPieces(dev device.Device, m *model, corp corpus, idx []int, n int) error {
	size := (len(idx) + n - 1) / n
	for start := 0; start < len(idx); start += size {
		piece := idx[start:min(start+size, len(idx))]
		ids, labels, length := corp.padded(piece)
		if err := tensor.Try(func() { m.backward(dev, ids, labels, length, float64(len(piece))/float64(len(idx)), false) }); err != nil {
			m.opt.ZeroGrad(true)
			return err
		}
	}
	m.step()
	return nil
}
