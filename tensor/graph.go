package tensor

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
)

// ErrCapture: a graph capture that cannot be made (the device cannot capture, one is
// underway on it already), or an op that a capture cannot record: one that waits for
// the device or reads values back (Item, ToSlice, To the host, Synchronize), uploads
// from Go memory (FromSlice, the random factories, SetBytes from pageable memory), or
// draws from a generator on the host (Dropout), whose draw a replay would repeat.
var ErrCapture = errors.New("graph capture")

// captures is the process's graph captures and graphs, by device (device.Innermost of
// the device given to CaptureGraph: the GPU a wrapping device computes on).
var captures struct {
	// underway counts the captures underway on all devices, so that an op outside any
	// capture reads one atomic instead of taking mu.
	underway atomic.Int32

	mu sync.Mutex
	// Guarded by mu.
	stream map[device.Device]device.Stream // the stream being captured, while one is
	side   map[device.Device]device.Stream // each device's capture stream, made once
	live   map[device.Device]int           // graphs not yet released
}

// streamOf is the stream dev's ops are ordered on: stream 0, or the capture stream
// while a graph capture is underway on dev.
func streamOf(dev device.Device) device.Stream {
	s, _ := capturing(dev)
	return s
}

// capturing reports whether a capture is underway on dev, and its stream. Outside any
// capture it reads one atomic, and inlines: every operand of every op asks.
func capturing(dev device.Device) (s device.Stream, ok bool) {
	if captures.underway.Load() != 0 {
		s, ok = captureOn(dev)
	}
	return
}

// captureOn is capturing's lookup while some capture is underway.
func captureOn(dev device.Device) (device.Stream, bool) {
	inner := device.Innermost(dev)
	captures.mu.Lock()
	defer captures.mu.Unlock()
	s, ok := captures.stream[inner]
	return s, ok
}

// Capturing reports whether a graph capture (CaptureGraph) is underway on dev: what an
// optimizer asks before making state that a replay must not make again.
func Capturing(dev device.Device) bool {
	_, ok := capturing(dev)
	return ok
}

// notCapturing returns an ErrCapture error when a capture is underway on dev: what,
// the thing op was about to do, cannot be recorded.
func notCapturing(dev device.Device, what string) error {
	if _, ok := capturing(dev); ok {
		return fmt.Errorf("%w: %s cannot be recorded in a graph capture on %s; do it before or after CaptureGraph", ErrCapture, what, dev.Name())
	}
	return nil
}

// Graph is device work recorded by CaptureGraph, replayed by Replay with one launch.
// The memory the recorded ops allocated comes from a private pool of dev's caching
// allocator (alloc.Pool) that only the graph uses: tensors made during the capture and
// kept (a step's loss) stay where the recorded ops write them, and every replay writes
// them again. Release gives the graph and its pool back.
type Graph struct {
	// Set by CaptureGraph, never changed.
	dev   device.Device // as given to CaptureGraph
	inner device.Device // device.Innermost(dev): what captured
	gc    device.GraphCapturer
	al    *alloc.Allocator
	pool  *alloc.Pool

	mu sync.Mutex
	// Guarded by mu.
	exec     device.Graph
	released bool
}

// CaptureGraph records what fn orders on dev (a GPU, or a device wrapping one) into a
// graph instead of running it, as PyTorch's torch.cuda.graph does: Replay then runs the
// whole of it with one launch, without the host cost of each op. Nothing fn orders runs
// during the capture, so tensors fn makes hold no values until the first Replay.
//
// A replay repeats the recorded kernels on the recorded addresses with the recorded
// arguments. What differs between replays must therefore live in tensors made before
// the capture, overwritten in place between replays (SetBytes from pinned memory, or
// Copy_ from another tensor): the inputs; what the step produces must be tensors fn
// keeps in a scope that outlives it: the outputs. Numbers computed on the host during
// fn (a learning rate, Adam's bias correction) are frozen into the graph: optimizers
// whose step depends on such numbers refuse a capture (optim.Adam does, unless made
// Capturable: it then keeps its rate and step counts in device tensors).
//
// Run the step eagerly a few times first (warm-up): parameters' gradients and the
// optimizer's state then exist outside the graph's pool, as PyTorch asks too. While
// fn runs, dev's ops are ordered on a capture stream, and the ops that the capture
// cannot record fail with ErrCapture (see it); no other goroutine may use dev until
// CaptureGraph returns. An op that fails inside fn (its panic, as Try returns it) ends
// the capture with that error and no graph; the tensors fn made stay valid but empty.
// On a device that cannot capture (cpu, sim) the error wraps ErrCapture.
func CaptureGraph(dev device.Device, fn func()) (*Graph, error) {
	const op = "CaptureGraph"
	inner := device.Innermost(dev)
	gc, ok := inner.(device.GraphCapturer)
	if !ok {
		return nil, newError(op, ErrCapture, nil, "%s cannot record graphs (CUDA devices can); run the step eagerly there", dev.Name())
	}
	al, err := allocatorOf(dev, nil)
	if err != nil {
		return nil, newError(op, err, nil, "")
	}
	ca, ok := al.(*alloc.Allocator)
	if !ok {
		return nil, newError(op, ErrCapture, nil, "%s's tensors use an allocator of the program's own; a capture needs the caching allocator's private pools", dev.Name())
	}
	s, err := beginCapture(inner, gc)
	if err != nil {
		return nil, newError(op, err, nil, "")
	}
	g := &Graph{dev: dev, inner: inner, gc: gc, al: ca, pool: ca.NewPool()}
	if err := g.capture(s, fn); err != nil {
		return nil, err
	}
	captures.mu.Lock()
	if captures.live == nil {
		captures.live = make(map[device.Device]int)
	}
	captures.live[inner]++
	captures.mu.Unlock()
	return g, nil
}

// beginCapture marks a capture underway on inner and returns its stream, made on the
// first capture and prepared for the kernels (see kernels/cuda PrepareStream).
func beginCapture(inner device.Device, gc device.GraphCapturer) (device.Stream, error) {
	captures.mu.Lock()
	defer captures.mu.Unlock()
	if _, ok := captures.stream[inner]; ok {
		return 0, fmt.Errorf("%w: a capture is underway on %s already; captures of one device do not nest", ErrCapture, inner.Name())
	}
	s, ok := captures.side[inner]
	if !ok {
		var err error
		if s, err = inner.NewStream(); err != nil {
			return 0, fmt.Errorf("a stream to capture on %s: %w", inner.Name(), err)
		}
		if captures.side == nil {
			captures.side = make(map[device.Device]device.Stream)
			captures.stream = make(map[device.Device]device.Stream)
		}
		captures.side[inner] = s
	}
	k, err := gpuKernels(inner)
	if err != nil {
		return 0, err
	}
	if k != nil {
		if err := k.PrepareStream(s); err != nil {
			return 0, err
		}
	}
	captures.stream[inner] = s
	captures.underway.Add(1)
	return s, nil
}

// endCapture marks the capture on inner over.
func endCapture(inner device.Device) {
	captures.mu.Lock()
	delete(captures.stream, inner)
	captures.mu.Unlock()
	captures.underway.Add(-1)
}

// capture records fn on stream s into g; on failure it gives the pool back and returns
// the error (an *Error).
func (g *Graph) capture(s device.Stream, fn func()) (err error) {
	const op = "CaptureGraph"
	if err := g.al.BeginCapture(s, g.pool); err != nil {
		endCapture(g.inner)
		return newError(op, errors.Join(err, g.al.ReleasePool(g.pool)), nil, "")
	}
	if err := g.gc.BeginCapture(s); err != nil {
		endCapture(g.inner)
		return newError(op, errors.Join(err, g.al.EndCapture(s), g.al.ReleasePool(g.pool)), nil, "")
	}
	// Whatever fn does, even a panic that is no *Error, the device's capture ends and
	// the allocator routes s back to its default pools before this returns.
	defer func() {
		exec, endErr := g.gc.EndCapture(s)
		endCapture(g.inner)
		alErr := g.al.EndCapture(s)
		if err == nil && endErr == nil && alErr == nil {
			g.exec = exec
			return
		}
		errs := []error{endErr, alErr}
		if endErr == nil {
			errs = append(errs, g.gc.DestroyGraph(exec))
		}
		errs = append(errs, g.al.ReleasePool(g.pool))
		if more := errors.Join(errs...); more != nil || err == nil {
			err = newError(op, errors.Join(err, more), nil, "the capture failed")
		}
	}()
	return Try(fn)
}

// Replay runs the captured work once more, ordered on dev's stream 0 after everything
// ordered before it: the inputs' current values in, the outputs overwritten. It does not
// wait for the work; reading an output (Item, ToSlice) does.
func (g *Graph) Replay() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.released {
		return newError("Graph.Replay", ErrReleased, nil, "the graph was released")
	}
	if err := g.gc.LaunchGraph(g.exec, 0); err != nil {
		return newError("Graph.Replay", err, nil, "")
	}
	return nil
}

// Release waits for the graph's replays, frees the graph and gives its private pool
// back to dev's caching allocator: the pool's free memory is returned to the device by
// the next EmptyCache, and the blocks of outputs still held return to the pool when
// they are released. Releasing twice is an error.
func (g *Graph) Release() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.released {
		return newError("Graph.Release", ErrReleased, nil, "the graph was released already")
	}
	g.released = true
	captures.mu.Lock()
	captures.live[g.inner]--
	captures.mu.Unlock()
	err := errors.Join(g.dev.Synchronize(), g.gc.DestroyGraph(g.exec), g.al.ReleasePool(g.pool))
	if err != nil {
		return newError("Graph.Release", err, nil, "")
	}
	return nil
}

// liveGraphs is how many graphs captured on dev (or the GPU it wraps) are not released.
func liveGraphs(dev device.Device) int {
	inner := device.Innermost(dev)
	captures.mu.Lock()
	defer captures.mu.Unlock()
	return captures.live[inner]
}
