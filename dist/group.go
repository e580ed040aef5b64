package dist

import (
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/subletml/sublet/dtype"
)

// Group is a process group: this process's rank among WorldSize processes and the TCP
// connections the rendezvous made (a star: rank 0 holds one to every other rank, each
// other rank one to rank 0). Init makes it; Close or Abort ends it.
//
// The group runs its collectives one at a time, in the order they were issued, on one
// goroutine of its own (the worker); every rank must issue the same collectives in the
// same order. A collective is a gather at rank 0, a computation there, and a reply to
// each rank, each step bounded by the timeout. The first failure (a timeout, a rank
// gone, a mismatch, Abort) breaks the group for good: rank 0 tells the others why, every
// connection is closed, and every later operation fails with that error.
//
// A Group is safe for concurrent use.
type Group struct {
	// Immutable after Init.
	cfg     Config
	timeout time.Duration
	// peers are the connections: on rank 0, peers[r] to rank r (peers[0] is nil); on
	// the others, peers[0] to rank 0 and nil elsewhere. Their I/O is the worker's only;
	// fail sets their deadlines from any goroutine.
	peers []net.Conn

	// Owned by the worker goroutine.
	seq uint64 // collectives run so far
	// dirty[r] is set while a frame to peer r is partly written: such a stream can carry
	// no failure notice.
	dirty []bool

	mu     sync.Mutex
	queue  []*task // guarded by mu: issued, not yet started
	closed bool    // guarded by mu: Close was called; nothing more is accepted
	failed error   // guarded by mu: the failure that broke the group, nil while healthy
	wake   chan struct{}
	done   chan struct{} // closed when the worker has exited and closed the connections
}

// opKind names a collective on the wire.
type opKind uint8

const (
	opBarrier opKind = iota + 1
	opBroadcastBytes
	opAllGatherBytes
	opAllReduce
	opBroadcast
	opAllGather
	opReduceScatter
)

func (k opKind) String() string {
	switch k {
	case opBarrier:
		return "Barrier"
	case opBroadcastBytes:
		return "BroadcastBytes"
	case opAllGatherBytes:
		return "AllGatherBytes"
	case opAllReduce:
		return "AllReduce"
	case opBroadcast:
		return "Broadcast"
	case opAllGather:
		return "AllGather"
	case opReduceScatter:
		return "ReduceScatter"
	}
	return fmt.Sprintf("op(%d)", uint8(k))
}

// meta is what a collective is; every rank's must be the same at each position.
type meta struct {
	op    opKind
	redop ReduceOp // reductions only
	dt    dtype.DType
	root  int // broadcasts only
	count int // elements of this rank's tensor (bytes for the byte collectives)
}

func (m meta) String() string {
	s := m.op.String() + "("
	if m.dt.IsValid() {
		s += fmt.Sprintf("%v[%d]", m.dt, m.count)
	} else {
		s += fmt.Sprintf("%d bytes", m.count)
	}
	switch m.op {
	case opAllReduce, opReduceScatter:
		s += ", " + m.redop.String()
	case opBroadcast, opBroadcastBytes:
		s += fmt.Sprintf(", root %d", m.root)
	}
	return s + ")"
}

// task is one issued collective. The worker runs prepare, the exchange, then finish,
// sets err and closes done.
type task struct {
	meta meta
	// prepare returns this rank's contribution.
	prepare func() ([]byte, error)
	// combine runs on rank 0 with every rank's contribution (indexed by rank) and
	// returns every rank's reply.
	combine func(in [][]byte) ([][]byte, error)
	// finish takes this rank's reply (nil: nothing to do).
	finish func(reply []byte) error

	err  error // set before done is closed
	done chan struct{}
}

// Rank is this process's rank.
func (g *Group) Rank() int { return g.cfg.Rank }

// WorldSize is the number of processes in the group.
func (g *Group) WorldSize() int { return g.cfg.WorldSize }

// LocalRank is this process's rank on its machine (its GPU is cuda:LocalRank).
func (g *Group) LocalRank() int { return g.cfg.LocalRank }

// Timeout is the bound on each collective.
func (g *Group) Timeout() time.Duration { return g.timeout }

// Err is the failure that broke the group, nil while it is healthy.
func (g *Group) Err() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.failed
}

func newGroup(c Config, peers []net.Conn) *Group {
	g := &Group{cfg: c, timeout: c.timeout(), peers: peers, dirty: make([]bool, len(peers)),
		wake: make(chan struct{}, 1), done: make(chan struct{})}
	go g.work()
	return g
}

// submit queues t for the worker. A closed or broken group fails it at once.
func (g *Group) submit(t *task) {
	t.done = make(chan struct{})
	var err error
	g.mu.Lock()
	switch {
	case g.failed != nil:
		err = g.failed
	case g.closed:
		err = &Error{Op: t.meta.String(), Rank: g.cfg.Rank, Peer: -1, Msg: "the group was closed", Err: ErrClosed}
	default:
		g.queue = append(g.queue, t)
	}
	g.mu.Unlock()
	if err != nil {
		t.err = err
		close(t.done)
		return
	}
	g.poke()
}

func (g *Group) poke() {
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

// run submits t and waits for it.
func (g *Group) run(t *task) error {
	g.submit(t)
	<-t.done
	return t.err
}

// work is the worker: it runs the queue in order until the group is closed and the queue
// empty, or the group fails; then it tears the connections down.
func (g *Group) work() {
	defer close(g.done)
	for {
		g.mu.Lock()
		var t *task
		if len(g.queue) > 0 && g.failed == nil {
			t, g.queue = g.queue[0], g.queue[1:]
		}
		failed, closed := g.failed, g.closed
		g.mu.Unlock()
		if t != nil {
			t.err = g.execute(t)
			close(t.done)
			continue
		}
		if failed != nil || closed {
			g.teardown()
			return
		}
		<-g.wake
	}
}

// execute runs one task on the worker.
func (g *Group) execute(t *task) error {
	seq := g.seq
	g.seq++
	send, err := t.prepare()
	if err != nil {
		return g.fail(err)
	}
	reply, err := g.exchange(t, seq, send)
	if err != nil {
		return g.fail(err)
	}
	if t.finish != nil {
		if err := t.finish(reply); err != nil {
			return g.fail(err)
		}
	}
	return nil
}

// fail records err as the group's failure (the first one stays), interrupts the
// worker's I/O and returns the failure in force.
func (g *Group) fail(err error) error {
	g.mu.Lock()
	if g.failed == nil {
		g.failed = err
	}
	err = g.failed
	g.mu.Unlock()
	now := time.Now()
	for _, c := range g.peers {
		if c != nil {
			_ = c.SetDeadline(now) // interrupts a blocked Read or Write; errors mean it is closed
		}
	}
	g.poke()
	return err
}

// teardown, on the worker after the group closed or failed, fails what is still queued,
// tells the peers why when the group failed (best effort), and closes the connections.
func (g *Group) teardown() {
	g.mu.Lock()
	failed, queue := g.failed, g.queue
	g.queue = nil
	if failed == nil {
		failed = g.errorf(meta{}, -1, ErrClosed, "the group was closed")
		g.failed = failed
	}
	g.mu.Unlock()
	for _, t := range queue {
		t.err = failed
		close(t.done)
	}
	var wg sync.WaitGroup
	for r, c := range g.peers {
		if c == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !g.dirty[r] && !isClosedErr(failed) {
				g.notify(c, failed)
			}
			_ = c.Close()
		}()
	}
	wg.Wait()
}

// notifyTimeout bounds the failure notice teardown sends to each peer.
const notifyTimeout = 2 * time.Second

// notify sends a failure notice for err to a peer.
func (g *Group) notify(c net.Conn, err error) {
	h := header{kind: frameFailure, code: causeCode(err), seq: g.seq, root: -1}
	msg := err.Error()
	if e, ok := err.(*Error); ok {
		h.root, msg = int32(e.Peer), e.Msg
	}
	_ = c.SetDeadline(time.Now().Add(notifyTimeout))
	_ = writeFrame(c, h, []byte(fmt.Sprintf("rank %d reports: %s", g.cfg.Rank, msg)))
}

func isClosedErr(err error) bool {
	e, ok := err.(*Error)
	return ok && e.Err == ErrClosed
}

// errorf makes the error of the collective m (the zero meta: no collective) on this rank.
// It reads the worker's sequence: call it on the worker, or while the worker waits.
func (g *Group) errorf(m meta, peer int, cause error, format string, args ...any) *Error {
	op := ""
	if m.op != 0 {
		op = fmt.Sprintf("%v #%d", m, g.seq-1)
	}
	return &Error{Op: op, Rank: g.cfg.Rank, Peer: peer, Msg: fmt.Sprintf(format, args...), Err: cause}
}

// Close ends the group once the collectives already issued have run: later ones fail
// with ErrClosed, and the connections are closed. The other ranks see this rank leave
// (ErrPeerGone) at their next collective, so every rank closes after its last one. Close
// is idempotent and returns the failure that broke the group, if one did (nil when it
// was healthy until closed).
func (g *Group) Close() error {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.poke()
	<-g.done
	g.mu.Lock()
	defer g.mu.Unlock()
	if isClosedErr(g.failed) {
		return nil
	}
	return g.failed
}

// Abort breaks the group now: the collective in flight and every queued one fail with
// ErrAborted (or the failure already in force), the other ranks are told (rank 0 tells
// them; another rank's leaving is seen by rank 0, which tells the rest), and the
// connections are closed. Abort returns once that is done; it is idempotent.
func (g *Group) Abort(reason string) {
	g.fail(&Error{Rank: g.cfg.Rank, Peer: -1, Msg: "aborted: " + reason, Err: ErrAborted})
	<-g.done
}

// Barrier returns once every rank has called it.
func (g *Group) Barrier() error {
	return g.run(&task{meta: meta{op: opBarrier},
		prepare: func() ([]byte, error) { return nil, nil },
		combine: func(in [][]byte) ([][]byte, error) { return make([][]byte, len(in)), nil }})
}

// BroadcastBytes returns root's b on every rank (b is only read on root; the others pass
// nil or anything). The NCCL backend sends its unique id this way.
func (g *Group) BroadcastBytes(b []byte, root int) ([]byte, error) {
	if err := g.checkRoot(root); err != nil {
		return nil, err
	}
	var out []byte
	if g.cfg.Rank != root {
		b = nil
	}
	err := g.run(&task{meta: meta{op: opBroadcastBytes, root: root},
		prepare: func() ([]byte, error) { return b, nil },
		combine: func(in [][]byte) ([][]byte, error) { return repeat(in[root], len(in)), nil },
		finish:  func(r []byte) error { out = r; return nil }})
	return out, err
}

// AllGatherBytes returns every rank's b, indexed by rank (the lengths may differ).
func (g *Group) AllGatherBytes(b []byte) ([][]byte, error) {
	var out [][]byte
	err := g.run(&task{meta: meta{op: opAllGatherBytes},
		prepare: func() ([]byte, error) { return b, nil },
		combine: func(in [][]byte) ([][]byte, error) { return repeat(joinLengthPrefixed(in), len(in)), nil },
		finish: func(r []byte) error {
			var err error
			out, err = splitLengthPrefixed(r, g.cfg.WorldSize)
			return err
		}})
	return out, err
}

func (g *Group) checkRoot(root int) error {
	if root < 0 || root >= g.cfg.WorldSize {
		return &Error{Rank: g.cfg.Rank, Peer: -1, Msg: fmt.Sprintf("root %d is not a rank of a group of %d", root, g.cfg.WorldSize), Err: ErrConfig}
	}
	return nil
}

// repeat returns n references to b.
func repeat(b []byte, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = b
	}
	return out
}
