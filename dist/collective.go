package dist

import (
	"fmt"
	"sync"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
)

// ReduceOp is how a reduction combines the ranks' elements.
type ReduceOp uint8

const (
	Sum  ReduceOp = iota + 1 // the sum
	Avg                      // the sum divided by the world size (floating types only)
	Max                      // the largest element (a NaN wins)
	Min                      // the smallest element (a NaN wins)
	Prod                     // the product
)

func (o ReduceOp) String() string {
	switch o {
	case Sum:
		return "sum"
	case Avg:
		return "avg"
	case Max:
		return "max"
	case Min:
		return "min"
	case Prod:
		return "prod"
	}
	return fmt.Sprintf("ReduceOp(%d)", uint8(o))
}

// Backend runs collectives on tensors across the ranks of its Group: CPU over the
// group's TCP connections, NCCL on GPUs.
//
// Every collective is asynchronous: it is issued in order (every rank must issue the
// same collectives in the same order) and returns a Work; the tensors it names belong
// to the backend until Work.Wait returns, and must not be read, written or released
// before. An argument that cannot work (a shape that does not fit, a type or device
// the backend cannot carry) is an error at once, on this rank only, and issues
// nothing. A failure while the collective runs (a timeout, a rank gone, ranks that
// disagree) breaks the group and is what Wait returns, on every rank.
type Backend interface {
	// Name is "cpu" or "nccl".
	Name() string
	// Group is the process group the backend runs on.
	Group() *Group
	// AllReduce reduces t over the ranks, in place: every rank ends with the same
	// elements.
	AllReduce(t *tensor.Tensor, op ReduceOp) (*Work, error)
	// Broadcast copies root's t into every other rank's t.
	Broadcast(t *tensor.Tensor, root int) (*Work, error)
	// AllGather writes every rank's in into out, rank after rank: out has WorldSize
	// times in's elements.
	AllGather(out, in *tensor.Tensor) (*Work, error)
	// ReduceScatter reduces in over the ranks and leaves block Rank of the result in
	// out: in has WorldSize times out's elements.
	ReduceScatter(out, in *tensor.Tensor, op ReduceOp) (*Work, error)
	// GroupStart and GroupEnd bracket collectives that are issued together at GroupEnd
	// (NCCL fuses them); their Works may be waited for only after GroupEnd. Groups
	// nest; only the outermost GroupEnd issues. A group belongs to the backend, so
	// issue it from one goroutine.
	GroupStart()
	GroupEnd() error
	// Abort breaks the group now (see Group.Abort): collectives in flight fail with
	// ErrAborted on every rank.
	Abort(reason string)
	// Close releases what the backend holds (NCCL's communicator); the group stays
	// open. Collectives after Close fail with ErrClosed.
	Close() error
}

// Work is an issued collective. Wait returns once it has completed on this rank (its
// tensors are then the caller's again) with its error, the same at every call.
type Work struct {
	// early, when set, returns an error for a Wait that comes too early (inside the
	// open group that holds the collective), and nil once waiting can work.
	early func() error
	wait  func() error
	once  sync.Once
	err   error
}

// Wait waits for the collective and returns its error. It may be called from any
// goroutine, any number of times. Inside the open group that holds the collective it
// returns an error at once, and waits again once the group has ended.
func (w *Work) Wait() error {
	if w.early != nil {
		if err := w.early(); err != nil {
			return err
		}
	}
	w.once.Do(func() { w.err = w.wait() })
	return w.err
}

// argError is the error of a collective's bad argument, on this rank.
func argError(g *Group, m meta, cause error, format string, args ...any) error {
	return &Error{Op: m.String(), Rank: g.cfg.Rank, Peer: -1, Msg: fmt.Sprintf(format, args...), Err: cause}
}

// collective describes a collective and checks its tensors (nil for in when there is
// one tensor): live, of one device and type, with sizes that fit, a reduction the type
// takes and a root of the group.
func collective(g *Group, op opKind, redop ReduceOp, root int, out, in *tensor.Tensor) (meta, error) {
	ts := []*tensor.Tensor{out}
	if in != nil {
		ts = append(ts, in)
	}
	m := meta{op: op, redop: redop, root: root}
	for _, t := range ts {
		if t == nil {
			return m, argError(g, m, tensor.ErrShape, "a nil tensor")
		}
		if t.Released() {
			return m, argError(g, m, tensor.ErrReleased, "")
		}
	}
	src := ts[len(ts)-1]
	m.dt, m.count = src.DType(), src.Numel()
	if in != nil {
		switch {
		case in.DType() != out.DType():
			return m, argError(g, m, tensor.ErrDType, "out is %v, in is %v: they must agree", out.DType(), in.DType())
		case in.Device() != out.Device():
			return m, argError(g, m, tensor.ErrDevice, "out is on %s, in on %s", out.Device().Name(), in.Device().Name())
		case op == opAllGather && out.Numel() != g.cfg.WorldSize*in.Numel():
			return m, argError(g, m, tensor.ErrShape, "out has %d elements, not world size %d × in's %d", out.Numel(), g.cfg.WorldSize, in.Numel())
		case op == opReduceScatter && in.Numel() != g.cfg.WorldSize*out.Numel():
			return m, argError(g, m, tensor.ErrShape, "in has %d elements, not world size %d × out's %d", in.Numel(), g.cfg.WorldSize, out.Numel())
		}
	}
	if op == opAllReduce || op == opReduceScatter {
		switch {
		case redop < Sum || redop > Prod:
			return m, argError(g, m, ErrUnsupported, "unknown reduction %v", redop)
		case !m.dt.IsFloat() && redop == Avg:
			return m, argError(g, m, ErrUnsupported, "an average of %v elements: reduce with Sum and divide", m.dt)
		case m.dt == dtype.Bool:
			return m, argError(g, m, ErrUnsupported, "a reduction of %v elements", m.dt)
		}
	}
	if op == opBroadcast {
		if err := g.checkRoot(root); err != nil {
			return m, err
		}
	}
	return m, nil
}
