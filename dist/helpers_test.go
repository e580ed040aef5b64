package dist

import (
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// freePort returns a TCP port nothing listens on now.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// localConfig is rank's config in a world of n on this machine at port.
func localConfig(rank, n, port int, timeout time.Duration) Config {
	return Config{Rank: rank, WorldSize: n, LocalRank: rank, MasterAddr: "127.0.0.1", MasterPort: port, Timeout: timeout}
}

// parallel runs f for ranks 0..n-1 at once, each on its own goroutine, and returns
// their errors by rank.
func parallel(n int, f func(rank int) error) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = f(r)
		}()
	}
	wg.Wait()
	return errs
}

// initGroups makes a group of n ranks in this process (one goroutine each, over TCP on
// the loopback) and closes them when the test ends.
func initGroups(t testing.TB, n int, timeout time.Duration) []*Group {
	t.Helper()
	port := freePort(t)
	groups := make([]*Group, n)
	for r, err := range parallel(n, func(r int) error {
		g, err := Init(localConfig(r, n, port, timeout))
		groups[r] = g
		return err
	}) {
		require.NoError(t, err, "rank %d", r)
	}
	t.Cleanup(func() {
		for _, g := range groups {
			_ = g.Close()
		}
	})
	return groups
}

// requireDistError asserts err is an *Error of rank with cause (nil: any), whose peer
// is peer, and returns it.
func requireDistError(t testing.TB, err error, rank, peer int, cause error) *Error {
	t.Helper()
	require.Error(t, err)
	e, ok := err.(*Error)
	require.True(t, ok, "%T: %v", err, err)
	if cause != nil {
		require.ErrorIs(t, err, cause, "%v", err)
	}
	require.Equal(t, rank, e.Rank, "reporting rank of %v", err)
	require.Equal(t, peer, e.Peer, "rank at fault in %v", err)
	return e
}

// helperLaunch is a launch of n ranks of this test binary running helper.
func helperLaunch(n int, helper string, env ...string) LaunchConfig {
	return LaunchConfig{NProc: n, Program: os.Args[0], Prefix: true,
		Env: append(append(os.Environ(), helperEnv+"="+helper), env...)}
}
