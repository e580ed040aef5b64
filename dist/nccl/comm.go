package nccl

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"
	"unsafe"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/cuda"
)

// UniqueIDBytes is NCCL_UNIQUE_ID_BYTES.
const UniqueIDBytes = 128

// UniqueID is an ncclUniqueId: made by one rank, given to all, it names a communicator.
type UniqueID [UniqueIDBytes]byte

// NewUniqueID makes the id of a new communicator (ncclGetUniqueId). Rank 0 calls it and
// hands the id to every rank.
func NewUniqueID() (UniqueID, error) {
	var id UniqueID
	l, err := load()
	if err != nil {
		return id, err
	}
	if r := syscallN(l.getUniqueID, uintptr(unsafe.Pointer(&id[0]))); r != success {
		return id, l.errorf(r, 0, "ncclGetUniqueId")
	}
	return id, nil
}

// ErrTimeout is wrapped by InitRank's error when the ranks did not all join in time.
var ErrTimeout = errors.New("nccl: timed out")

// ErrClosed is returned by a Comm's calls after Destroy or Abort.
var ErrClosed = errors.New("nccl: communicator destroyed or aborted")

// GPU is the device a communicator works on: a *cuda.Device.
type GPU interface {
	Name() string
	// MakeCurrent makes the GPU's context current on the calling (locked) OS thread.
	MakeCurrent() error
}

var _ GPU = (*cuda.Device)(nil)

// Comm is one rank's NCCL communicator on one GPU.
type Comm struct {
	// Immutable after InitRank.
	lib          *lib
	dev          GPU
	comm         uintptr // ncclComm_t
	rank, nranks int

	// calls is the issuer's queue: each call runs there, on its locked thread. quit is
	// closed when the communicator is destroyed or aborted: the issuer exits, and
	// waiting callers return ErrClosed.
	calls chan func()
	quit  chan struct{}

	// mu orders AsyncError (read) before Abort and Destroy free the communicator
	// (write).
	mu     sync.RWMutex
	closed bool // guarded by mu
}

// InitRank joins the communicator id names as rank of nranks, on dev
// (ncclCommInitRankScalable with one id and the default configuration, which is
// ncclCommInitRank: the latter takes the 128-byte id by value, which on x86-64 goes on
// the stack, beyond what purego can pass). It blocks until every rank has joined; if
// that takes longer than timeout it returns an error wrapping ErrTimeout, and the
// goroutine NCCL holds stays blocked (NCCL cannot abort a communicator that does not
// exist yet): end the process.
func InitRank(dev GPU, nranks, rank int, id UniqueID, timeout time.Duration) (*Comm, error) {
	l, err := load()
	if err != nil {
		return nil, err
	}
	if nranks < 1 || rank < 0 || rank >= nranks {
		return nil, fmt.Errorf("nccl: InitRank: rank %d of %d: want 0 ≤ rank < nranks", rank, nranks)
	}
	c := &Comm{lib: l, dev: dev, rank: rank, nranks: nranks, calls: make(chan func()), quit: make(chan struct{})}
	ready := make(chan error, 1)
	go c.issue(ready)
	if err := <-ready; err != nil {
		return nil, err
	}
	result := make(chan error, 1)
	c.calls <- func() {
		if r := syscallN(l.commInitRankScalable, uintptr(unsafe.Pointer(&c.comm)), uintptr(nranks), uintptr(rank), 1,
			uintptr(unsafe.Pointer(&id[0])), 0); r != success {
			result <- l.errorf(r, 0, "ncclCommInitRankScalable(%d ranks, rank %d, %s)", nranks, rank, dev.Name())
			return
		}
		result <- nil
	}
	select {
	case err := <-result:
		if err != nil {
			c.stop()
			return nil, err
		}
		return c, nil
	case <-time.After(timeout):
		return nil, fmt.Errorf("%w: ncclCommInitRankScalable: rank %d of %d on %s: not every rank joined within %v", ErrTimeout, rank, nranks, dev.Name(), timeout)
	}
}

// issue is the issuer goroutine: locked to its thread for good, with the GPU's context
// current, it runs the queued calls until quit is closed. Its thread ends with it, and
// NCCL's per-thread state with the thread.
func (c *Comm) issue(ready chan<- error) {
	runtime.LockOSThread()
	if err := c.dev.MakeCurrent(); err != nil {
		ready <- err
		return
	}
	ready <- nil
	for {
		select {
		case f := <-c.calls:
			select {
			case <-c.quit:
				return // closed meanwhile: f's caller gets ErrClosed
			default:
				f()
			}
		case <-c.quit:
			return
		}
	}
}

// close marks the communicator closed and stops the issuer; it reports whether it was
// open.
func (c *Comm) close() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.closed = true
	close(c.quit)
	return true
}

// stop ends the issuer of a communicator that init did not make.
func (c *Comm) stop() { c.close() }

// call runs fn on the issuer and returns the error of the NCCL call it makes, described
// by format and args. Once the communicator is closed (also while fn waits its turn or
// runs, by an Abort from another goroutine) it returns ErrClosed.
func (c *Comm) call(fn func() result, format string, args ...any) error {
	res := make(chan result, 1)
	select {
	case c.calls <- func() { res <- fn() }:
	case <-c.quit:
		return ErrClosed
	}
	select {
	case r := <-res:
		if r != success {
			return c.lib.errorf(r, c.comm, format, args...)
		}
		return nil
	case <-c.quit:
		return ErrClosed
	}
}

// Rank is this communicator's rank; NRanks the number of ranks.
func (c *Comm) Rank() int   { return c.rank }
func (c *Comm) NRanks() int { return c.nranks }

// AllReduce reduces count elements of send over the ranks into recv (send == recv:
// in place), enqueued on stream s.
func (c *Comm) AllReduce(send, recv device.Ptr, count int, dt DataType, op RedOp, s device.Stream) error {
	return c.call(func() result {
		return syscallN(c.lib.allReduce, uintptr(send), uintptr(recv), uintptr(count), uintptr(dt), uintptr(op), c.comm, uintptr(s))
	}, "ncclAllReduce(%d elements of type %d, op %d)", count, dt, op)
}

// Broadcast copies count elements of root's send into every rank's recv, on stream s.
func (c *Comm) Broadcast(send, recv device.Ptr, count int, dt DataType, root int, s device.Stream) error {
	return c.call(func() result {
		return syscallN(c.lib.broadcast, uintptr(send), uintptr(recv), uintptr(count), uintptr(dt), uintptr(root), c.comm, uintptr(s))
	}, "ncclBroadcast(%d elements of type %d, root %d)", count, dt, root)
}

// AllGather gathers sendCount elements from every rank into recv (rank r's at
// r·sendCount), on stream s.
func (c *Comm) AllGather(send, recv device.Ptr, sendCount int, dt DataType, s device.Stream) error {
	return c.call(func() result {
		return syscallN(c.lib.allGather, uintptr(send), uintptr(recv), uintptr(sendCount), uintptr(dt), c.comm, uintptr(s))
	}, "ncclAllGather(%d elements of type %d)", sendCount, dt)
}

// ReduceScatter reduces send (nranks·recvCount elements) over the ranks and leaves block
// Rank of the result in recv, on stream s.
func (c *Comm) ReduceScatter(send, recv device.Ptr, recvCount int, dt DataType, op RedOp, s device.Stream) error {
	return c.call(func() result {
		return syscallN(c.lib.reduceScatter, uintptr(send), uintptr(recv), uintptr(recvCount), uintptr(dt), uintptr(op), c.comm, uintptr(s))
	}, "ncclReduceScatter(%d elements of type %d, op %d)", recvCount, dt, op)
}

// GroupStart opens a group on the issuer's thread: the collectives that follow are
// launched together by GroupEnd.
func (c *Comm) GroupStart() error {
	return c.call(func() result { return syscallN(c.lib.groupStart) }, "ncclGroupStart")
}

// GroupEnd launches the group's collectives.
func (c *Comm) GroupEnd() error {
	return c.call(func() result { return syscallN(c.lib.groupEnd) }, "ncclGroupEnd")
}

// AsyncError returns the communicator's asynchronous error (a peer gone, a network
// failure), nil while there is none. It may be called from any goroutine, also while a
// call is blocked.
func (c *Comm) AsyncError() error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return ErrClosed
	}
	var async int32
	if r := syscallN(c.lib.commGetAsyncError, c.comm, uintptr(unsafe.Pointer(&async))); r != success {
		return c.lib.errorf(r, c.comm, "ncclCommGetAsyncError")
	}
	if a := result(async); a != success && a != inProgress {
		return c.lib.errorf(a, c.comm, "ncclCommGetAsyncError: the communicator failed")
	}
	return nil
}

// Abort ends the communicator now (ncclCommAbort), from any goroutine: collectives in
// flight stop, its resources (device memory included) are freed, and later calls return
// ErrClosed. It is idempotent.
func (c *Comm) Abort() error {
	if !c.close() {
		return nil
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	err := c.dev.MakeCurrent()
	if r := syscallN(c.lib.commAbort, c.comm); r != success && err == nil {
		err = c.lib.errorf(r, 0, "ncclCommAbort")
	}
	return err
}

// Destroy waits for the communicator's collectives (ncclCommFinalize), frees its
// resources (ncclCommDestroy) and stops the issuer. A peer that never completes them
// makes Destroy wait: on a failed group, Abort instead (it may come from another
// goroutine while Destroy waits).
func (c *Comm) Destroy() error {
	err := c.call(func() result { return syscallN(c.lib.commFinalize, c.comm) }, "ncclCommFinalize")
	if err == nil {
		c.mu.Lock() // AsyncError no longer reads the communicator
		c.closed = true
		c.mu.Unlock()
		res := make(chan result, 1)
		c.calls <- func() {
			res <- syscallN(c.lib.commDestroy, c.comm)
			close(c.quit) // on the issuer: it runs nothing after
		}
		if r := <-res; r != success {
			err = c.lib.errorf(r, 0, "ncclCommDestroy")
		}
		return err
	}
	if !errors.Is(err, ErrClosed) {
		_ = c.Abort() // a failed finalize leaves the communicator to abort
	}
	return err
}
