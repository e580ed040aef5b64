package dist

import (
	"fmt"
	"sync"
	"time"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/cuda"
	"github.com/subletml/sublet/dist/nccl"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
)

// NewBackend returns the backend for tensors on dev: NCCL for a CUDA GPU, CPU for
// devices whose memory the host can address (cpu, sim with a backing store).
func NewBackend(g *Group, dev device.Device) (Backend, error) {
	if dev.Kind() == device.CUDA {
		return NewNCCL(g, dev)
	}
	return NewCPU(g), nil
}

// NCCL is the GPU backend: collectives through NVIDIA's NCCL (package dist/nccl, loaded
// at run time) on contiguous tensors in one GPU's memory per rank. Each collective is
// enqueued on the default stream (device.Stream 0), the stream tensor ops run on, so it
// is ordered after the ops that produced its tensors and before the ops that follow;
// NCCL reduces on the GPU, in its own order (bitwise equality across ranks is NCCL's
// guarantee for all-reduce, not a CPU reduction's).
//
// Work.Wait waits on the host for an event recorded after the collective, checking
// NCCL's asynchronous error as it waits; when the collective has not completed within
// the group's timeout, or NCCL reports an error, the communicator is aborted
// (ncclCommAbort), the group too, and that collective and every later one fail (the
// other ranks' hit their own timeout or NCCL's error).
type NCCL struct {
	// Immutable after NewNCCL.
	g    *Group
	dev  gpuDevice
	comm *nccl.Comm

	mu     sync.Mutex
	depth  int         // guarded by mu: open GroupStart calls
	held   []*ncclWork // guarded by mu: collectives of the open group, recorded at GroupEnd
	closed bool        // guarded by mu: Close ran
	failed error       // guarded by mu: the failure that aborted the communicator
}

// gpuDevice is a device NCCL can work on: a *cuda.Device (tests stand a simulated one
// in).
type gpuDevice interface {
	device.Device
	MakeCurrent() error
}

var _ gpuDevice = (*cuda.Device)(nil)

// ncclWork is one issued collective. Its fields are guarded by the backend's mu until
// its event is recorded, then read-only.
type ncclWork struct {
	m     meta
	event device.Event // recorded on stream 0 after the collective, 0 until then
	err   error        // recording the event failed
}

// NewNCCL makes the NCCL backend of g on dev, a CUDA GPU (cuda:LocalRank, usually):
// every rank checks that NCCL loads, rank 0 makes the communicator's id and sends it
// over the group, and every rank joins the communicator (bounded by the group's
// timeout). A rank that cannot is named in every rank's error. All ranks call it
// together.
func NewNCCL(g *Group, dev device.Device) (*NCCL, error) {
	gpu, ok := dev.(gpuDevice)
	if !ok {
		return nil, &Error{Op: "NewNCCL", Rank: g.Rank(), Peer: -1, Msg: fmt.Sprintf("NCCL needs a CUDA GPU, not %s (use the CPU backend)", dev.Name()), Err: ErrUnsupported}
	}
	if err := agree(g, "loading NCCL", func() error { _, err := nccl.Version(); return err }); err != nil {
		return nil, err
	}
	var msg []byte
	if g.Rank() == 0 {
		id, err := nccl.NewUniqueID()
		if err != nil {
			msg = append([]byte{1}, err.Error()...)
		} else {
			msg = append([]byte{0}, id[:]...)
		}
	}
	msg, err := g.BroadcastBytes(msg, 0)
	if err != nil {
		return nil, err
	}
	if msg[0] != 0 || len(msg) != 1+nccl.UniqueIDBytes {
		return nil, &Error{Op: "NewNCCL", Rank: g.Rank(), Peer: 0, Msg: "rank 0 could not make the NCCL id: " + string(msg[1:]), Err: ErrBackend}
	}
	var id nccl.UniqueID
	copy(id[:], msg[1:])
	var comm *nccl.Comm
	if err := agree(g, "joining the NCCL communicator", func() error {
		var err error
		comm, err = nccl.InitRank(gpu, g.WorldSize(), g.Rank(), id, g.Timeout())
		return err
	}); err != nil {
		if comm != nil {
			_ = comm.Abort()
		}
		return nil, err
	}
	return &NCCL{g: g, dev: gpu, comm: comm}, nil
}

// agree runs f on every rank and tells every rank which ranks' f failed.
func agree(g *Group, what string, f func() error) error {
	status := []byte{0}
	err := f()
	if err != nil {
		status = append([]byte{1}, err.Error()...)
	}
	all, gerr := g.AllGatherBytes(status)
	if gerr != nil {
		return gerr
	}
	for r, s := range all {
		if s[0] != 0 {
			e := &Error{Op: "NewNCCL", Rank: g.Rank(), Peer: r, Msg: fmt.Sprintf("rank %d failed %s: %s", r, what, s[1:]), Err: ErrBackend}
			if r == g.Rank() {
				e.Err = fmt.Errorf("%w: %w", ErrBackend, err)
			}
			return e
		}
	}
	return nil
}

// Name returns "nccl".
func (b *NCCL) Name() string { return "nccl" }

// Group returns the backend's group.
func (b *NCCL) Group() *Group { return b.g }

// ncclType is the NCCL type of dt's elements.
func ncclType(dt dtype.DType) nccl.DataType {
	switch dt {
	case dtype.F32:
		return nccl.Float32
	case dtype.F16:
		return nccl.Float16
	case dtype.BF16:
		return nccl.BFloat16
	case dtype.I32:
		return nccl.Int32
	case dtype.I64:
		return nccl.Int64
	}
	return nccl.Uint8 // Bool: moved, never reduced (collective refuses that)
}

var ncclOps = map[ReduceOp]nccl.RedOp{Sum: nccl.Sum, Avg: nccl.Avg, Max: nccl.Max, Min: nccl.Min, Prod: nccl.Prod}

// pointers returns the device addresses of the tensors of collective m, which must be
// contiguous and on the backend's GPU. NCCL writes them behind the tensor package's
// back, so each storage's version is bumped.
func (b *NCCL) pointers(m meta, ts ...*tensor.Tensor) ([]device.Ptr, error) {
	out := make([]device.Ptr, len(ts))
	for i, t := range ts {
		switch {
		case t.Device() != device.Device(b.dev):
			return nil, argError(b.g, m, tensor.ErrDevice, "the tensor is on %s, the backend on %s", t.Device().Name(), b.dev.Name())
		case !t.IsContiguous():
			return nil, argError(b.g, m, ErrUnsupported, "NCCL needs contiguous tensors (call Contiguous, and copy back)")
		}
		out[i] = t.Storage().Ptr() + device.Ptr(t.Offset()*t.DType().Size())
	}
	for _, t := range ts {
		t.Storage().BumpVersion()
	}
	return out, nil
}

// AllReduce reduces t over the ranks, in place.
func (b *NCCL) AllReduce(t *tensor.Tensor, op ReduceOp) (*Work, error) {
	m, err := collective(b.g, opAllReduce, op, 0, t, nil)
	if err != nil {
		return nil, err
	}
	p, err := b.pointers(m, t)
	if err != nil {
		return nil, err
	}
	return b.issue(m, func() error { return b.comm.AllReduce(p[0], p[0], m.count, ncclType(m.dt), ncclOps[op], 0) })
}

// Broadcast copies root's t into every other rank's t.
func (b *NCCL) Broadcast(t *tensor.Tensor, root int) (*Work, error) {
	m, err := collective(b.g, opBroadcast, 0, root, t, nil)
	if err != nil {
		return nil, err
	}
	p, err := b.pointers(m, t)
	if err != nil {
		return nil, err
	}
	return b.issue(m, func() error { return b.comm.Broadcast(p[0], p[0], m.count, ncclType(m.dt), root, 0) })
}

// AllGather writes every rank's in into out, rank after rank.
func (b *NCCL) AllGather(out, in *tensor.Tensor) (*Work, error) {
	m, err := collective(b.g, opAllGather, 0, 0, out, in)
	if err != nil {
		return nil, err
	}
	p, err := b.pointers(m, out, in)
	if err != nil {
		return nil, err
	}
	return b.issue(m, func() error { return b.comm.AllGather(p[1], p[0], m.count, ncclType(m.dt), 0) })
}

// ReduceScatter reduces in over the ranks and leaves block Rank of the result in out.
func (b *NCCL) ReduceScatter(out, in *tensor.Tensor, op ReduceOp) (*Work, error) {
	m, err := collective(b.g, opReduceScatter, op, 0, out, in)
	if err != nil {
		return nil, err
	}
	p, err := b.pointers(m, out, in)
	if err != nil {
		return nil, err
	}
	return b.issue(m, func() error {
		return b.comm.ReduceScatter(p[1], p[0], out.Numel(), ncclType(m.dt), ncclOps[op], 0)
	})
}

// issue enqueues a collective with call and returns its Work; inside a group its event
// is recorded at GroupEnd.
func (b *NCCL) issue(m meta, call func() error) (*Work, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.failed != nil:
		return nil, b.failed
	case b.closed:
		return nil, argError(b.g, m, ErrClosed, "the backend was closed")
	}
	if err := b.bounded(m.String(), call); err != nil {
		return nil, b.failLocked(argError(b.g, m, fmt.Errorf("%w: %w", ErrBackend, err), "NCCL refused the collective; the communicator was aborted"))
	}
	w := &ncclWork{m: m}
	if b.depth > 0 {
		b.held = append(b.held, w)
	} else {
		b.record(w)
	}
	return &Work{
		early: func() error {
			b.mu.Lock()
			defer b.mu.Unlock()
			if w.event == 0 && w.err == nil && b.failed == nil {
				return argError(b.g, m, ErrConfig, "Wait inside an open group: call GroupEnd first")
			}
			return nil
		},
		wait: func() error { return b.wait(w) },
	}, nil
}

// bounded runs an NCCL call, under mu, within the timeout: a call can block (the first
// collective sets up the connections to the peers, and waits for them); past the
// timeout the communicator is aborted, which ends the call, and the error says why.
func (b *NCCL) bounded(what string, call func() error) error {
	done := make(chan error, 1)
	go func() { done <- call() }()
	timer := time.NewTimer(b.g.Timeout())
	defer timer.Stop()
	select {
	case err := <-done:
		return err
	case <-timer.C:
		return b.failLocked(&Error{Op: what, Rank: b.g.Rank(), Peer: -1, Err: ErrTimeout,
			Msg: fmt.Sprintf("NCCL did not return within %v: a rank is hung, dead or far behind (if it is only slow, raise %s); the communicator was aborted", b.g.Timeout(), EnvTimeout)})
	}
}

// record records w's event on stream 0, under mu.
func (b *NCCL) record(w *ncclWork) {
	e, err := b.dev.NewEvent()
	if err == nil {
		if err = b.dev.RecordEvent(e, 0); err != nil {
			_ = b.dev.DestroyEvent(e)
		}
	}
	if err != nil {
		w.err = err
		return
	}
	w.event = e
}

// waitPause bounds the pause between two polls of a collective's event.
const waitPause = time.Millisecond

// wait waits for w's event, polling NCCL's asynchronous error, until the timeout.
func (b *NCCL) wait(w *ncclWork) error {
	b.mu.Lock()
	failed := b.failed
	b.mu.Unlock()
	switch {
	case w.err != nil:
		return b.fail(argError(b.g, w.m, fmt.Errorf("%w: %w", ErrBackend, w.err), "cannot record the collective's event"))
	case w.event == 0: // its group failed at GroupEnd
		return failed
	}
	defer func() { _ = b.dev.DestroyEvent(w.event) }()
	deadline := time.Now().Add(b.g.Timeout())
	pause := 10 * time.Microsecond
	for {
		done, err := b.dev.QueryEvent(w.event)
		switch {
		case err != nil:
			return b.fail(argError(b.g, w.m, fmt.Errorf("%w: %w", ErrBackend, err), "the GPU failed while the collective ran; the communicator was aborted"))
		case done:
			return nil
		}
		if err := b.comm.AsyncError(); err != nil {
			return b.fail(argError(b.g, w.m, fmt.Errorf("%w: %w", ErrBackend, err), "NCCL failed (a rank died, or the network); the communicator was aborted"))
		}
		b.mu.Lock()
		failed := b.failed
		b.mu.Unlock()
		if failed != nil {
			return failed
		}
		if time.Now().After(deadline) {
			return b.fail(argError(b.g, w.m, ErrTimeout, "the collective did not complete within %v: a rank is hung, dead or far behind (if it is only slow, raise %s); the communicator was aborted", b.g.Timeout(), EnvTimeout))
		}
		time.Sleep(pause)
		pause = min(2*pause, waitPause)
	}
}

// fail aborts the communicator and the group for err (the first failure stays) and
// returns the failure in force.
func (b *NCCL) fail(err error) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.failLocked(err)
}

func (b *NCCL) failLocked(err error) error {
	if b.failed != nil {
		return b.failed
	}
	b.failed = err
	_ = b.comm.Abort()
	go b.g.Abort(err.Error()) // not under mu: the group's worker may be busy for a while
	return err
}

// GroupStart opens a group (ncclGroupStart for the outermost).
func (b *NCCL) GroupStart() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.depth++
	if b.depth == 1 && b.failed == nil && !b.closed {
		if err := b.comm.GroupStart(); err != nil {
			b.failLocked(&Error{Op: "GroupStart", Rank: b.g.Rank(), Peer: -1, Msg: "NCCL refused it", Err: fmt.Errorf("%w: %w", ErrBackend, err)})
		}
	}
}

// GroupEnd closes a group; the outermost launches its collectives (ncclGroupEnd).
func (b *NCCL) GroupEnd() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.depth == 0 {
		return &Error{Op: "GroupEnd", Rank: b.g.Rank(), Peer: -1, Msg: "no group is open (GroupEnd without GroupStart)", Err: ErrConfig}
	}
	b.depth--
	if b.depth > 0 {
		return nil
	}
	held := b.held
	b.held = nil
	if b.failed != nil {
		return b.failed
	}
	if err := b.bounded("GroupEnd", b.comm.GroupEnd); err != nil {
		return b.failLocked(&Error{Op: "GroupEnd", Rank: b.g.Rank(), Peer: -1, Msg: "NCCL could not launch the group; the communicator was aborted", Err: fmt.Errorf("%w: %w", ErrBackend, err)})
	}
	for _, w := range held {
		b.record(w)
	}
	return nil
}

// Abort aborts the communicator and the group now.
func (b *NCCL) Abort(reason string) {
	b.fail(&Error{Rank: b.g.Rank(), Peer: -1, Msg: "aborted: " + reason, Err: ErrAborted})
}

// Close destroys the communicator once its collectives are done (ncclCommFinalize, then
// ncclCommDestroy), bounded by the group's timeout, after which it aborts it; after a
// failure the communicator is already aborted. The group stays open. NCCL's own device
// memory is freed either way.
func (b *NCCL) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	failed := b.failed
	b.mu.Unlock()
	if failed != nil {
		return nil
	}
	done := make(chan error, 1)
	go func() { done <- b.comm.Destroy() }()
	select {
	case err := <-done:
		return err
	case <-time.After(b.g.Timeout()):
		_ = b.comm.Abort()
		return &Error{Op: "Close", Rank: b.g.Rank(), Peer: -1, Msg: fmt.Sprintf("NCCL's collectives did not complete within %v; the communicator was aborted", b.g.Timeout()), Err: ErrTimeout}
	}
}
