//go:build unix

package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/cuda"
	"github.com/subletml/sublet/device/sim"
	"github.com/subletml/sublet/examples/internal/demo"
	"github.com/subletml/sublet/internal/units"
)

// workerEnv, set in a process's environment, makes it a worker (the parent starts its
// own executable again with it).
const workerEnv = "SUBLET_MULTIPROCESS_WORKER"

// exitSIGTERM is a worker's status after it released everything on SIGTERM: 128 + the
// signal's number, as a shell reports a process the signal ended.
const exitSIGTERM = 128 + int(syscall.SIGTERM)

// worker is one process's settings (its flags).
type worker struct {
	role     string // train or serve
	fraction float64
	// fail makes train end with an error instead of finishing.
	fail bool
	// device is sim or cuda:N; ledger the shared ledger's file; capacity the simulated
	// device's.
	device, ledger string
	capacity       int64
}

// workerMain is a worker process's main: it returns the exit status.
func workerMain(args []string, stdin io.Reader, stdout io.Writer) int {
	var w worker
	fs := demo.Flags("worker", stdout)
	fs.StringVar(&w.role, "role", "", "train or serve")
	fs.Float64Var(&w.fraction, "fraction", 0, "per-process memory fraction")
	fs.BoolVar(&w.fail, "fail", false, "train: end with an error")
	fs.StringVar(&w.device, "device", "sim", "sim, cuda or cuda:N")
	fs.StringVar(&w.ledger, "ledger", "", "the shared ledger file")
	fs.Int64Var(&w.capacity, "capacity", 0, "sim: the shared capacity in bytes")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	// SIGTERM (and an interrupt) cancel the context; the work returns, and the deferred
	// release below runs on that path as on the others.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	err := w.run(ctx, stdin, stdout)
	switch {
	case errors.Is(err, context.Canceled):
		fmt.Fprintln(stdout, "exiting after SIGTERM")
		return exitSIGTERM
	case err != nil:
		fmt.Fprintf(stdout, "exiting with an error: %s\n", demo.FirstLine(err))
		return 1
	}
	fmt.Fprintln(stdout, "exiting normally")
	return 0
}

// blocks is what a worker holds: the live blocks of its allocator.
type blocks struct {
	a    *alloc.Allocator
	live []device.Ptr
}

func (b *blocks) alloc(n int64) error {
	p, err := b.a.Alloc(n, 0)
	if err != nil {
		return err
	}
	b.live = append(b.live, p)
	return nil
}

// freeFrom frees the blocks allocated after the first n.
func (b *blocks) freeFrom(n int) error {
	for len(b.live) > n {
		if err := b.a.Free(b.live[len(b.live)-1]); err != nil {
			return err
		}
		b.live = b.live[:len(b.live)-1]
	}
	return nil
}

// release is the cleanup every exit path runs: every block freed, the cache given back
// to the device, and a check that nothing is left.
func (b *blocks) release(out io.Writer, dev *ledgerDevice) error {
	err := errors.Join(b.freeFrom(0), b.a.EmptyCache())
	m := demo.Read(b.a)
	h, lerr := dev.l.read()
	fmt.Fprintf(out, "released everything: %s allocated, %s reserved; the ledger holds %s for this process (%d device Mallocs, %d Frees)\n",
		units.Bytes(m.Allocated), units.Bytes(m.Reserved), units.Bytes(h.bytes[dev.pid]), m.DeviceAllocs, m.DeviceFrees)
	if n := m.Reserved; err == nil && n != 0 {
		err = fmt.Errorf("%d bytes still reserved after the release", n)
	}
	return errors.Join(err, lerr)
}

// open returns this process's device, wrapped in the ledger.
func (w worker) open() (*ledgerDevice, func() error, error) {
	l := ledger{path: w.ledger, capacity: w.capacity}
	n, err := sharedDevice(w.device)
	if err != nil {
		return nil, nil, err
	}
	if n.Kind == device.Sim {
		d, err := sim.New(sim.Options{Capacity: w.capacity})
		return &ledgerDevice{Device: d, l: l, pid: os.Getpid()}, func() error { return nil }, err
	}
	l.capacity = 0 // the driver enforces the GPU's
	d, err := cuda.Open(n.Ordinal)
	if err != nil {
		return nil, nil, err
	}
	return &ledgerDevice{Device: d, l: l, pid: os.Getpid()}, d.Close, nil
}

func (w worker) run(ctx context.Context, stdin io.Reader, out io.Writer) (err error) {
	dev, closeDev, err := w.open()
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, closeDev()) }()
	a, err := alloc.New(dev, alloc.Config{PerProcessMemoryFraction: w.fraction})
	if err != nil {
		return err
	}
	_, total, err := dev.MemInfo()
	if err != nil {
		return err
	}
	allowed := int64(w.fraction * float64(total))
	b := &blocks{a: a}
	defer func() {
		if rerr := b.release(out, dev); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}()
	fmt.Fprintf(out, "pid %d, fraction %g: %s allowed of %s\n", os.Getpid(), w.fraction, units.Bytes(allowed), units.Bytes(total))

	// A block is a sixteenth of what the fraction allows, in whole 2 MiB: each gets a
	// segment of its own.
	block := max(allowed/16/(2<<20)*(2<<20), 2<<20)
	for range 4 { // the model: a quarter of the allowance
		if err := b.alloc(block); err != nil {
			return err
		}
	}
	if w.role == "serve" {
		return w.serve(ctx, out, b, block, allowed)
	}
	return w.train(ctx, stdin, out, b, block)
}

// train runs steps that allocate activations and free them; it signals ready after the
// first, waits for the parent's go, and runs three more, or fails.
func (w worker) train(ctx context.Context, stdin io.Reader, out io.Writer, b *blocks, block int64) error {
	step := func(n int) error {
		for range n {
			if err := b.alloc(block); err != nil {
				return err
			}
		}
		return b.freeFrom(4)
	}
	if err := step(6); err != nil {
		return err
	}
	fmt.Fprintf(out, "step 1 done: %s reserved\nready\n", units.Bytes(demo.Read(b.a).Reserved))
	if err := waitForGo(ctx, stdin); err != nil {
		return err
	}
	if w.fail {
		// A step that needs more than the fraction allows: the allocator refuses it
		// without asking the device, and the worker gives up.
		if err := step(16); err != nil {
			return fmt.Errorf("step 2: %w", err)
		}
		return errors.New("step 2 fit: nothing failed")
	}
	for i := 2; i <= 4; i++ {
		if err := step(6); err != nil {
			return err
		}
	}
	fmt.Fprintln(out, "steps 2-4 done")
	return nil
}

// serve fills its cache up to the fraction's cap, then serves requests (a block
// allocated and freed every few milliseconds) until SIGTERM.
func (w worker) serve(ctx context.Context, out io.Writer, b *blocks, block, allowed int64) error {
	var oom *alloc.OOMError
	for {
		err := b.alloc(block)
		if errors.As(err, &oom) {
			break
		}
		if err != nil {
			return err
		}
	}
	reserved := demo.Read(b.a).Reserved
	by := "the fraction refused the next segment before the device was asked"
	if oom.Err != nil {
		by = "the device refused the next segment: " + demo.FirstLine(oom.Err)
	}
	fmt.Fprintf(out, "filled its cache: %s reserved of the %s its fraction allows; %s\n",
		units.Bytes(reserved), units.Bytes(oom.Allowed), by)
	if err := b.freeFrom(4); err != nil {
		return err
	}
	fmt.Fprintln(out, "ready")
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
		if err := b.alloc(block); err != nil {
			return err
		}
		if err := b.freeFrom(4); err != nil {
			return err
		}
	}
}

// waitForGo waits for a line on stdin, or for the context's end.
func waitForGo(ctx context.Context, stdin io.Reader) error {
	line := make(chan error, 1)
	go func() {
		_, err := bufio.NewReader(stdin).ReadString('\n')
		line <- err
	}()
	select {
	case err := <-line:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
