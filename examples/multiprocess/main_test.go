//go:build unix

package main

import (
	"bytes"
	"os"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/device/cuda"
)

// The test binary is the workers' executable too: started with workerEnv set, it runs
// a worker instead of the tests.
func TestMain(m *testing.M) {
	if os.Getenv(workerEnv) != "" {
		os.Exit(workerMain(os.Args[1:], os.Stdin, os.Stdout))
	}
	os.Exit(m.Run())
}

// Two real processes on the shared simulated device: the fractions cap them, every exit
// path but SIGKILL releases everything, and the device ends as it began.
func TestTwoProcessesCleanUp(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(nil, &out), "output:\n%s", out.String())
	s := out.String()
	assert.Contains(t, s, "before: 1.00 GiB free of 1.00 GiB\n")
	assert.Regexp(t, `\[serve \d+\] filled its cache: 408\.00 MiB reserved of the 409\.60 MiB its fraction allows; the fraction refused the next segment before the device was asked\n`, s)
	assert.Equal(t, 2, count(s, `during: 376\.00 MiB free of 1\.00 GiB; train holds 240\.00 MiB \(its fraction allows 409\.60 MiB\), serve 408\.00 MiB \(allows 409\.60 MiB\)\n`), s)

	// Round 1: a normal exit and SIGTERM, each after its release.
	assert.Contains(t, s, "train: exit status 0\n")
	assert.Contains(t, s, "serve: exit status 143: stopped by SIGTERM after its release\n")
	assert.Regexp(t, `\[serve \d+\] exiting after SIGTERM\n`, s)
	// Round 2: an error, after its release; SIGKILL, which releases nothing.
	assert.Regexp(t, `\[train \d+\] exiting with an error: step 2: alloc: out of memory on sim\. Tried to allocate 24\.00 MiB\. .* 409\.60 MiB allowed;`, s)
	assert.Contains(t, s, "train: exit status 1\n")
	assert.Contains(t, s, "serve: killed by signal 9 (killed): no handler runs\n")
	assert.Contains(t, s, "serve released nothing itself: it left 408.00 MiB in the ledger")

	// Every release (two of train, one of serve) left nothing.
	assert.Equal(t, 3, count(s, `released everything: 0 B allocated, 0 B reserved; the ledger holds 0 B for this process \((\d+) device Mallocs, \d+ Frees\)`), s)
	for _, m := range regexp.MustCompile(`\((\d+) device Mallocs, (\d+) Frees\)`).FindAllStringSubmatch(s, -1) {
		assert.Equal(t, m[1], m[2], "as many Frees as Mallocs")
	}
	assert.Equal(t, 2, count(s, `after: 1\.00 GiB free of 1\.00 GiB, as before: nothing left on the device\n`), s)
}

func count(s, re string) int { return len(regexp.MustCompile(re).FindAllString(s, -1)) }

// The ledger: holdings per process, the shared capacity, a process's leftovers
// reclaimed.
func TestLedger(t *testing.T) {
	l := ledger{path: t.TempDir() + "/ledger", capacity: 100 << 20}
	require.NoError(t, l.update(func(holdings) ([]string, error) {
		return []string{"7 + 0x1000 1048576\n", "7 + 0x2000 2097152\n", "8 + 0x1000 4194304\n", "7 - 0x1000\n"}, nil
	}))
	h, err := l.read()
	require.NoError(t, err)
	assert.Equal(t, map[int]int64{7: 2 << 20, 8: 4 << 20}, h.bytes)
	assert.Equal(t, int64(6<<20), h.total())
	assert.Equal(t, []int{7, 8}, h.pids())
	n, err := l.reclaim(8)
	require.NoError(t, err)
	assert.Equal(t, int64(4<<20), n)
	h, err = l.read()
	require.NoError(t, err)
	assert.Equal(t, []int{7}, h.pids())

	require.NoError(t, os.WriteFile(l.path, []byte("7 - 0x9\n"), 0o644))
	_, err = l.read()
	assert.ErrorContains(t, err, "process 7 frees 0x9, which it does not hold")
	require.NoError(t, os.WriteFile(l.path, []byte("7 * 0x9\n"), 0o644))
	_, err = l.read()
	assert.ErrorContains(t, err, `line 1: "7 * 0x9": want`)
}

// On a GPU the memory is the driver's, all processes included: after each round it is
// back where it was. Skipped without one.
func TestTwoProcessesOnTheGPU(t *testing.T) {
	if n, err := cuda.Count(); err != nil || n == 0 {
		t.Skipf("no GPU (%d found, %v)", n, err)
	}
	var out bytes.Buffer
	require.NoError(t, run([]string{"-device", "cuda:0"}, &out), "output:\n%s", out.String())
	assert.Equal(t, 2, count(out.String(), `as before: nothing left on the device\n`), out.String())
	assert.Contains(t, out.String(), "serve: exit status 143: stopped by SIGTERM after its release\n")
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-train", "0.7"}, {"-serve", "0"}, {"-train", "-1"}, {"-capacity", "x"}, {"-device", "cpu"}, {"extra"},
	} {
		var out bytes.Buffer
		assert.Error(t, run(args, &out), "%v", args)
	}
}
