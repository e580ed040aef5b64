//go:build unix

package dist

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func init() {
	helpers["env"] = func() int {
		var vals []string
		for _, k := range rankEnv {
			vals = append(vals, k+"="+os.Getenv(k))
		}
		fmt.Println(strings.Join(vals, " "))
		fmt.Fprint(os.Stderr, "no newline at the end")
		return 0
	}
	// wait: report ready, wait for SIGTERM or SIGINT, report it; rank $FAIL_RANK exits
	// with status 3 at once instead.
	helpers["wait"] = func() int {
		if os.Getenv("FAIL_RANK") == os.Getenv(EnvRank) {
			fmt.Println("failing")
			return 3
		}
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
		fmt.Println("ready")
		fmt.Println("got", <-ch)
		return 0
	}
	// orphan: rank $FAIL_RANK starts a sleeper in its process group, which holds its
	// output, and exits with status 3 at once; the others wait for a signal.
	helpers["orphan"] = func() int {
		if os.Getenv("FAIL_RANK") != os.Getenv(EnvRank) {
			return helpers["wait"]()
		}
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), helperEnv+"=sleeper")
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Start(); err != nil {
			fmt.Println("cannot start the sleeper:", err)
		}
		return 3
	}
	// sleeper: report its process id, never exit by itself.
	helpers["sleeper"] = func() int {
		fmt.Println("sleeper", os.Getpid())
		select {}
	}
	// stubborn: ignore SIGTERM and SIGINT, report ready, never exit by itself.
	helpers["stubborn"] = func() int {
		if os.Getenv("FAIL_RANK") == os.Getenv(EnvRank) {
			return 4
		}
		signal.Ignore(syscall.SIGTERM, syscall.SIGINT)
		fmt.Println("ready")
		select {}
	}
}

// watched is a writer that counts the lines containing a word and tells when n have come.
type watched struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	word  string
	n     int
	ready chan struct{}
}

func newWatched(word string, n int) *watched {
	return &watched{word: word, n: n, ready: make(chan struct{})}
}

func (w *watched) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(b)
	if w.n > 0 && strings.Count(w.buf.String(), w.word) >= w.n {
		w.n = 0
		close(w.ready)
	}
	return len(b), nil
}

func (w *watched) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func TestLaunchGivesEachRankItsEnvironment(t *testing.T) {
	c := helperLaunch(3, "env", "RANK=99", "NCCL_NVLS_ENABLE=1")
	c.MasterPort, c.Timeout = 4242, 90*time.Second
	var out, errs bytes.Buffer
	c.Stdout, c.Stderr = &out, &errs
	require.NoError(t, Launch(context.Background(), c))
	for r := range 3 {
		assert.Contains(t, out.String(), fmt.Sprintf("[rank %d] RANK=%d WORLD_SIZE=3 LOCAL_RANK=%d LOCAL_WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT=4242 SUBLET_DIST_TIMEOUT=1m30s NCCL_NVLS_ENABLE=0\n", r, r, r))
		assert.Contains(t, errs.String(), fmt.Sprintf("[rank %d] no newline at the end\n", r), "a last unended line is ended")
	}
	assert.Equal(t, 3, strings.Count(out.String(), "\n"))

	c = helperLaunch(2, "env")
	out.Reset()
	c.Stdout, c.Stderr, c.Prefix = &out, &errs, false
	require.NoError(t, Launch(context.Background(), c))
	assert.Contains(t, out.String(), "RANK=1 WORLD_SIZE=2 ")
	assert.NotContains(t, out.String(), "MASTER_PORT=0 ", "a free port was picked")
	assert.NotContains(t, out.String(), "[rank")
}

func TestLaunchStopsTheRestWhenOneFails(t *testing.T) {
	c := helperLaunch(3, "wait", "FAIL_RANK=1")
	out := new(watched)
	c.Stdout, c.Stderr = out, out
	err := Launch(context.Background(), c)
	e := requireDistError(t, err, -1, 1, nil)
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit))
	assert.Equal(t, 3, exit.ExitCode())
	assert.Contains(t, e.Error(), "dist: launch: rank 1 of 3 failed")
	assert.Contains(t, e.Error(), "exit status 3")
	for _, r := range []int{0, 2} {
		// a rank stopped before its handler was installed dies of the signal instead
		if strings.Contains(out.String(), fmt.Sprintf("[rank %d] ready", r)) {
			assert.Contains(t, out.String(), fmt.Sprintf("[rank %d] got terminated", r))
		}
	}
}

// alive reports whether process pid exists and is not a zombie.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return !os.IsNotExist(err)
	}
	_, state, _ := strings.Cut(string(stat), ") ")
	return !strings.HasPrefix(state, "Z")
}

// A rank that exits and leaves a process behind in its process group, holding its
// output: Launch learns of the exit (it does not wait for the output to end), stops
// the others and kills what the rank left.
func TestLaunchLeavesNothingOfARankBehind(t *testing.T) {
	c := helperLaunch(2, "orphan", "FAIL_RANK=1")
	out := newWatched("sleeper", 1)
	c.Stdout, c.Stderr, c.Grace = out, out, time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := Launch(ctx, c)
	require.NoError(t, ctx.Err(), "Launch returned only when the test gave up: it waited for the output of what rank 1 left behind\n%s", out)
	e := requireDistError(t, err, -1, 1, nil)
	assert.Contains(t, e.Error(), "dist: launch: rank 1 of 2 failed")
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "%v", err)
	assert.Equal(t, 3, exit.ExitCode())
	m := regexp.MustCompile(`\[rank 1\] sleeper (\d+)`).FindStringSubmatch(out.String())
	require.NotNil(t, m, out.String())
	pid, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	assert.Eventually(t, func() bool { return !alive(pid) }, 5*time.Second, 10*time.Millisecond, "rank 1's sleeper (pid %d) was left running", pid)
}

func TestLaunchKillsWhatIgnoresTheStop(t *testing.T) {
	c := helperLaunch(2, "stubborn")
	out := newWatched("ready", 2)
	c.Stdout, c.Stderr, c.Grace = out, out, 100*time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-out.ready
		cancel()
	}()
	err := Launch(ctx, c)
	e := requireDistError(t, err, -1, 0, nil)
	assert.Contains(t, e.Error(), "rank 0 of 2 failed (after context canceled); rank(s) 1 were stopped or failed too: signal: killed")
}

// cpuTime is the CPU time this process has used so far.
func cpuTime(t *testing.T) time.Duration {
	var u syscall.Rusage
	require.NoError(t, syscall.Getrusage(syscall.RUSAGE_SELF, &u))
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// While the processes it stopped take their grace period, Launch waits: it does not
// spin on the cancelled context (which would burn a core for the whole period).
func TestLaunchWaitsOutTheGraceWithoutSpinning(t *testing.T) {
	c := helperLaunch(2, "stubborn")
	out := newWatched("ready", 2)
	c.Stdout, c.Stderr, c.Grace = out, out, time.Second
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-out.ready
		cancel()
	}()
	before := cpuTime(t)
	err := Launch(ctx, c)
	used := cpuTime(t) - before
	requireDistError(t, err, -1, 0, nil)
	// measured: 2 ms waiting, 350 ms (a third of a core on a busy machine) spinning
	assert.Less(t, used, c.Grace/10, "CPU time Launch used while its processes ignored SIGTERM for the %v grace", c.Grace)
}

func TestLaunchForwardsSignals(t *testing.T) {
	c := helperLaunch(2, "wait")
	out := newWatched("ready", 2)
	sigs := make(chan os.Signal, 1)
	c.Stdout, c.Stderr, c.Signals = out, out, sigs
	go func() {
		<-out.ready
		sigs <- syscall.SIGINT
	}()
	require.NoError(t, Launch(context.Background(), c), "the ranks handled the signal and exited with 0")
	assert.Contains(t, out.String(), "[rank 0] got interrupt")
	assert.Contains(t, out.String(), "[rank 1] got interrupt")
}

// A forwarded signal is a stop, as torchrun's: ranks that ignore it are killed after the
// grace period, so a Ctrl-C always ends the job.
func TestLaunchKillsWhatIgnoresAForwardedSignal(t *testing.T) {
	c := helperLaunch(2, "stubborn")
	out := newWatched("ready", 2)
	sigs := make(chan os.Signal, 1)
	c.Stdout, c.Stderr, c.Signals, c.Grace = out, out, sigs, 100*time.Millisecond
	go func() {
		<-out.ready
		sigs <- syscall.SIGINT
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := Launch(ctx, c)
	require.NoError(t, ctx.Err(), "Launch returned only when the test gave up: the ranks ignored the signal and nothing killed them")
	e := requireDistError(t, err, -1, 0, nil)
	assert.Contains(t, e.Error(), "rank 0 of 2 failed (after forwarding interrupt); rank(s) 1 were stopped or failed too: signal: killed")
}

// The error names every rank that failed with its own status, not only the first one
// seen: ranks fail within microseconds of each other when one dies (their collectives
// fail), and the first exit seen need not be the cause.
func TestLaunchResultNamesEveryStatus(t *testing.T) {
	procs := []*process{{rank: 0, err: errors.New("exit status 1")}, {rank: 1, err: errors.New("exit status 3")}, {rank: 2}, {rank: 3, err: errors.New("signal: killed")}}
	err := launchResult(procs, procs[0], "")
	e := requireDistError(t, err, -1, 0, nil)
	assert.Equal(t, "dist: launch: rank 0 of 4 failed; rank(s) 1 (exit status 3), 3 (signal: killed) were stopped or failed too: exit status 1", e.Error())
	procs[1].err = errors.New("exit status 1")
	assert.Contains(t, launchResult(procs, procs[0], "").Error(), "rank(s) 1, 3 (signal: killed) were", "a status like the first's is not repeated")
	assert.ErrorIs(t, err, procs[0].err, "the first rank's own error is the cause")
	require.NoError(t, launchResult(procs[2:3], nil, ""))
}

func TestLaunchErrors(t *testing.T) {
	err := Launch(context.Background(), LaunchConfig{NProc: 0, Program: "x"})
	assert.ErrorIs(t, err, ErrConfig)
	assert.Contains(t, err.Error(), `nproc="0": start at least one process`)
	err = Launch(context.Background(), LaunchConfig{NProc: 1})
	assert.ErrorIs(t, err, ErrConfig)
	err = Launch(context.Background(), LaunchConfig{NProc: 2, Program: "/nonexistent/program"})
	requireDistError(t, err, -1, 0, os.ErrNotExist)
	assert.Contains(t, err.Error(), "cannot start rank 0: /nonexistent/program")
}
