package dist

import (
	"fmt"
	"slices"
	"strings"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/tensor"
)

// Bucket sizes, as PyTorch's DistributedDataParallel: a small first bucket, so the
// first all-reduce starts early in backward, then 25 MiB (bucket_cap_mb).
const (
	DefaultBucketBytes      = 25 << 20
	DefaultFirstBucketBytes = 1 << 20
)

// DataParallelConfig configures NewDataParallel.
type DataParallelConfig struct {
	// BucketBytes caps the buckets after the first (0: DefaultBucketBytes);
	// FirstBucketBytes caps the first (0: DefaultFirstBucketBytes). A bucket closes
	// once it holds at least its cap, so one parameter larger than the cap is a bucket
	// of its own.
	BucketBytes, FirstBucketBytes int64
}

// DataParallel trains one replica of a module per rank, PyTorch's
// DistributedDataParallel: every rank starts from rank 0's parameters, computes the
// gradients of its own share of the batch, and ends each backward with the gradients
// averaged over the ranks, so every rank takes the same optimizer step.
//
// The gradients are copied, as backward produces them, into buckets (flat tensors of
// up to BucketBytes, parameters in reverse order, the order backward usually produces
// them in, one element type and device each); a bucket is all-reduced (averaged) as
// soon as it is full, on the backend, while backward goes on with earlier layers.
// Buckets are launched in their order on every rank. When the last gradient is in,
// backward waits for every bucket and copies the averages back into the gradients:
// after Backward returns, every rank holds the same averaged gradients.
//
// The buckets are device memory from the parameters' caching allocator, allocated by
// NewDataParallel (the parameters' size once more, counted in the allocator's stats)
// and released by Release. Between steps the allocator holds the parameters, the
// buckets and what the optimizer keeps.
//
// A DataParallel and its module are used by one goroutine at a time.
type DataParallel struct {
	// Set by NewDataParallel, then read-only.
	module nn.Module
	b      Backend
	// all are the module's parameters, in its order: verified and broadcast; params
	// are those of them that require grad: bucketed and reduced.
	all     []nn.Parameter
	params  []nn.Parameter
	buckets []*bucket // in launch order
	// where[i] is params[i]'s bucket and its position among the bucket's members.
	where []slot

	// The state of the backward in progress (its goroutine's).
	sync     bool   // gradients are reduced (false inside NoSync)
	marked   []bool // marked[i]: params[i]'s gradient is in its bucket this backward
	ready    int    // how many are marked
	next     int    // the next bucket to launch
	err      error  // the failure that stopped reductions, for good
	released bool
	stats    DataParallelStats
}

// bucket is one flat tensor of gradients.
type bucket struct {
	flat    *tensor.Tensor   // the caller's (no scope): every member's gradient, one after another
	views   []*tensor.Tensor // views[k]: member k's part of flat, shaped as its parameter
	members []int            // indices into params, in the order they are laid out
	pending int              // members not yet marked this backward
	work    *Work            // the all-reduce in flight, nil when none
}

// slot is where a parameter's gradient goes.
type slot struct{ bucket, member int }

// DataParallelStats describes a DataParallel's buckets and what it has reduced.
type DataParallelStats struct {
	// Buckets are the buckets in launch order: their parameters' names and bytes.
	Buckets []BucketInfo
	// BucketBytes is the device memory the buckets hold.
	BucketBytes int64
	// Reductions counts the backwards whose gradients were averaged.
	Reductions int
	// Overlapped counts the buckets whose all-reduce started while backward was still
	// producing gradients (every bucket but a backward's last one, when the parameters
	// are produced in reverse order).
	Overlapped int
}

// BucketInfo is one bucket.
type BucketInfo struct {
	Params []string
	DType  dtype.DType
	Bytes  int64
}

// NewDataParallel wraps m for data-parallel training on b's group. It checks that every
// rank's m has the same parameters (names, types, shapes, which require grad), copies
// rank 0's values of every parameter into every rank's (broadcast; frozen ones too, as
// PyTorch does), allocates the buckets and hooks every parameter that requires grad
// (tensor's post-accumulate hook). All ranks must call it together.
// m stays the caller's: Release releases the buckets, not the module.
func NewDataParallel(m nn.Module, b Backend, c DataParallelConfig) (*DataParallel, error) {
	if c.BucketBytes < 0 || c.FirstBucketBytes < 0 {
		return nil, &Error{Op: "NewDataParallel", Rank: b.Group().Rank(), Peer: -1, Msg: fmt.Sprintf("bucket sizes %d and %d: want ≥ 0 (0: the default)", c.BucketBytes, c.FirstBucketBytes), Err: ErrConfig}
	}
	if c.BucketBytes == 0 {
		c.BucketBytes = DefaultBucketBytes
	}
	if c.FirstBucketBytes == 0 {
		c.FirstBucketBytes = DefaultFirstBucketBytes
	}
	dp := &DataParallel{module: m, b: b, sync: true, all: m.NamedParameters()}
	for _, p := range dp.all {
		if p.Tensor.RequiresGrad() {
			dp.params = append(dp.params, p)
		}
	}
	if err := dp.verify(); err != nil {
		return nil, err
	}
	if err := dp.broadcast(); err != nil {
		return nil, err
	}
	if err := tensor.Try(func() { dp.allocate(c) }); err != nil {
		dp.Release()
		return nil, err
	}
	dp.marked = make([]bool, len(dp.params))
	for i, p := range dp.params {
		p.Tensor.RegisterPostAccumulateHook(func() { dp.gradReady(i) })
	}
	return dp, nil
}

// verify checks that every rank has the same parameters as rank 0, and that the same
// of them require grad (else the ranks' buckets would hold different gradients).
func (dp *DataParallel) verify() error {
	g := dp.b.Group()
	lines := make([]string, len(dp.all))
	for i, p := range dp.all {
		lines[i] = fmt.Sprintf("%s %v%v", p.Name, p.Tensor.DType(), p.Tensor.Shape())
		if !p.Tensor.RequiresGrad() {
			lines[i] += " (frozen)"
		}
	}
	all, err := g.AllGatherBytes([]byte(strings.Join(lines, "\n")))
	if err != nil {
		return err
	}
	want := strings.Split(string(all[0]), "\n")
	for r, b := range all[1:] {
		got := strings.Split(string(b), "\n")
		if slices.Equal(got, want) {
			continue
		}
		msg := fmt.Sprintf("rank %d has %d parameters, rank 0 has %d", r+1, len(got), len(want))
		for i := range min(len(got), len(want)) {
			if got[i] != want[i] {
				msg = fmt.Sprintf("parameter %d is %s on rank %d and %s on rank 0", i, got[i], r+1, want[i])
				break
			}
		}
		return &Error{Op: "NewDataParallel", Rank: g.Rank(), Peer: r + 1, Msg: msg + ": every rank must build the same model", Err: ErrMismatch}
	}
	return nil
}

// broadcast copies rank 0's parameters into every rank's, all of them.
func (dp *DataParallel) broadcast() error {
	dp.b.GroupStart()
	var works []*Work
	var err error
	for _, p := range dp.all {
		var w *Work
		if w, err = dp.b.Broadcast(p.Tensor, 0); err != nil {
			break
		}
		works = append(works, w)
	}
	if endErr := dp.b.GroupEnd(); err == nil {
		err = endErr
	}
	for _, w := range works {
		if werr := w.Wait(); err == nil {
			err = werr
		}
	}
	return err
}

// allocate assigns the parameters to buckets and allocates them. It panics with a
// tensor error (out of memory) and leaves what it made in dp for Release.
func (dp *DataParallel) allocate(c DataParallelConfig) {
	dp.where = make([]slot, len(dp.params))
	for _, members := range assignBuckets(dp.params, c.FirstBucketBytes, c.BucketBytes) {
		b := &bucket{members: members, pending: len(members)}
		dp.buckets = append(dp.buckets, b)
		dp.stats.Buckets = append(dp.stats.Buckets, dp.allocateBucket(b, len(dp.buckets)-1))
		dp.stats.BucketBytes += b.flat.Bytes()
	}
}

// allocateBucket allocates b's flat tensor and its members' views, and returns its
// description.
func (dp *DataParallel) allocateBucket(b *bucket, index int) BucketInfo {
	first := dp.params[b.members[0]].Tensor
	n := 0
	for _, i := range b.members {
		n += dp.params[i].Tensor.Numel()
	}
	s := tensor.NewScope(tensor.NoGrad())
	defer s.Close()
	b.flat = s.Keep(s.Zeros(first.Device(), first.DType(), n))
	info := BucketInfo{DType: first.DType(), Bytes: b.flat.Bytes()}
	off := 0
	for k, i := range b.members {
		p := dp.params[i]
		size := p.Tensor.Numel()
		b.views = append(b.views, s.Keep(s.Bind(b.flat).Slice(0, off, off+size).View(p.Tensor.Shape()...)))
		dp.where[i] = slot{bucket: index, member: k}
		info.Params = append(info.Params, p.Name)
		off += size
	}
	return info
}

// assignBuckets groups the parameters into buckets, PyTorch's
// compute_bucket_assignment_by_size over the parameters in reverse order: per element
// type and device, parameters join the open bucket until it holds at least its cap
// (first for a kind's first bucket, then rest). Buckets are ordered by their first
// member, so the launch order follows backward's usual order.
func assignBuckets(params []nn.Parameter, first, rest int64) [][]int {
	type kind struct {
		dt  dtype.DType
		dev string
	}
	type open struct {
		members []int
		bytes   int64
		limit   int64
	}
	var done [][]int
	opened := map[kind]*open{}
	var order []kind // kinds in the order their buckets opened, for the leftovers
	for i := len(params) - 1; i >= 0; i-- {
		t := params[i].Tensor
		k := kind{t.DType(), t.Device().Name()}
		o := opened[k]
		if o == nil {
			o = &open{limit: first}
			opened[k] = o
			order = append(order, k)
		}
		o.members = append(o.members, i)
		o.bytes += t.Bytes()
		if o.bytes >= o.limit {
			done = append(done, o.members)
			o.members, o.bytes, o.limit = nil, 0, rest
		}
	}
	for _, k := range order {
		if o := opened[k]; len(o.members) > 0 {
			done = append(done, o.members)
		}
	}
	// reverse parameter order: a larger first member comes earlier
	slices.SortStableFunc(done, func(a, b []int) int { return b[0] - a[0] })
	return done
}

// Module returns the wrapped module (its parameters are what the optimizer steps).
func (dp *DataParallel) Module() nn.Module { return dp.module }

// Forward runs the module on x. It panics with ErrUnfinished when the previous
// backward did not reach every parameter (its gradients were never averaged, and the
// ranks would drift apart), and with the failure that stopped reductions, if one did.
func (dp *DataParallel) Forward(x *tensor.Tensor) *tensor.Tensor {
	if err := dp.check(); err != nil {
		panic(&tensor.Error{Op: "DataParallel.Forward", Err: err})
	}
	return dp.module.Forward(x)
}

// check reports why the next step cannot be reduced, if it cannot.
func (dp *DataParallel) check() error {
	g := dp.b.Group()
	switch {
	case dp.released:
		return &Error{Op: "DataParallel", Rank: g.Rank(), Peer: -1, Msg: "used after Release", Err: ErrClosed}
	case dp.err != nil:
		return dp.err
	case dp.ready > 0:
		var missing []string
		for i, ok := range dp.marked {
			if !ok {
				missing = append(missing, dp.params[i].Name)
			}
		}
		return &Error{Op: "DataParallel", Rank: g.Rank(), Peer: -1, Err: ErrUnfinished,
			Msg: fmt.Sprintf("the previous backward produced no gradient for %s, so no gradient was averaged: every parameter that requires grad must take part in the loss (or stop requiring grad)", strings.Join(missing, ", "))}
	}
	return nil
}

// NoSync runs f (forwards and backwards) without reducing gradients: they accumulate
// locally, and the first backward after NoSync averages the accumulated sums (gradient
// accumulation: PyTorch's no_sync).
func (dp *DataParallel) NoSync(f func()) {
	was := dp.sync
	dp.sync = false
	defer func() { dp.sync = was }()
	f()
}

// Stats returns the buckets and the counts of reductions so far.
func (dp *DataParallel) Stats() DataParallelStats {
	st := dp.stats
	st.Buckets = slices.Clone(st.Buckets)
	return st
}

// gradReady is params[i]'s post-accumulate hook: its gradient is final for this
// backward.
func (dp *DataParallel) gradReady(i int) {
	if dp.released || !dp.sync || dp.err != nil {
		return
	}
	if dp.marked[i] {
		dp.failStep(&Error{Op: "DataParallel", Rank: dp.b.Group().Rank(), Peer: -1, Err: ErrUnfinished,
			Msg: fmt.Sprintf("the gradient of %s was produced twice before the others were (a backward that did not reach every parameter, or two backwards through one graph): use NoSync for accumulation", dp.params[i].Name)})
	}
	at := dp.where[i]
	b := dp.buckets[at.bucket]
	b.views[at.member].CopyFrom(dp.params[i].Tensor.Grad())
	dp.marked[i] = true
	dp.ready++
	b.pending--
	for dp.next < len(dp.buckets) && dp.buckets[dp.next].pending == 0 {
		nb := dp.buckets[dp.next]
		w, err := dp.b.AllReduce(nb.flat, Avg)
		if err != nil {
			dp.failStep(err)
		}
		nb.work = w
		if dp.ready < len(dp.params) {
			dp.stats.Overlapped++
		}
		dp.next++
	}
	if dp.ready == len(dp.params) {
		dp.finish()
	}
}

// finish waits for every bucket and copies the averages back into the gradients.
func (dp *DataParallel) finish() {
	for _, b := range dp.buckets {
		err := b.work.Wait()
		b.work = nil
		if err != nil {
			dp.failStep(err)
		}
		for k, i := range b.members {
			dp.params[i].Tensor.Grad().CopyFrom(b.views[k])
		}
	}
	dp.reset()
	dp.stats.Reductions++
}

// reset readies the buckets for the next backward.
func (dp *DataParallel) reset() {
	for _, b := range dp.buckets {
		b.pending = len(b.members)
	}
	clear(dp.marked)
	dp.ready, dp.next = 0, 0
}

// failStep records err for good, waits out what is in flight and fails the backward
// (the hook's panic becomes Backward's error).
func (dp *DataParallel) failStep(err error) {
	dp.err = err
	dp.drain()
	panic(&tensor.Error{Op: "DataParallel", Msg: "reducing gradients", Err: err})
}

// drain waits for the all-reduces in flight (each is bounded by the group's timeout).
func (dp *DataParallel) drain() {
	for _, b := range dp.buckets {
		if b.work != nil {
			_ = b.work.Wait()
			b.work = nil
		}
	}
}

// Release waits for any all-reduce still in flight (after a failed backward) and
// releases the buckets; the hooks do nothing afterwards. The module and the backend
// stay the caller's. Releasing again does nothing.
func (dp *DataParallel) Release() {
	if dp.released {
		return
	}
	dp.released = true
	dp.drain()
	for _, b := range dp.buckets {
		for _, v := range b.views {
			v.Release()
		}
		b.flat.Release()
	}
	dp.buckets = nil
}
