package tensor

import (
	"fmt"
	"slices"

	"github.com/subletml/sublet/autograd"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
)

// Tensor is a handle to an n-dimensional array in device memory: a shape, strides and
// an offset (in elements) over a Storage, an element type, and its place in the graph.
// Views are other handles over the same storage. A handle is used by one goroutine at a
// time (as its scope is); see the package doc for who owns it and when it is released.
type Tensor struct {
	// Set at creation, never changed; nor are the elements of shape and strides, so
	// handles share those slices (append to a clipped copy only). dt is with the
	// other small fields at the end, which fill one word together.
	shape   []int
	strides []int
	offset  int
	st      *Storage
	h       *handle // release flag and allocation site, read by the leak report

	// node is the op that produced the handle (grad_fn), nil for leaves and for handles
	// made without recording; the handle holds one reference to it. Every op has one
	// output: the handle is the node's output slot 0.
	node *autograd.Node
	// The gradient cell, of a leaf that requires grad or of a non-leaf that retains
	// its gradient, is h.cell.

	// scope owns the handle (nil: the caller or a module owns it). adopt and forget
	// write it under the scope's mu, called only by the goroutine using the handle,
	// which therefore reads it without the lock; Close from another goroutine never
	// writes it (a handle Close released keeps it; Scope hides it). pos is the handle's
	// index in scope.owned, guarded by the scope's mu.
	scope *Scope
	pos   int
	// place is where the handle was made or bound: its scope, or a region (With) of
	// it, whose modes the ops on the handle follow while it is open. Written with
	// scope; for the incoming gradient of a backward rule, which the engine owns,
	// the rule's scope while the rule runs.
	place *Scope

	dt dtype.DType
	// sharedAlloc says h was allocated with the Tensor (withHandle): nothing but the
	// Tensor reads it. watch and adopt move such a handle out (ownHandle) before a
	// cleanup or a ledger reads it. Written only by the goroutine using the handle.
	sharedAlloc bool
	// inBlock says the Tensor was allocated with its storage (resultBlock): it must
	// never be watched nor owned by a scope with a ledger. Set at creation.
	inBlock bool
	// requiresGrad says gradients flow to this handle: a leaf that asked for them, or
	// the output of a recorded op. Set at creation (SetRequiresGrad changes it on a
	// leaf before it is used).
	requiresGrad bool
	// born is the scope's step count when it adopted the handle (Scope.steps), for the
	// growth report; guarded by the scope's mu.
	born uint32
}

// Shape returns a copy of the sizes of the dimensions.
func (t *Tensor) Shape() []int { return slices.Clone(t.shape) }

// Dim returns the size of dimension i (negative i counts from the end).
func (t *Tensor) Dim(i int) int {
	a, ok := axis(i, len(t.shape))
	if !ok {
		fail("Dim", ErrShape, []*Tensor{t}, "dimension %d of a rank-%d tensor", i, len(t.shape))
	}
	return t.shape[a]
}

// Rank is the number of dimensions.
func (t *Tensor) Rank() int { return len(t.shape) }

// Strides returns a copy of the strides, in elements.
func (t *Tensor) Strides() []int { return slices.Clone(t.strides) }

// Offset is the position of the first element in the storage, in elements.
func (t *Tensor) Offset() int { return t.offset }

// Numel is the number of elements.
func (t *Tensor) Numel() int { return numel(t.shape) }

// DType is the element type.
func (t *Tensor) DType() dtype.DType { return t.dt }

// Bytes is the size of the elements: Numel × DType().Size(). A contiguous tensor that
// owns its storage has a storage of exactly this size.
func (t *Tensor) Bytes() int64 { return int64(t.Numel()) * int64(t.dt.Size()) }

// Device is the device holding the data.
func (t *Tensor) Device() device.Device { return t.st.dev }

// Storage is the memory block under the handle, shared with its views.
func (t *Tensor) Storage() *Storage { return t.st }

// IsContiguous reports whether the elements sit row-major and dense in the storage.
func (t *Tensor) IsContiguous() bool { return contiguous(t.shape, t.strides) }

// Scope is the scope owning the handle, nil when the caller (a module) owns it or the
// handle was released.
func (t *Tensor) Scope() *Scope {
	if t.h.released.Load() {
		return nil
	}
	return t.scope
}

// RequiresGrad reports whether gradients flow to this tensor.
func (t *Tensor) RequiresGrad() bool { return t.requiresGrad }

// IsLeaf reports whether the tensor was not produced by a recorded op.
func (t *Tensor) IsLeaf() bool { return t.node == nil }

// Released reports whether Release was called (or the owning scope closed).
func (t *Tensor) Released() bool { return t.h.released.Load() }

// IsInference reports whether t is an inference tensor: made in inference mode (or a
// view of one), it counts no in-place writes and cannot be saved for backward.
func (t *Tensor) IsInference() bool { return t.st.inference }

// Version is the storage's count of in-place writes; a saved tensor remembers it (0
// for an inference tensor, which counts none).
func (t *Tensor) Version() uint64 { return t.st.version.Load() }

// String prints t as PyTorch does, values first (summarized to the first and last
// three items of each long dimension past 1000 elements; downloaded from a GPU), then
// the shape, dtype, device and graph: Tensor([[1., 2.], [3., 4.]], shape=[2 2],
// dtype=float32, device=cpu, requires_grad) with one row per line. Where values cannot
// be read (a released handle, a device that keeps no data) only the rest is printed.
func (t *Tensor) String() string {
	const prefix = "Tensor("
	if v, ok := t.formatValues(len(prefix)); ok {
		return prefix + v + ", " + t.metadata() + ")"
	}
	return prefix + t.metadata() + ")"
}

// Release drops the handle: its reference to the storage (the memory returns to the
// allocator with the last one), to the op that produced it (the graph behind it is
// freed with the last handle to its outputs) and, for the handle that made a leaf
// require grad, the leaf's gradient. It leaves the owning scope. Release is idempotent:
// releasing again does nothing; any other use after Release panics with ErrReleased.
func (t *Tensor) Release() {
	if t == nil || t.h.released.Swap(true) {
		return
	}
	if s := t.scope; s != nil {
		s.forget(t)
	}
	t.drop()
}

// drop releases what the handle holds; the caller has set the released flag and taken
// it out of its scope.
func (t *Tensor) drop() {
	if t.node != nil {
		n := t.node
		t.node = nil
		if err := n.Release(); err != nil {
			panic(fmt.Sprintf("tensor: internal error: releasing the node of %v: %v", t, err))
		}
	}
	if t.h.ownsCell {
		t.h.cell.kill()
	}
	t.st.release()
}

// soleOwner reports whether t is the only handle over its storage and covers it densely
// from its first byte: writing t in place then changes no other tensor.
func (t *Tensor) soleOwner() bool {
	return t.st.others.Load() == 0 && t.offset == 0 && t.IsContiguous() && t.Bytes() == t.st.size
}

// live panics with ErrReleased naming op when t was released.
func (t *Tensor) live(op string) {
	if t == nil {
		panic(&Error{Op: op, Msg: "nil tensor", Err: ErrShape})
	}
	if t.h.released.Load() {
		fail(op, ErrReleased, []*Tensor{t}, "%v %v on %s was released", t.shape, t.dt, t.st.dev.Name())
	}
}

// newHandle makes a handle over st (taking a reference unless fresh, in which case st
// becomes an inference tensor's storage in an inference-mode s) placed by shape,
// strides and offset, owned by s's owner (nil: unowned, and the caller makes the leak
// report find it), created at the site at (nil: the call stack here, kept in the
// handle, for a handle a scope owns; none in an internal scope, nor for an unowned
// one, which watch gives one).
func newHandle(s *Scope, st *Storage, fresh bool, dt dtype.DType, shape, strides []int, offset int, at *site) *Tensor {
	var t *Tensor
	h := st.spare
	switch {
	case fresh && h != nil:
		st.spare = nil
		t = new(Tensor)
	case s == nil || s.internal:
		// No ledger reads the handle (an internal scope keeps none; an unowned
		// handle is shared for a node to save, or for the engine): one allocation.
		return new(withHandle).init(s, st, fresh, dt, shape, strides, offset, at)
	default:
		t, h = new(Tensor), new(handle)
	}
	t.h = h
	return t.init(s, st, fresh, dt, shape, strides, offset, at)
}

// init makes t, zero but for its handle t.h, the handle newHandle describes.
func (t *Tensor) init(s *Scope, st *Storage, fresh bool, dt dtype.DType, shape, strides []int, offset int, at *site) *Tensor {
	if !fresh {
		st.retain()
	} else if s != nil && s.m.inference {
		st.inference = true
	}
	h := t.h
	h.st, h.at = st, at
	if at == nil && s != nil && !s.internal {
		var pcs site
		callers(pcs[:])
		h.at = intern(&pcs)
	}
	t.shape, t.strides, t.offset, t.dt, t.st = shape, strides, offset, dt, st
	if s != nil {
		s.adopt(t)
	}
	return t
}

// withHandle is a Tensor and its handle in one allocation, for a handle that no
// ledger or cleanup reads apart from the Tensor (newHandle).
type withHandle struct {
	t Tensor
	h handle
}

// init is Tensor.init for w's Tensor with w's handle.
func (w *withHandle) init(s *Scope, st *Storage, fresh bool, dt dtype.DType, shape, strides []int, offset int, at *site) *Tensor {
	w.t.h, w.t.sharedAlloc = &w.h, true
	return w.t.init(s, st, fresh, dt, shape, strides, offset, at)
}

// ownHandle gives t a handle allocated apart from it, if it shares t's allocation, so
// that a ledger or a cleanup can read the handle without keeping t reachable (a
// cleanup whose argument lies inside its object never runs).
func (t *Tensor) ownHandle() {
	if !t.sharedAlloc {
		return
	}
	if t.inBlock {
		panic(fmt.Sprintf("tensor: internal error: %v, a result for the autograd engine, handed to the program", t.shape))
	}
	h := &handle{st: t.h.st, at: t.h.at, cell: t.h.cell, ownsCell: t.h.ownsCell}
	h.released.Store(t.h.released.Load())
	t.h, t.sharedAlloc = h, false
}

// share makes a handle over t's data with no graph and no owner, created at the site
// at (nil: here): a seed gradient the engine owns, what nodes save (the rule's ledger
// reports them), a gradient Grad hands to a scope.
func (t *Tensor) share(at *site) *Tensor {
	if at == nil {
		at = here()
	}
	return newHandle(nil, t.st, false, t.dt, t.shape, t.strides, t.offset, at)
}
