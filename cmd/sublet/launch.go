package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/subletml/sublet/device/cuda"
	"github.com/subletml/sublet/dist"
)

const launchSynopsis = "sublet run [-nproc N|gpu|auto] [flags] PROGRAM [ARGS...]"

// runLaunch is `sublet run`: it starts -nproc copies of PROGRAM on this machine, each
// with the environment of its rank (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT, as torchrun sets them, and NCCL_NVLS_ENABLE=0), forwards
// SIGINT, SIGTERM, SIGHUP and SIGQUIT to them, and stops the others when one fails (see
// dist.Launch).
func runLaunch(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("run", launchSynopsis, stderr)
	nproc := fs.String("nproc", "auto", "processes to start: a number, gpu (one per GPU), or auto (one per GPU, one without a GPU)")
	addr := fs.String("master-addr", "127.0.0.1", "the address of rank 0, where the others connect (MASTER_ADDR; rank 0 listens on it alone when it is a loopback address, else on every address)")
	port := fs.Int("master-port", 0, "the port rank 0 listens on (MASTER_PORT); 0 picks a free one")
	timeout := fs.Duration("timeout", 0, "bound on the rendezvous and each collective, given as SUBLET_DIST_TIMEOUT (0: the programs' default, "+dist.DefaultTimeout.String()+")")
	grace := fs.Duration("grace", dist.DefaultGrace, "how long processes asked to stop (another rank failed, a signal was forwarded) get before they are killed")
	prefix := fs.Bool("prefix", true, `start each output line with "[rank N] "`)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "run: name the program to start")
		fs.Usage()
		return errUsage
	}
	n, err := processCount(*nproc)
	if err != nil {
		return err
	}
	sigs := make(chan os.Signal, 4)
	// every signal that would end sublet run: the ranks lead process groups of their
	// own, which neither a terminal's Ctrl-C, Ctrl-\ nor its hangup reaches
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)
	return dist.Launch(context.Background(), dist.LaunchConfig{
		NProc: n, Program: fs.Arg(0), Args: fs.Args()[1:],
		MasterAddr: *addr, MasterPort: *port, Timeout: *timeout, Grace: *grace,
		Stdout: stdout, Stderr: stderr, Prefix: *prefix, Signals: sigs,
	})
}

// processCount reads -nproc: a positive number, "gpu" (the GPUs the driver sees, at
// least one) or "auto" (the GPUs, or 1 without any).
func processCount(s string) (int, error) {
	switch s {
	case "gpu", "auto":
		n, err := cuda.Count()
		if err == nil && n > 0 {
			return n, nil
		}
		if s == "auto" {
			return 1, nil
		}
		if err == nil {
			err = fmt.Errorf("the driver sees no GPU")
		}
		return 0, fmt.Errorf("-nproc gpu: %w (give a number of processes instead)", err)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("-nproc %q: want a positive number, gpu or auto", s)
	}
	return n, nil
}
