package main

import (
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/device/cuda"
)

// rankHelperEnv makes a re-executed test binary act as a rank that `sublet run`
// started: it prints its rank and fails (status 5) when it is rank $value.
const rankHelperEnv = "SUBLET_CLI_TEST_RANK"

// rankWaitEnv makes a re-executed test binary that `sublet run` started as a rank (RANK
// is set) print "ready PID" and wait, with the default response to every signal.
const rankWaitEnv = "SUBLET_CLI_TEST_WAIT"

// rankHelper acts as the rank rankHelperEnv or rankWaitEnv asks for (TestMain in
// top_test.go calls it first).
func rankHelper() {
	if _, ok := os.LookupEnv(rankWaitEnv); ok && os.Getenv("RANK") != "" {
		fmt.Printf("ready %d\n", os.Getpid())
		select {}
	}
	if fail, ok := os.LookupEnv(rankHelperEnv); ok {
		fmt.Printf("rank %s of %s, master %s\n", os.Getenv("RANK"), os.Getenv("WORLD_SIZE"), os.Getenv("MASTER_ADDR"))
		if os.Getenv("RANK") == fail {
			fmt.Fprintln(os.Stderr, "failing on purpose")
			os.Exit(5)
		}
		os.Exit(0)
	}
}

func TestRunStartsTheRanks(t *testing.T) {
	t.Setenv(rankHelperEnv, "none")
	code, out, errs := sublet("run", "-nproc", "3", os.Args[0], "-test.run=^$")
	require.Equal(t, 0, code, errs)
	for r := range 3 {
		assert.Contains(t, out, fmt.Sprintf("[rank %d] rank %d of 3, master 127.0.0.1\n", r, r))
	}
	code, out, _ = sublet("run", "-nproc", "1", "-prefix=false", os.Args[0])
	require.Equal(t, 0, code)
	assert.Equal(t, "rank 0 of 1, master 127.0.0.1\n", out)
}

func TestRunReportsTheRankThatFailed(t *testing.T) {
	t.Setenv(rankHelperEnv, "1")
	code, _, errs := sublet("run", "-nproc", "2", "-grace", "1s", os.Args[0])
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "[rank 1] failing on purpose\n")
	assert.Contains(t, errs, "sublet run: dist: launch: rank 1 of 2 failed")
	assert.Contains(t, errs, ": exit status 5\n", "rank 0 may have been stopped first")
}

func TestRunBadUsage(t *testing.T) {
	code, _, errs := sublet("run")
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, "run: name the program to start")
	assert.Contains(t, errs, "usage: sublet run [-nproc N|gpu|auto]")

	code, _, errs = sublet("run", "-nproc", "0", "true")
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, `sublet run: -nproc "0": want a positive number, gpu or auto`)

	code, _, errs = sublet("run", "-nproc", "1", "/nonexistent/program")
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "cannot start rank 0: /nonexistent/program")

	if n, err := cuda.Count(); err != nil || n == 0 {
		code, _, errs = sublet("run", "-nproc", "gpu", "true")
		assert.Equal(t, 1, code)
		assert.Contains(t, errs, "sublet run: -nproc gpu: ")
		assert.Contains(t, errs, "(give a number of processes instead)")
		n, err := processCount("auto")
		require.NoError(t, err)
		assert.Equal(t, 1, n, "auto without a GPU is one process")
	}
}
