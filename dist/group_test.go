package dist

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestGroupFormsAndRunsByteCollectives(t *testing.T) {
	const n = 3
	groups := initGroups(t, n, 10*time.Second)
	for r, g := range groups {
		assert.Equal(t, r, g.Rank())
		assert.Equal(t, n, g.WorldSize())
		assert.Equal(t, r, g.LocalRank())
	}
	for _, err := range parallel(n, func(r int) error {
		g := groups[r]
		if err := g.Barrier(); err != nil {
			return err
		}
		got, err := g.BroadcastBytes([]byte(fmt.Sprintf("from rank %d", r)), 1)
		if err != nil {
			return err
		}
		if string(got) != "from rank 1" {
			return fmt.Errorf("rank %d got %q", r, got)
		}
		all, err := g.AllGatherBytes([]byte(fmt.Sprint(r * 111)))
		if err != nil {
			return err
		}
		if want := [][]byte{[]byte("0"), []byte("111"), []byte("222")}; fmt.Sprint(all) != fmt.Sprint(want) {
			return fmt.Errorf("rank %d gathered %q", r, all)
		}
		return g.Err()
	}) {
		require.NoError(t, err)
	}
}

func TestWorldOfOneUsesNoNetwork(t *testing.T) {
	g, err := Init(Config{WorldSize: 1})
	require.NoError(t, err)
	require.NoError(t, g.Barrier())
	b, err := g.BroadcastBytes([]byte("x"), 0)
	require.NoError(t, err)
	assert.Equal(t, "x", string(b))
	_, err = g.BroadcastBytes(nil, 1)
	assert.ErrorIs(t, err, ErrConfig, "root 1 of a group of 1")
	require.NoError(t, g.Close())
	requireDistError(t, g.Barrier(), 0, -1, ErrClosed)
	require.NoError(t, g.Close(), "Close is idempotent")
}

func TestRendezvousErrorsAreNamed(t *testing.T) {
	t.Run("port taken", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer ln.Close()
		port := ln.Addr().(*net.TCPAddr).Port
		_, err = Init(localConfig(0, 2, port, time.Second))
		requireDistError(t, err, 0, -1, ErrRendezvous)
		assert.Contains(t, err.Error(), fmt.Sprintf("rank 0 cannot listen on 127.0.0.1:%d", port))
		assert.Contains(t, err.Error(), "choose another MASTER_PORT")
	})
	t.Run("nobody listening", func(t *testing.T) {
		port := freePort(t)
		_, err := Init(localConfig(1, 2, port, 300*time.Millisecond))
		requireDistError(t, err, 1, 0, ErrTimeout)
		assert.ErrorIs(t, err, ErrRendezvous)
		assert.Contains(t, err.Error(), fmt.Sprintf("nobody accepted at 127.0.0.1:%d within 300ms", port))
	})
	t.Run("a rank missing", func(t *testing.T) {
		port := freePort(t)
		errs := parallel(2, func(r int) error {
			_, err := Init(localConfig(r, 3, port, 500*time.Millisecond))
			return err
		})
		requireDistError(t, errs[0], 0, -1, ErrTimeout)
		assert.Contains(t, errs[0].Error(), "rank(s) 2 of 3 did not join")
		requireDistError(t, errs[1], 1, 0, ErrRendezvous)
		assert.Contains(t, errs[1].Error(), "rank 0 refused the group: rank(s) 2 of 3 did not join")
	})
	t.Run("world sizes differ", func(t *testing.T) {
		port := freePort(t)
		errs := parallel(2, func(r int) error {
			_, err := Init(localConfig(r, 2+r, port, 5*time.Second))
			return err
		})
		requireDistError(t, errs[0], 0, 1, ErrRendezvous)
		assert.Contains(t, errs[0].Error(), "rank 1 joined with WORLD_SIZE=3, rank 0 has 2")
		requireDistError(t, errs[1], 1, 0, ErrRendezvous)
		assert.Contains(t, errs[1].Error(), "WORLD_SIZE=3, rank 0 has 2")
	})
	t.Run("one rank twice", func(t *testing.T) {
		port := freePort(t)
		errs := parallel(3, func(r int) error {
			_, err := Init(localConfig(min(r, 1), 3, port, 5*time.Second))
			return err
		})
		requireDistError(t, errs[0], 0, 1, ErrRendezvous)
		assert.Contains(t, errs[0].Error(), "two processes joined as rank 1")
		// one of the two rank-1 processes was refused first, the other with the rest
		for _, err := range errs[1:] {
			requireDistError(t, err, 1, 0, ErrRendezvous)
		}
	})
	t.Run("a foreign server", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer ln.Close()
		go func() {
			c, err := ln.Accept()
			if err == nil {
				_, _ = c.Write([]byte("HTTP/1.1 400 Bad Request\r\n\r\nthis is not it, sorry\r\n"))
				c.Close()
			}
		}()
		_, err = Init(localConfig(1, 2, ln.Addr().(*net.TCPAddr).Port, 5*time.Second))
		requireDistError(t, err, 1, 0, ErrRendezvous)
		assert.Contains(t, err.Error(), "is not a sublet rank 0")
	})
	t.Run("a host that does not resolve", func(t *testing.T) {
		var dnsErr *net.DNSError
		if _, err := net.LookupHost("nonexistent.invalid"); !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
			t.Skipf("this machine cannot tell that a name does not exist (no resolver answers: %v)", err)
		}
		c := localConfig(1, 2, 29500, 5*time.Second)
		c.MasterAddr = "nonexistent.invalid"
		_, err := Init(c)
		requireDistError(t, err, 1, -1, ErrConfig)
		assert.Contains(t, err.Error(), `MASTER_ADDR="nonexistent.invalid": the host does not resolve`)
	})
	t.Run("a stray connection is ignored", func(t *testing.T) {
		port := freePort(t)
		stray := make(chan error, 1)
		go func() {
			for {
				c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
				if err == nil {
					_, err = c.Write([]byte("GET / HTTP/1.0\r\n\r\n" + string(make([]byte, 64))))
					c.Close()
					stray <- err
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
		}()
		var g0 *Group
		errs := parallel(2, func(r int) error {
			if r == 1 {
				if err := <-stray; err != nil {
					return err
				}
			}
			g, err := Init(localConfig(r, 2, port, 5*time.Second))
			if err == nil {
				if r == 0 {
					g0 = g
				}
				err = g.Barrier()
				if r == 1 {
					g.Close()
				}
			}
			return err
		})
		require.NoError(t, errs[0])
		require.NoError(t, errs[1])
		g0.Close()
	})
}

// Rank 0 listens on every address of its machine, as PyTorch's TCPStore does, not only
// on MASTER_ADDR: on a cluster MASTER_ADDR is how the others reach rank 0 (a host name
// that resolves to 127.0.1.1 on rank 0's own machine, a Kubernetes service address),
// which need not be an address rank 0 can listen on. 192.0.2.1 (TEST-NET-1) is none of
// this machine's; the other rank reaches rank 0 over the loopback.
func TestRankZeroListensOnEveryAddress(t *testing.T) {
	port := freePort(t)
	groups := make([]*Group, 2)
	for r, err := range parallel(2, func(r int) error {
		c := localConfig(r, 2, port, 5*time.Second)
		if r == 0 {
			c.MasterAddr = "192.0.2.1"
		}
		g, err := Init(c)
		if err != nil {
			return err
		}
		groups[r] = g
		return g.Barrier()
	}) {
		require.NoError(t, err, "rank %d", r)
	}
	for _, g := range groups {
		require.NoError(t, g.Close())
	}
}

func TestAHungRankTimesEveryoneOut(t *testing.T) {
	groups := initGroups(t, 3, 300*time.Millisecond)
	errs := parallel(2, func(r int) error { return groups[r].Barrier() }) // rank 2 never comes
	e := requireDistError(t, errs[0], 0, 2, ErrTimeout)
	assert.Contains(t, e.Error(), "Barrier(0 bytes) #0: rank 2 did not take part within 300ms: it is hung or far behind")
	assert.Contains(t, e.Error(), "raise SUBLET_DIST_TIMEOUT")
	e = requireDistError(t, errs[1], 1, 2, ErrTimeout)
	assert.Contains(t, e.Error(), "rank 0 reports: rank 2 did not take part within 300ms")
	// the group is broken for good, on every rank
	assert.Equal(t, errs[0], groups[0].Barrier())
	assert.Equal(t, errs[1], groups[1].Barrier())
	requireDistError(t, groups[2].Barrier(), 2, 2, ErrTimeout) // the late rank learns why
}

func TestARankThatLeavesFailsTheOthers(t *testing.T) {
	groups := initGroups(t, 3, 10*time.Second)
	require.NoError(t, groups[2].Close())
	errs := parallel(2, func(r int) error { return groups[r].Barrier() })
	e := requireDistError(t, errs[0], 0, 2, ErrPeerGone)
	assert.Contains(t, e.Error(), "rank 2 closed the connection: its process died, or it closed or aborted the group")
	requireDistError(t, errs[1], 1, 2, ErrPeerGone)
}

func TestRankZeroLeavingFailsTheOthers(t *testing.T) {
	groups := initGroups(t, 3, 10*time.Second)
	require.NoError(t, groups[0].Close())
	for r, err := range parallel(3, func(r int) error {
		if r == 0 {
			return nil
		}
		return groups[r].Barrier()
	})[1:] {
		e := requireDistError(t, err, r+1, 0, ErrPeerGone)
		assert.Contains(t, e.Error(), "rank 0 closed the connection")
	}
}

func TestAbortReachesEveryRank(t *testing.T) {
	groups := initGroups(t, 3, 10*time.Second)
	groups[1].Abort("the user gave up")
	requireDistError(t, groups[1].Barrier(), 1, -1, ErrAborted)
	errs := parallel(3, func(r int) error {
		if r == 1 {
			return nil
		}
		return groups[r].Barrier()
	})
	e := requireDistError(t, errs[0], 0, 1, ErrAborted)
	assert.Contains(t, e.Error(), "rank 1 reports: aborted: the user gave up")
	requireDistError(t, errs[2], 2, 1, ErrAborted)
	groups[1].Abort("again") // idempotent
}

func TestAbortInterruptsACollectiveInFlight(t *testing.T) {
	groups := initGroups(t, 2, time.Minute)
	go func() {
		time.Sleep(20 * time.Millisecond)
		groups[0].Abort("watchdog")
	}()
	err := groups[0].Barrier() // rank 1 never comes: only the abort ends it
	requireDistError(t, err, 0, -1, ErrAborted)
	requireDistError(t, groups[1].Barrier(), 1, -1, ErrAborted)
}

func TestDifferentCollectivesAreAMismatch(t *testing.T) {
	groups := initGroups(t, 3, 10*time.Second)
	errs := parallel(3, func(r int) error {
		if r == 2 {
			_, err := groups[r].BroadcastBytes(nil, 0)
			return err
		}
		return groups[r].Barrier()
	})
	e := requireDistError(t, errs[0], 0, 2, ErrMismatch)
	assert.Contains(t, e.Error(), "rank 0 called Barrier(0 bytes) and rank 2 called BroadcastBytes(0 bytes, root 0) as collective #0")
	requireDistError(t, errs[1], 1, 2, ErrMismatch)
	requireDistError(t, errs[2], 2, 2, ErrMismatch)
}

// openFiles counts this process's open file descriptors (-1 where /proc is missing).
func openFiles() int {
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(fds)
}

// A group's life, healthy or failed (a hung rank, an abort, a rank that leaves, a
// mismatch, a rendezvous that does not complete), ends with no goroutine and no
// connection left in the process.
func TestAGroupLeavesNoGoroutinesNorConnections(t *testing.T) {
	goroutines, files := runtime.NumGoroutine(), openFiles()
	for _, fault := range []string{"none", "hang", "abort", "leave", "mismatch"} {
		port := freePort(t)
		groups := make([]*Group, 3)
		for r, err := range parallel(3, func(r int) error {
			var err error
			groups[r], err = Init(localConfig(r, 3, port, 300*time.Millisecond))
			return err
		}) {
			require.NoError(t, err, "%s: rank %d", fault, r)
		}
		parallel(3, func(r int) error {
			g := groups[r]
			switch {
			case fault == "hang" && r == 2:
				return nil
			case fault == "abort" && r == 1:
				g.Abort("leak test")
				return nil
			case fault == "leave" && r == 2:
				return g.Close()
			case fault == "mismatch" && r == 2:
				_, err := g.BroadcastBytes(nil, 0)
				return err
			}
			return g.Barrier()
		})
		for _, g := range groups {
			_ = g.Close()
		}
	}
	port := freePort(t)
	parallel(2, func(r int) error { // rank 2 of 3 never comes
		_, err := Init(localConfig(r, 3, port, 200*time.Millisecond))
		return err
	})
	// polled here: assert.Eventually runs its condition on goroutines of its own
	for deadline := time.Now().Add(5 * time.Second); runtime.NumGoroutine() > goroutines && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if !assert.LessOrEqual(t, runtime.NumGoroutine(), goroutines, "goroutines left of the groups") {
		buf := make([]byte, 1<<20)
		t.Logf("%s", buf[:runtime.Stack(buf, true)])
	}
	assert.Equal(t, files, openFiles(), "open files before and after")
}
