//go:build unix

package dist

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/device/named"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/tensor"
)

func init() {
	// ddp-fault: every rank trains a small DataParallel MLP; after the first step rank
	// $FAULT_RANK dies ($FAULT=die) or hangs ($FAULT=hang). The others print the error
	// their next step fails with and exit with status 1. They ignore the launcher's
	// SIGTERM (sent as soon as one rank fails), so that each reports its own failure.
	helpers["ddp-fault"] = func() int {
		signal.Ignore(syscall.SIGTERM)
		err := faultyRank(os.Getenv("FAULT"), os.Getenv("FAULT_RANK"))
		if err != nil {
			fmt.Println("step failed:", err)
			return 1
		}
		return 0
	}
}

func faultyRank(fault, faultRank string) error {
	g, err := InitFromEnv()
	if err != nil {
		return err
	}
	defer g.Close()
	dev, err := named.Open("cpu")
	if err != nil {
		return err
	}
	m := nn.NewMLP(nn.Init{Device: dev, Gen: tensor.NewGenerator(1)}, nn.MLPConfig{Sizes: []int{3, 8, 2}})
	defer m.Release()
	dp, err := NewDataParallel(m, NewCPU(g), DataParallelConfig{})
	if err != nil {
		return err
	}
	defer dp.Release()
	for i := range 3 {
		if i == 1 && fmt.Sprint(g.Rank()) == faultRank {
			switch fault {
			case "die":
				os.Exit(3)
			case "hang":
				select {}
			}
		}
		if err := step(dev, dp, 3); err != nil {
			return err
		}
	}
	return nil
}

// faultLaunch runs 3 ranks of ddp-fault with rank 1 faulting and returns the launch
// error and the output.
func faultLaunch(t *testing.T, fault string) (error, string) {
	c := helperLaunch(3, "ddp-fault", "FAULT="+fault, "FAULT_RANK=1")
	c.Timeout, c.Grace = 500*time.Millisecond, time.Second
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	return Launch(context.Background(), c), out.String()
}

func TestARankProcessThatDiesFailsTheOthers(t *testing.T) {
	err, out := faultLaunch(t, "die")
	require.Error(t, err)
	assert.Contains(t, out, "[rank 0] step failed: tensor: Backward")
	assert.Contains(t, out, "DataParallel: reducing gradients: dist: rank 0: AllReduce(float32[50], avg) #6")
	assert.Contains(t, out, "rank 1 closed the connection: its process died, or it closed or aborted the group: a rank left the group")
	assert.Contains(t, out, "[rank 2] step failed: ")
	assert.Contains(t, out, "rank 0 reports: rank 1 closed the connection")
	var e *Error
	require.ErrorAs(t, err, &e, "the launch names the first rank seen to fail")
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	// the others fail within microseconds of rank 1's death, so the first exit Launch
	// sees may be theirs: whichever it is, rank 1's own status is in the error
	if e.Peer == 1 {
		assert.Equal(t, 3, exit.ExitCode(), "%v", err)
	} else {
		assert.Contains(t, err.Error(), "1 (exit status 3)", "rank 1's own status")
	}
}

func TestARankProcessThatHangsTimesTheOthersOut(t *testing.T) {
	start := time.Now()
	err, out := faultLaunch(t, "hang")
	require.Error(t, err)
	assert.Contains(t, out, "[rank 0] step failed: ")
	assert.Contains(t, out, "rank 1 did not take part within 500ms: it is hung or far behind")
	assert.Contains(t, out, "[rank 2] step failed: ")
	assert.Less(t, time.Since(start), 30*time.Second, "no rank hangs: the hung one is stopped when the others fail")
}
