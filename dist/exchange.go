package dist

import (
	"errors"
	"net"
	"sync"
	"time"

	"github.com/subletml/sublet/dtype"
)

// exchange runs collective seq of t on the worker: this rank contributes send and
// returns its reply. Rank 0 gathers every contribution, checks that every rank called
// the same collective, combines them and replies to each; the others send theirs and
// wait for the reply. Rank 0's part is bounded by the timeout from now; the others wait
// relaySlack longer, so that when a rank fails rank 0's report of it reaches them
// before their own deadline (theirs only fires when rank 0 itself is hung).
func (g *Group) exchange(t *task, seq uint64, send []byte) ([]byte, error) {
	if g.cfg.WorldSize == 1 {
		out, err := t.combine([][]byte{send})
		if err != nil {
			return nil, err
		}
		return out[0], nil
	}
	deadline := time.Now().Add(g.timeout)
	if g.cfg.Rank == 0 {
		return g.gather(t, seq, send, deadline)
	}
	return g.contribute(t, seq, send, deadline.Add(relaySlack(g.timeout)))
}

// relaySlack is how much longer than rank 0 the other ranks wait: min(timeout, 2s).
func relaySlack(timeout time.Duration) time.Duration { return min(timeout, 2*time.Second) }

func requestHeader(m meta, seq uint64) header {
	return header{kind: frameRequest, op: m.op, redop: m.redop, dtype: uint8(m.dt), seq: seq, root: int32(m.root), count: uint64(m.count)}
}

func metaOf(h header) meta {
	return meta{op: h.op, redop: h.redop, dt: dtype.DType(h.dtype), root: int(h.root), count: int(h.count)}
}

// arm sets c's read or write deadline, then reports the group's failure if one came
// first: fail sets every deadline to now, so either it runs after this and interrupts
// the I/O, or this sees its error.
func (g *Group) arm(c net.Conn, deadline time.Time, write bool) error {
	if write {
		_ = c.SetWriteDeadline(deadline)
	} else {
		_ = c.SetReadDeadline(deadline)
	}
	return g.Err()
}

// contribute is exchange on a rank other than 0.
func (g *Group) contribute(t *task, seq uint64, send []byte, deadline time.Time) ([]byte, error) {
	c := g.peers[0]
	if err := g.arm(c, deadline, true); err != nil {
		return nil, err
	}
	g.dirty[0] = true
	if err := writeFrame(c, requestHeader(t.meta, seq), send); err != nil {
		return nil, g.ioError(t.meta, 0, err)
	}
	g.dirty[0] = false
	if err := g.arm(c, deadline, false); err != nil {
		return nil, err
	}
	h, body, err := readFrame(c)
	switch {
	case err != nil:
		return nil, g.ioError(t.meta, 0, err)
	case h.kind == frameFailure:
		return nil, g.relayed(t.meta, h, body)
	case h.kind != frameReply || h.seq != seq:
		return nil, g.errorf(t.meta, 0, ErrPeerGone, "rank 0 answered out of step (frame kind %d for collective #%d): the connection is corrupt", h.kind, h.seq)
	}
	return body, nil
}

// gather is exchange on rank 0. Contributions are read from every rank at once, so the
// first rank to fail is the one reported, whatever the others do.
func (g *Group) gather(t *task, seq uint64, send []byte, deadline time.Time) ([]byte, error) {
	n := g.cfg.WorldSize
	in := make([][]byte, n)
	in[0] = send
	var wg sync.WaitGroup
	for r := 1; r < n; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if body, err := g.receive(t, seq, r, deadline); err != nil {
				g.fail(err)
			} else {
				in[r] = body
			}
		}()
	}
	wg.Wait()
	if err := g.Err(); err != nil {
		return nil, err
	}
	replies, err := t.combine(in)
	if err != nil {
		return nil, err
	}
	for r := 1; r < n; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := g.peers[r]
			if g.arm(c, deadline, true) != nil {
				return
			}
			g.dirty[r] = true
			if err := writeFrame(c, header{kind: frameReply, seq: seq}, replies[r]); err != nil {
				g.fail(g.ioError(t.meta, r, err))
				return
			}
			g.dirty[r] = false
		}()
	}
	wg.Wait()
	if err := g.Err(); err != nil {
		return nil, err
	}
	return replies[0], nil
}

// receive reads rank r's contribution to collective seq on rank 0 and checks it is the
// same collective as t.
func (g *Group) receive(t *task, seq uint64, r int, deadline time.Time) ([]byte, error) {
	c := g.peers[r]
	if err := g.arm(c, deadline, false); err != nil {
		return nil, err
	}
	h, body, err := readFrame(c)
	switch {
	case err != nil:
		return nil, g.ioError(t.meta, r, err)
	case h.kind == frameFailure:
		if h.root < 0 {
			h.root = int32(r) // the rank that failed by itself
		}
		return nil, g.relayed(t.meta, h, body)
	case h.kind != frameRequest || h.seq != seq:
		return nil, g.errorf(t.meta, r, ErrMismatch, "rank %d sent frame kind %d for collective #%d: the ranks are out of step", r, h.kind, h.seq)
	}
	if got := metaOf(h); got != t.meta {
		return nil, g.errorf(t.meta, r, ErrMismatch, "rank 0 called %v and rank %d called %v as collective #%d: every rank must issue the same collectives in the same order", t.meta, r, got, seq)
	}
	return body, nil
}

// ioError is the error of I/O with peer r during collective m: the group's failure if
// one interrupted it, else a timeout or the peer's leaving.
func (g *Group) ioError(m meta, r int, err error) error {
	if f := g.Err(); f != nil {
		return f
	}
	cause := ioCause(err)
	if g.cfg.Rank != 0 {
		if isTimeout(cause) {
			return g.errorf(m, -1, cause, "no answer from rank 0 within %v: rank 0 is hung, or some rank far behind (if it is only slow, raise %s)", g.timeout+relaySlack(g.timeout), EnvTimeout)
		}
		return g.errorf(m, 0, cause, "rank 0 closed the connection: its process died, or it closed or aborted the group")
	}
	if isTimeout(cause) {
		return g.errorf(m, r, cause, "rank %d did not take part within %v: it is hung or far behind (if it is only slow, raise %s)", r, g.timeout, EnvTimeout)
	}
	return g.errorf(m, r, cause, "rank %d closed the connection: its process died, or it closed or aborted the group", r)
}

// relayed is the error a failure notice from a peer carries.
func (g *Group) relayed(m meta, h header, body []byte) error {
	cause := causeOf(h.code)
	if cause == nil {
		cause = ErrPeerGone
	}
	return g.errorf(m, int(h.root), cause, "%s", body)
}

func isTimeout(err error) bool { return errors.Is(err, ErrTimeout) }
