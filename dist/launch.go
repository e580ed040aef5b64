package dist

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultGrace is how long Launch waits, after asking the processes to stop (SIGTERM),
// before it kills them.
const DefaultGrace = 10 * time.Second

// outputDelay is how long Launch reads a rank's output after the rank exited, when
// something it left behind holds it open.
const outputDelay = time.Second

// LaunchConfig is what Launch starts: NProc copies of Program with Args on this
// machine, ranks 0 to NProc-1.
type LaunchConfig struct {
	NProc   int
	Program string
	Args    []string
	// MasterAddr is where the others reach rank 0 (default 127.0.0.1, which rank 0
	// listens on alone); MasterPort its port (0: a port that is free now).
	MasterAddr string
	MasterPort int
	// Timeout, when set, is given to every process as SUBLET_DIST_TIMEOUT.
	Timeout time.Duration
	// Env is the environment every process starts from (nil: this process's); the
	// rank variables are set over it, and NCCL_NVLS_ENABLE=0 (NVLink SHARP stays off).
	Env []string
	// Stdout and Stderr receive the processes' output (nil: this process's).
	Stdout, Stderr io.Writer
	// Prefix starts each line a process writes with "[rank N] ".
	Prefix bool
	// Signals, when set, are forwarded to every running process as they arrive; the
	// processes still running a grace period after the first are killed.
	Signals <-chan os.Signal
	// Grace is how long processes asked to stop get before they are killed (0:
	// DefaultGrace).
	Grace time.Duration
}

// rankEnv are the variables Launch sets for each process (any inherited value is
// replaced).
var rankEnv = []string{EnvRank, EnvWorldSize, EnvLocalRank, EnvLocalWorldSize, EnvMasterAddr, EnvMasterPort, EnvTimeout, "NCCL_NVLS_ENABLE"}

// Launch starts the processes, each in its own process group with the environment of
// its rank, and waits for them all. When one fails (exits with a nonzero status or by
// a signal), the others are asked to stop (SIGTERM), and killed after the grace
// period; when ctx is done, all are. The signals that arrive are forwarded, and what
// still runs a grace period after the first is killed. When a process exits, what it
// left in its process group is killed, and its output is read for a second more at
// most. It returns nil when every process exited with status 0, else an *Error naming
// the first rank that failed (Peer), wrapping its *exec.ExitError, and every other
// failed rank with its status.
func Launch(ctx context.Context, c LaunchConfig) error {
	if c.NProc < 1 {
		return configErr("nproc", strconv.Itoa(c.NProc), "start at least one process")
	}
	if c.Program == "" {
		return configErr("program", "", "name the program to start")
	}
	addr := c.MasterAddr
	if addr == "" {
		addr = "127.0.0.1"
	}
	port := c.MasterPort
	if port == 0 {
		var err error
		if port, err = pickPort(addr); err != nil {
			return &Error{Op: "launch", Rank: -1, Peer: -1, Msg: fmt.Sprintf("no free port on %s for rank 0 (set a MASTER_PORT)", addr), Err: fmt.Errorf("%w: %w", ErrConfig, err)}
		}
	}
	env := c.Env
	if env == nil {
		env = os.Environ()
	}
	env = slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return slices.Contains(rankEnv, k)
	})
	stdout, stderr := c.Stdout, c.Stderr
	if stdout == nil {
		stdout = os.Stdout
	}
	if stderr == nil {
		stderr = os.Stderr
	}
	grace := c.Grace
	if grace == 0 {
		grace = DefaultGrace
	}

	var outMu sync.Mutex // one line at a time from all the processes
	procs := make([]*process, c.NProc)
	for r := range procs {
		p := &process{rank: r, cmd: exec.Command(c.Program, c.Args...)}
		p.cmd.Env = append(slices.Clone(env),
			EnvRank+"="+strconv.Itoa(r), EnvWorldSize+"="+strconv.Itoa(c.NProc),
			EnvLocalRank+"="+strconv.Itoa(r), EnvLocalWorldSize+"="+strconv.Itoa(c.NProc),
			EnvMasterAddr+"="+addr, EnvMasterPort+"="+strconv.Itoa(port), "NCCL_NVLS_ENABLE=0")
		if c.Timeout > 0 {
			p.cmd.Env = append(p.cmd.Env, EnvTimeout+"="+c.Timeout.String())
		}
		prefix := ""
		if c.Prefix {
			prefix = fmt.Sprintf("[rank %d] ", r)
		}
		p.out = []*lineWriter{{mu: &outMu, w: stdout, prefix: prefix}, {mu: &outMu, w: stderr, prefix: prefix}}
		p.cmd.Stdout, p.cmd.Stderr = p.out[0], p.out[1]
		// a process the rank left behind can hold its output open: Wait returns this
		// long after the rank's exit at the latest
		p.cmd.WaitDelay = outputDelay
		ownProcessGroup(p.cmd)
		if err := p.cmd.Start(); err != nil {
			for _, q := range procs[:r] {
				q.kill()
				_ = q.cmd.Wait()
			}
			return &Error{Op: "launch", Rank: -1, Peer: r, Msg: fmt.Sprintf("cannot start rank %d: %s", r, c.Program), Err: err}
		}
		procs[r] = p
	}

	exits := make(chan *process, c.NProc)
	for _, p := range procs {
		go func() {
			p.err = p.cmd.Wait()
			if errors.Is(p.err, exec.ErrWaitDelay) {
				p.err = nil // it exited with 0; what it left holding its output is killed next
			}
			p.kill() // what it left in its process group goes with it
			for _, w := range p.out {
				w.flush()
			}
			exits <- p
		}()
	}
	var (
		first    *process // the first process that failed by itself
		stopping bool
		cause    string
		kill     <-chan time.Time
		running  = c.NProc
		done     = ctx.Done() // nil once seen: a closed channel would be ready at every turn
	)
	// stop asks every running process to stop; why (if any) is the outside cause.
	stop := func(why string) {
		if stopping {
			return
		}
		stopping = true
		if cause == "" {
			cause = why
		}
		for _, p := range procs {
			if !p.exited {
				p.terminate()
			}
		}
		kill = time.After(grace)
	}
	for running > 0 {
		select {
		case p := <-exits:
			p.exited = true
			running--
			if p.err != nil && first == nil && !stopping {
				first = p
				stop("")
			}
		case s := <-c.Signals:
			for _, p := range procs {
				if !p.exited {
					p.signal(s)
				}
			}
			if cause == "" {
				cause = "forwarding " + s.String()
			}
			if !stopping {
				// a stop too: the exits it causes are not failures of their own, and
				// what still runs after the grace is killed
				stopping = true
				kill = time.After(grace)
			}
		case <-done:
			done = nil
			stop(ctx.Err().Error())
		case <-kill:
			for _, p := range procs {
				if !p.exited {
					p.kill()
				}
			}
		}
	}
	return launchResult(procs, first, cause)
}

// launchResult is Launch's error: the first rank that failed by itself, or else the
// first that failed at all (after a signal or a cancellation), nil when none did. The
// other failed ranks are listed, each with its status where it is not the first's: the
// first exit seen need not be the cause (when a rank dies, the others' collectives fail
// within microseconds and they exit too).
func launchResult(procs []*process, first *process, cause string) error {
	for _, p := range procs {
		if first == nil && p.err != nil {
			first = p
		}
	}
	if first == nil {
		return nil
	}
	var stopped []string
	for _, p := range procs {
		if p.err != nil && p != first {
			s := strconv.Itoa(p.rank)
			if p.err.Error() != first.err.Error() {
				s += " (" + p.err.Error() + ")"
			}
			stopped = append(stopped, s)
		}
	}
	msg := fmt.Sprintf("rank %d of %d failed", first.rank, len(procs))
	if cause != "" {
		msg += " (after " + cause + ")"
	}
	if len(stopped) > 0 {
		msg += "; rank(s) " + strings.Join(stopped, ", ") + " were stopped or failed too"
	}
	return &Error{Op: "launch", Rank: -1, Peer: first.rank, Msg: msg, Err: first.err}
}

// process is one started rank. Its fields are the Launch loop's, except err and the
// writers, which the goroutine waiting for it sets before it reports the exit.
type process struct {
	rank   int
	cmd    *exec.Cmd
	out    []*lineWriter // stdout and stderr
	exited bool
	err    error
}

// pickPort returns a TCP port free on host now.
func pickPort(host string) (int, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// lineWriter writes whole lines to w, each after prefix, under a lock shared by every
// process's writers, so lines of different ranks never interleave (nor do two ranks
// write to w at once).
type lineWriter struct {
	mu     *sync.Mutex
	w      io.Writer
	prefix string
	buf    []byte // guarded by mu: a line not yet ended
}

func (l *lineWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, b...)
	var out []byte
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		out = append(append(out, l.prefix...), l.buf[:i+1]...)
		l.buf = l.buf[i+1:]
	}
	if len(out) > 0 {
		if _, err := l.w.Write(out); err != nil {
			return 0, err
		}
	}
	return len(b), nil
}

// flush writes a last line that did not end, ending it.
func (l *lineWriter) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) > 0 {
		_, _ = l.w.Write(append(append([]byte(l.prefix), l.buf...), '\n'))
		l.buf = nil
	}
}
