// Command varlen trains a small sequence classifier on sequences of varied lengths, each
// batch padded to its longest sequence, and shows two things the seed tutorials say
// about such inputs:
//
//  1. Order matters. In random order nearly every batch is padded to a long sequence;
//     a length-aware bucketing sampler (data.Buckets: sort by length, cut into batches,
//     shuffle the batches) pads little. The table gives, for random order and for
//     buckets, the padding, the peaks of
//     allocated and reserved memory, what the cache holds beyond the live blocks
//     (fragmentation), the device's own allocations, the driver time the simulated GPU
//     charged for them, and the wall time.
//
//  2. Out of memory. On a simulated GPU too small for the longest batches, steps run
//     out of memory. The seeds' cure, empty_cache and then the same batch again,
//     cannot train a batch that needs more than the device has: before failing, the
//     allocator already released every cached segment it could and retried
//     (num_alloc_retries counts it). Halving the batch (the halves' gradients
//     accumulated into one step) trains it. A batch that fits but failed for
//     fragmentation is another matter: a plain retry meets the same cached layout
//     again, EmptyCache then a retry may fit it, and expandable segments avoid some of
//     that fragmentation in the first place. The example logs the seeds' way batch by
//     batch and compares four policies over the epoch.
//
//     go run ./examples/varlen                 # the meta device: exact memory, in a second
//     go run ./examples/varlen -device cpu -dim 32 -hidden 64 -batch 16 -max-len 256
//     go run ./examples/varlen -dim 64 -hidden 256 -batch 32   # a 60 MiB device: fragmentation
//     go run ./examples/varlen -sequences 4096 -capacity 512
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/data"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/sim"
	"github.com/subletml/sublet/examples/internal/demo"
	"github.com/subletml/sublet/internal/units"
)

func main() { os.Exit(demo.Status("varlen", run(os.Args[1:], os.Stdout), os.Stderr)) }

const mib = 1 << 20

// config is what the flags set.
type config struct {
	device                      string
	sequences, batch, maxLen    int
	vocab, dim, hidden, classes int
	lr                          float64
	capacityMiB                 int64
	seed                        uint64
}

func parseFlags(args []string, out io.Writer) (config, error) {
	var c config
	fs := demo.Flags("varlen", out)
	demo.DeviceFlag(fs, &c.device, "sim")
	fs.IntVar(&c.sequences, "sequences", 2048, "sequences in the data set (one epoch each way)")
	fs.IntVar(&c.batch, "batch", 64, "sequences per batch")
	fs.IntVar(&c.maxLen, "max-len", 1024, "the longest sequence (lengths are log-normal, median 90)")
	fs.IntVar(&c.vocab, "vocab", 1000, "vocabulary size")
	fs.IntVar(&c.dim, "dim", 256, "embedding width")
	fs.IntVar(&c.hidden, "hidden", 1024, "width of the per-token Linear+ReLU")
	fs.IntVar(&c.classes, "classes", 2, "classes")
	fs.Float64Var(&c.lr, "lr", 0.05, "SGD learning rate (momentum 0.9)")
	fs.Int64Var(&c.capacityMiB, "capacity", 0, "capacity of the simulated GPU of part 2 in MiB (0: between what the longest batch and half of it need)")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the data, the order and the parameters")
	if err := demo.Parse(fs, args); err != nil {
		return c, err
	}
	if c.sequences < 1 || c.batch < 2 || c.maxLen < 8 || c.vocab < c.classes || c.dim < 1 || c.hidden < 1 || c.classes < 2 || !(c.lr > 0) || c.capacityMiB < 0 {
		return c, errors.New("need -sequences, -dim, -hidden ≥ 1, -batch ≥ 2, -max-len ≥ 8, -classes ≥ 2, -vocab ≥ -classes, -lr > 0 and -capacity ≥ 0")
	}
	return c, nil
}

// metaDevice is a fresh simulated GPU without data of capacity bytes (0: an H200's),
// and its allocator configured by cfg.
func metaDevice(capacity int64, cfg alloc.Config) (*sim.Device, *alloc.Allocator, error) {
	dev, err := sim.New(sim.Options{Capacity: capacity})
	if err != nil {
		return nil, nil, err
	}
	a, err := alloc.ForConfig(dev, cfg)
	return dev, a, err
}

// run parses args, runs both parts and prints them.
func run(args []string, out io.Writer) error {
	c, err := parseFlags(args, out)
	if err != nil {
		return err
	}
	dev, a, hasData, err := demo.Open(c.device)
	if err != nil {
		return err
	}
	corp := newCorpus(c.seed, c.sequences, c.maxLen, c.vocab, c.classes)
	real := 0
	for _, l := range corp.lengths {
		real += l
	}
	fmt.Fprintf(out, "sublet examples/varlen on %s: %d sequences of 8 to %d tokens (%d in all), batches of %d padded to their longest; Embedding(%d, %d), Linear(%d→%d)+ReLU per token, mean, Linear to %d classes\n",
		dev.Name(), c.sequences, c.maxLen, real, c.batch, c.vocab, c.dim, c.dim, c.hidden, c.classes)
	if !hasData {
		fmt.Fprintf(out, "%s keeps no data: the memory is exact and nothing is computed, so the losses are not shown and the wall time is the bookkeeping's\n", dev.Name())
	}

	orders := []struct {
		name    string
		sampler data.Sampler
	}{
		{"random order", data.Shuffle{N: c.sequences, Batch: c.batch, Seed: c.seed}},
		{"buckets, shuffled", data.Buckets{Lengths: corp.lengths, Batch: c.batch, Seed: c.seed}},
	}
	var results []orderResult
	for _, o := range orders {
		var r orderResult
		if err := demo.Try(dev, func() error { r, err = trainOrder(c, dev, a, corp, o.sampler, hasData); return err }); err != nil {
			return fmt.Errorf("%s: %w", o.name, err)
		}
		r.name = o.name
		results = append(results, r)
	}
	reportOrders(out, results, hasData)

	b, err := newBudget(c, corp)
	if err != nil {
		return err
	}
	var outs []outcome
	for p := range numPolicies {
		o, err := recoverEpoch(c, corp, b, p)
		if err != nil {
			return fmt.Errorf("%s: %w", policyNames[p], err)
		}
		outs = append(outs, o)
	}
	reportRecovery(out, b, outs)
	return demo.Drain(a)
}

// orderResult is what one epoch in one order measured.
type orderResult struct {
	name string
	// real and padded count the tokens of the sequences and of the padded batches.
	real, padded int64
	// peakAllocated and peakReserved are the allocator's peaks over the epoch;
	// cached is what it reserved beyond the live blocks at the end, before the model
	// was released.
	peakAllocated, peakReserved, cached int64
	// deviceAllocs counts the device's Malloc calls; driver is the time the simulated
	// GPU charged for them and the frees (0 on other devices); elapsed the wall time.
	deviceAllocs    int64
	driver, elapsed time.Duration
	// loss is the mean loss of the epoch (0 without data).
	loss float64
}

// trainOrder trains a fresh model for one epoch in the order s gives, starting from an
// empty cache.
func trainOrder(c config, dev device.Device, a *alloc.Allocator, corp corpus, s data.Sampler, hasData bool) (orderResult, error) {
	var r orderResult
	batches, err := s.Batches(0)
	if err != nil {
		return r, err
	}
	if err := a.EmptyCache(); err != nil {
		return r, err
	}
	m, err := newModel(dev, c.seed, c.vocab, c.dim, c.hidden, c.classes, c.lr)
	if err != nil {
		return r, err
	}
	defer m.release()
	a.ResetPeakStats()
	start := demo.Read(a)
	driver := demo.DriverTime(dev)
	began := time.Now()
	sum := 0.0
	for _, idx := range batches {
		ids, labels, length := corp.padded(idx)
		for _, i := range idx {
			r.real += int64(corp.lengths[i])
		}
		r.padded += int64(len(idx) * length)
		sum += m.backward(dev, ids, labels, length, 1, hasData)
		m.step()
	}
	r.elapsed = time.Since(began)
	r.driver = demo.DriverTime(dev) - driver
	end := demo.Read(a)
	r.peakAllocated, r.peakReserved = end.PeakAllocated, end.PeakReserved
	r.cached = end.Reserved - end.Allocated
	r.deviceAllocs = end.DeviceAllocs - start.DeviceAllocs
	r.loss = sum / float64(len(batches))
	return r, nil
}

func reportOrders(out io.Writer, results []orderResult, hasData bool) {
	fmt.Fprintln(out, "\npart 1: one epoch in each order")
	header := []string{"", "padding", "peak allocated", "peak reserved", "cached at the end", "device allocations", "driver time", "wall time"}
	if hasData {
		header = append(header, "mean loss")
	}
	var rows [][]string
	for _, r := range results {
		row := []string{r.name,
			fmt.Sprintf("%.0f%%", 100*float64(r.padded-r.real)/float64(r.padded)),
			units.Bytes(r.peakAllocated), units.Bytes(r.peakReserved), units.Bytes(r.cached),
			fmt.Sprint(r.deviceAllocs), demo.DriverTimeText(r.driver), r.elapsed.Round(time.Millisecond).String()}
		if hasData {
			row = append(row, fmt.Sprintf("%.4f", r.loss))
		}
		rows = append(rows, row)
	}
	demo.Table(out, "  ", header, rows)
	fmt.Fprintln(out, "  (padding: the share of the padded batches' tokens that are padding, computed for nothing)")
}

// reportRecovery prints part 2: the seeds' policy batch by batch, then every policy's
// totals.
func reportRecovery(out io.Writer, b budget, outs []outcome) {
	fmt.Fprintf(out, "\npart 2: one epoch in random order on a simulated GPU of %s (a full batch padded to the longest sequence needs %s at its peak, half of one %s)\n",
		units.Bytes(b.capacity), units.Bytes(b.needFull), units.Bytes(b.needHalf))
	seeds := outs[emptyThenRetry]
	if len(seeds.failures) == 0 {
		fmt.Fprintln(out, "  no batch ran out of memory: lower -capacity")
		return
	}
	fmt.Fprintf(out, "  the first failure: %s\n", demo.FirstLine(seeds.failures[0].err))
	fmt.Fprintln(out, "  the seeds' way, EmptyCache then the same batch again, batch by batch:")
	for _, f := range seeds.failures {
		retry := "trained"
		if f.retryErr != nil {
			retry = fmt.Sprintf("out of memory again, trained in %d pieces", f.pieces)
		}
		fmt.Fprintf(out, "    batch %2d (%d × %d tokens, %s at its peak): out of memory after the allocator released its cache and retried (num_alloc_retries %d → %d); EmptyCache %s → %s reserved; again: %s\n",
			f.batch, f.size, f.length, units.Bytes(f.need), f.retriesBefore, f.retriesAfter,
			units.Bytes(f.reservedAfterFail), units.Bytes(f.reservedAfterEmpty), retry)
	}
	header := []string{"on out of memory", "failed at full size: too big / fragmented", "retries that trained", "batches in pieces", "OOM errors", "device allocations", "device frees", "driver time", "peak reserved"}
	var rows [][]string
	for _, o := range outs {
		worked := "-"
		if o.policy == retrySame || o.policy == emptyThenRetry {
			worked = fmt.Sprintf("%d of %d", len(o.retryWorked()), len(o.failures))
		}
		big, frag := o.split(b.capacity)
		rows = append(rows, []string{policyNames[o.policy], fmt.Sprintf("%d / %d", len(big), len(frag)), worked, fmt.Sprint(o.inPieces()), fmt.Sprint(o.ooms),
			fmt.Sprint(o.deviceAllocs), fmt.Sprint(o.deviceFrees), o.driver.Round(time.Microsecond).String(), units.Bytes(o.peakReserved)})
	}
	fmt.Fprintln(out)
	demo.Table(out, "  ", header, rows)
	fmt.Fprintln(out, "  (too big: the batch needs more than the device has at its peak; fragmented: it needs less, and failed for want of a block large enough)")
	for _, p := range []policy{retrySame, emptyThenRetry} {
		o := outs[p]
		big, frag := o.split(b.capacity)
		fmt.Fprintf(out, "%s: retries trained %d of %d too-big batches and %d of %d fragmented ones\n",
			policyNames[p], countRetried(big), len(big), countRetried(frag), len(frag))
	}
	fmt.Fprintf(out, "a retry never trains a batch too big for the device: before failing, the allocator had released its cache and retried (num_alloc_retries); halving it is what works. Every policy trained all %d sequences\n",
		outs[halveAtOnce].samples)
}

// countRetried counts the failures a retry at full size trained.
func countRetried(fs []failure) int {
	n := 0
	for _, f := range fs {
		if f.retried && f.retryErr == nil {
			n++
		}
	}
	return n
}

// isOOM reports whether err is the allocator's out-of-memory error.
func isOOM(err error) bool {
	var oom *alloc.OOMError
	return errors.As(err, &oom)
}
