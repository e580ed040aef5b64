package dist

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// Init joins the group c describes: rank 0 listens on MasterPort until every other rank
// has connected and said who it is; the others connect to MasterAddr:MasterPort
// (retrying while rank 0 is not up yet) and wait until everyone is there. All of it is
// bounded by the timeout. A world of one process makes a group without any network.
//
// Rank 0 listens on every address of its machine, as PyTorch's TCPStore does:
// MasterAddr is how the others reach rank 0, which need not be an address rank 0 can
// listen on (a host name that resolves to 127.0.1.1 on its own machine, a Kubernetes
// service). A loopback MasterAddr (127.0.0.1, ::1, localhost), which no other machine
// can reach anyway, is listened on alone.
//
// Errors wrap ErrConfig (a bad setting, an address that does not resolve) or
// ErrRendezvous (and ErrTimeout when time ran out), and say which rank, address and
// setting is at fault.
func Init(c Config) (*Group, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.WorldSize == 1 {
		return newGroup(c, make([]net.Conn, 1)), nil
	}
	deadline := time.Now().Add(c.timeout())
	var peers []net.Conn
	var err error
	if c.Rank == 0 {
		peers, err = listen(c, deadline)
	} else {
		peers, err = join(c, deadline)
	}
	if err != nil {
		return nil, err
	}
	return newGroup(c, peers), nil
}

// InitFromEnv joins the group the launcher's environment describes: ConfigFromEnv, then
// Init (PyTorch's init_process_group with init_method "env://").
func InitFromEnv() (*Group, error) {
	c, err := ConfigFromEnv()
	if err != nil {
		return nil, err
	}
	return Init(c)
}

// rendezvousErr is an error of the rendezvous on rank.
func rendezvousErr(rank, peer int, cause error, format string, args ...any) error {
	return &Error{Op: "rendezvous", Rank: rank, Peer: peer, Msg: fmt.Sprintf(format, args...), Err: cause}
}

// hello is what a joining rank said.
type hello struct {
	conn  net.Conn
	rank  int
	world int
	err   error // the connection did not speak the protocol (or failed)
}

// listen is the rendezvous on rank 0.
func listen(c Config, deadline time.Time) ([]net.Conn, error) {
	addr := c.masterAddress()
	on, where := addr, addr
	if !isLoopback(c.MasterAddr) {
		on = net.JoinHostPort("", strconv.Itoa(c.MasterPort))
		where = fmt.Sprintf("port %d of every address of its machine", c.MasterPort)
	}
	ln, err := net.Listen("tcp", on)
	if err != nil {
		return nil, rendezvousErr(0, -1, fmt.Errorf("%w: %w", ErrRendezvous, err),
			"rank 0 cannot listen on %s (%s): is another job using the port? choose another %s", where, EnvMasterPort, EnvMasterPort)
	}
	defer ln.Close()
	hellos := make(chan hello)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return // the listener was closed
			}
			read := make(chan hello, 1)
			go func() { read <- readHello(conn, deadline) }()
			go func() {
				select {
				case h := <-read:
					select {
					case hellos <- h:
					case <-stop:
						conn.Close()
					}
				case <-stop: // the rendezvous is over: a connection still silent is dropped
					conn.Close()
				}
			}()
		}
	}()

	peers := make([]net.Conn, c.WorldSize)
	joined, strays := 0, 0
	refuse := func(err error) ([]net.Conn, error) {
		for _, p := range peers {
			if p != nil {
				reject(p, err)
			}
		}
		return nil, err
	}
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for joined < c.WorldSize-1 {
		select {
		case h := <-hellos:
			if h.err != nil {
				strays++ // not one of ours (a port scanner, a health check): ignore it
				h.conn.Close()
				continue
			}
			var err error
			switch {
			case h.world != c.WorldSize:
				err = rendezvousErr(0, h.rank, ErrRendezvous, "rank %d joined with WORLD_SIZE=%d, rank 0 has %d: start every rank with the same WORLD_SIZE", h.rank, h.world, c.WorldSize)
			case h.rank <= 0 || h.rank >= c.WorldSize:
				err = rendezvousErr(0, h.rank, ErrRendezvous, "a process joined as rank %d, outside [1, %d): check RANK", h.rank, c.WorldSize)
			case peers[h.rank] != nil:
				err = rendezvousErr(0, h.rank, ErrRendezvous, "two processes joined as rank %d: every rank must be started once (is another job using %s?)", h.rank, addr)
			}
			if err != nil {
				reject(h.conn, err)
				return refuse(err)
			}
			peers[h.rank] = h.conn
			joined++
		case <-timer.C:
			var missing []string
			for r := 1; r < c.WorldSize; r++ {
				if peers[r] == nil {
					missing = append(missing, fmt.Sprint(r))
				}
			}
			msg := fmt.Sprintf("rank(s) %s of %d did not join %s within %v: are they started, with the same %s and %s?",
				strings.Join(missing, ", "), c.WorldSize, addr, c.timeout(), EnvMasterAddr, EnvMasterPort)
			if strays > 0 {
				msg += fmt.Sprintf(" (%d connection(s) that did not speak sublet's protocol were ignored)", strays)
			}
			return refuse(rendezvousErr(0, -1, fmt.Errorf("%w: %w", ErrRendezvous, ErrTimeout), "%s", msg))
		}
	}
	for r, p := range peers[1:] {
		_ = p.SetWriteDeadline(deadline)
		if err := writeFrame(p, header{kind: frameWelcome}, nil); err != nil {
			return refuse(rendezvousErr(0, r+1, fmt.Errorf("%w: %w", ErrRendezvous, err), "rank %d left during the rendezvous", r+1))
		}
	}
	for _, p := range peers[1:] {
		_ = p.SetDeadline(time.Time{})
	}
	return peers, nil
}

// isLoopback reports whether host is a loopback address or localhost: only this
// machine reaches it.
func isLoopback(host string) bool {
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback()
	}
	return host == "localhost"
}

// readHello reads a joining rank's hello.
func readHello(conn net.Conn, deadline time.Time) hello {
	_ = conn.SetReadDeadline(deadline)
	h, _, err := readFrame(conn)
	if err == nil && (h.kind != frameHello || h.seq != protocolVersion) {
		err = fmt.Errorf("hello of kind %d, protocol %d (want %d)", h.kind, h.seq, protocolVersion)
	}
	return hello{conn: conn, rank: int(h.root), world: int(h.count), err: err}
}

// reject tells a joined rank that the rendezvous failed, and closes its connection.
func reject(conn net.Conn, err error) {
	_ = conn.SetWriteDeadline(time.Now().Add(notifyTimeout))
	msg := err.Error()
	if e, ok := err.(*Error); ok {
		msg = e.Msg
	}
	_ = writeFrame(conn, header{kind: frameFailure, code: causeCode(err), root: -1}, []byte("rank 0 refused the group: "+msg))
	conn.Close()
}

// join is the rendezvous on a rank other than 0.
func join(c Config, deadline time.Time) ([]net.Conn, error) {
	addr := c.masterAddress()
	var conn net.Conn
	wait := 10 * time.Millisecond
	for {
		var err error
		conn, err = net.DialTimeout("tcp", addr, time.Until(deadline))
		if err == nil {
			break
		}
		var dnsErr *net.DNSError
		if errors.As(err, &dnsErr) && dnsErr.IsNotFound {
			return nil, &Error{Op: fmt.Sprintf("%s=%q", EnvMasterAddr, c.MasterAddr), Rank: c.Rank, Peer: -1,
				Msg: "the host does not resolve: set it to rank 0's host name or address", Err: fmt.Errorf("%w: %w", ErrConfig, err)}
		}
		if time.Now().Add(wait).After(deadline) {
			return nil, rendezvousErr(c.Rank, 0, fmt.Errorf("%w: %w", ErrRendezvous, ErrTimeout),
				"nobody accepted at %s within %v (last: %v): is rank 0 started, with the same %s and %s?", addr, c.timeout(), err, EnvMasterAddr, EnvMasterPort)
		}
		time.Sleep(wait)
		wait = min(2*wait, 500*time.Millisecond)
	}
	fail := func(cause error, format string, args ...any) ([]net.Conn, error) {
		conn.Close()
		return nil, rendezvousErr(c.Rank, 0, cause, format, args...)
	}
	_ = conn.SetDeadline(deadline.Add(relaySlack(c.timeout()))) // rank 0 says why it gave up first
	if err := writeFrame(conn, header{kind: frameHello, seq: protocolVersion, root: int32(c.Rank), count: uint64(c.WorldSize)}, nil); err != nil {
		return fail(fmt.Errorf("%w: %w", ErrRendezvous, err), "cannot send to rank 0 at %s", addr)
	}
	h, body, err := readFrame(conn)
	switch {
	case errors.Is(err, errForeign):
		return fail(ErrRendezvous, "what answers at %s is not a sublet rank 0: check %s and %s", addr, EnvMasterAddr, EnvMasterPort)
	case err != nil && errors.Is(ioCause(err), ErrTimeout):
		return fail(fmt.Errorf("%w: %w", ErrRendezvous, ErrTimeout), "rank 0 at %s did not complete the group within %v: some rank did not join", addr, c.timeout())
	case err != nil:
		return fail(fmt.Errorf("%w: %w", ErrRendezvous, err), "rank 0 at %s closed the connection during the rendezvous", addr)
	case h.kind == frameFailure:
		return fail(ErrRendezvous, "%s", body)
	case h.kind != frameWelcome:
		return fail(ErrRendezvous, "rank 0 at %s answered with frame kind %d", addr, h.kind)
	}
	_ = conn.SetDeadline(time.Time{})
	peers := make([]net.Conn, c.WorldSize)
	peers[0] = conn
	return peers, nil
}
