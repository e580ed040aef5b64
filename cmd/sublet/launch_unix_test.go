//go:build unix

package main

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A terminal that hangs up (SIGHUP) or a Ctrl-\ (SIGQUIT) ends `sublet run`; its ranks,
// each the leader of its own process group, are not in the terminal's group, so the
// kernel signals none of them: sublet run must pass the signal on, or they run on,
// orphaned.
func TestRunPassesOnHangupAndQuit(t *testing.T) {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "RANK=") {
			env = append(env, kv)
		}
	}
	for _, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGQUIT} {
		cmd := exec.Command(os.Args[0], "run", "-nproc", "2", "-grace", "1s", os.Args[0])
		cmd.Env = append(env, "SUBLET_TEST_MAIN=1", rankWaitEnv+"=1")
		var errs strings.Builder
		cmd.Stderr = &errs
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		lines := bufio.NewScanner(out)
		var pids []int
		for len(pids) < 2 && lines.Scan() {
			_, pid, ok := strings.Cut(lines.Text(), "] ready ")
			if n, err := strconv.Atoi(pid); ok && err == nil {
				pids = append(pids, n)
			}
		}
		t.Cleanup(func() {
			for _, pid := range pids {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		})
		require.Len(t, pids, 2, "the ranks report ready")
		require.NoError(t, cmd.Process.Signal(sig))
		for lines.Scan() {
		}
		err = cmd.Wait()
		var exit *exec.ExitError
		require.True(t, errors.As(err, &exit), "%v", err)
		assert.Equal(t, 1, exit.ExitCode(), "sublet run ends by itself after %v: %v\n%s", sig, err, errs.String())
		assert.Contains(t, errs.String(), "(after forwarding "+sig.String()+")")
		for r, pid := range pids {
			assert.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH, "rank %d (pid %d) was left running after %v", r, pid, sig)
		}
	}
}
