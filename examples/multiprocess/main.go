//go:build unix

package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/cuda"
	"github.com/subletml/sublet/device/named"
	"github.com/subletml/sublet/examples/internal/demo"
	"github.com/subletml/sublet/internal/units"
)

func main() {
	if os.Getenv(workerEnv) != "" {
		os.Exit(workerMain(os.Args[1:], os.Stdin, os.Stdout))
	}
	os.Exit(demo.Status("multiprocess", run(os.Args[1:], os.Stdout), os.Stderr))
}

// config is what the flags set.
type config struct {
	device       string
	capacity     int64
	train, serve float64
}

func parseFlags(args []string, out io.Writer) (config, error) {
	var c config
	fs := demo.Flags("multiprocess", out)
	fs.StringVar(&c.device, "device", "sim", "sim (a simulated GPU the processes share through a ledger file), cuda or cuda:N")
	capacity := fs.String("capacity", "1GiB", "sim: the shared device's memory (bytes, or with KiB, MiB, GiB...)")
	fs.Float64Var(&c.train, "train", 0.4, "the train worker's memory fraction")
	fs.Float64Var(&c.serve, "serve", 0.4, "the serve worker's memory fraction")
	if err := demo.Parse(fs, args); err != nil {
		return c, err
	}
	var err error
	if c.capacity, err = units.ParseBytes("-capacity", *capacity); err != nil {
		return c, err
	}
	if !(c.train > 0 && c.serve > 0 && c.train+c.serve <= 1) {
		return c, fmt.Errorf("-train %g -serve %g: want two fractions above 0 whose sum is at most 1, so that both fit at once", c.train, c.serve)
	}
	n, err := sharedDevice(c.device)
	if err != nil {
		return c, err
	}
	c.device = n.String()
	return c, nil
}

// sharedDevice reads a -device name (device/named's): the processes share sim (through
// the ledger) or a GPU, nothing else.
func sharedDevice(name string) (named.Name, error) {
	n, err := named.Parse(name)
	if err != nil {
		return n, fmt.Errorf("-device: %w", err)
	}
	if n.Kind == device.CPU || n.Backed {
		return n, fmt.Errorf("-device %s: want sim (a simulated device shared through a ledger file), cuda or cuda:N", n)
	}
	return n, nil
}

// parent is the program that starts the workers and watches the device.
type parent struct {
	c   config
	out io.Writer
	// mu serializes the lines of the workers and the parent on out.
	mu     sync.Mutex
	exe    string
	ledger ledger
	// gpu is the parent's own handle on the GPU (cuda only), for the driver's MemInfo.
	gpu *cuda.Device
}

func (p *parent) printf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.out, format, args...)
}

func run(args []string, out io.Writer) error {
	c, err := parseFlags(args, out)
	if err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "sublet-multiprocess-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p := &parent{c: c, out: out, exe: exe, ledger: ledger{path: filepath.Join(dir, "ledger")}}
	n, err := sharedDevice(c.device)
	if err != nil {
		return err
	}
	if n.Kind == device.Sim {
		p.ledger.capacity = c.capacity
		p.printf("sublet examples/multiprocess: two worker processes on a simulated device of %s shared through a ledger file\n", units.Bytes(c.capacity))
	} else {
		if p.gpu, err = cuda.Open(n.Ordinal); err != nil {
			return fmt.Errorf("%s: %w (-device sim runs without a GPU)", c.device, err)
		}
		defer p.gpu.Close()
		p.printf("sublet examples/multiprocess: two worker processes on %s (the driver's memory, this process's context made)\n", c.device)
	}
	before, total, err := p.memInfo()
	if err != nil {
		return err
	}
	p.printf("before: %s free of %s\n", units.Bytes(before), units.Bytes(total))
	for _, r := range []round{
		{"round 1: train exits normally, serve is sent SIGTERM", false, syscall.SIGTERM},
		{"round 2: train fails with an error, serve is sent SIGKILL", true, syscall.SIGKILL},
	} {
		if err := p.round(r); err != nil {
			return err
		}
		after, _, err := p.memInfo()
		if err != nil {
			return err
		}
		if after != before {
			return fmt.Errorf("after: %s free, %s before: %s left on the device", units.Bytes(after), units.Bytes(before), units.Bytes(before-after))
		}
		p.printf("after: %s free of %s, as before: nothing left on the device\n", units.Bytes(after), units.Bytes(total))
	}
	return nil
}

// memInfo is the device's free and total memory: the driver's on a GPU, the ledger's on
// sim.
func (p *parent) memInfo() (free, total int64, err error) {
	if p.gpu != nil {
		return p.gpu.MemInfo()
	}
	h, err := p.ledger.read()
	return p.ledger.capacity - h.total(), p.ledger.capacity, err
}

// round is one run of the two workers.
type round struct {
	title string
	// fail makes train fail; stop is the signal serve is sent.
	fail bool
	stop syscall.Signal
}

// proc is a running worker.
type proc struct {
	role  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	// ready is closed when the worker says ready; done when its output ends.
	ready, done chan struct{}
}

func (p *parent) start(role string, fraction float64, fail bool) (*proc, error) {
	args := []string{"-role", role, "-fraction", fmt.Sprint(fraction), "-device", p.c.device, "-ledger", p.ledger.path, "-capacity", fmt.Sprint(p.ledger.capacity)}
	if fail {
		args = append(args, "-fail")
	}
	cmd := exec.Command(p.exe, args...)
	cmd.Env = append(os.Environ(), workerEnv+"=1")
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = w, w
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, errors.Join(err, r.Close(), w.Close())
	}
	if err := cmd.Start(); err != nil {
		return nil, errors.Join(err, r.Close(), w.Close())
	}
	w.Close() // the worker holds the write end now
	pr := &proc{role: role, cmd: cmd, stdin: stdin, ready: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(pr.done)
		defer r.Close()
		sc := bufio.NewScanner(r)
		said := false
		for sc.Scan() {
			p.printf("  [%s %d] %s\n", role, cmd.Process.Pid, sc.Text())
			if sc.Text() == "ready" && !said {
				close(pr.ready)
				said = true
			}
		}
	}()
	return pr, nil
}

// awaitReady waits until the worker says ready; a worker that ends first, or takes more
// than a minute, is an error.
func (pr *proc) awaitReady() error {
	select {
	case <-pr.ready:
		return nil
	case <-pr.done:
		return fmt.Errorf("%s ended before it was ready: %v", pr.role, pr.cmd.Wait())
	case <-time.After(time.Minute):
		return fmt.Errorf("%s was not ready after a minute", pr.role)
	}
}

// wait waits for the worker's end and describes its status.
func (pr *proc) wait() string {
	<-pr.done
	err := pr.cmd.Wait()
	st := pr.cmd.ProcessState
	ws, _ := st.Sys().(syscall.WaitStatus)
	switch {
	case ws.Signaled():
		return fmt.Sprintf("killed by signal %d (%v): no handler runs", int(ws.Signal()), ws.Signal())
	case st.ExitCode() == exitSIGTERM:
		return fmt.Sprintf("exit status %d: stopped by SIGTERM after its release", st.ExitCode())
	case err != nil && st.ExitCode() < 0:
		return err.Error()
	}
	return fmt.Sprintf("exit status %d", st.ExitCode())
}

func (p *parent) round(r round) (err error) {
	p.printf("\n%s\n", r.title)
	train, err := p.start("train", p.c.train, r.fail)
	if err != nil {
		return err
	}
	serve, err := p.start("serve", p.c.serve, false)
	if err != nil {
		return errors.Join(err, train.cmd.Process.Kill())
	}
	// On any failure below, no worker is left running.
	defer func() {
		if err != nil {
			for _, pr := range []*proc{train, serve} {
				if pr.cmd.ProcessState == nil {
					pr.cmd.Process.Kill()
					<-pr.done
					pr.cmd.Wait()
				}
			}
		}
	}()
	if err := errors.Join(train.awaitReady(), serve.awaitReady()); err != nil {
		return err
	}
	free, total, err := p.memInfo()
	if err != nil {
		return err
	}
	h, err := p.ledger.read()
	if err != nil {
		return err
	}
	p.printf("during: %s free of %s; train holds %s (its fraction allows %s), serve %s (allows %s)\n", units.Bytes(free), units.Bytes(total),
		units.Bytes(h.bytes[train.cmd.Process.Pid]), units.Bytes(int64(p.c.train*float64(total))),
		units.Bytes(h.bytes[serve.cmd.Process.Pid]), units.Bytes(int64(p.c.serve*float64(total))))

	if _, err := io.WriteString(train.stdin, "go\n"); err != nil {
		return err
	}
	p.printf("train: %s\n", train.wait())
	if err := serve.cmd.Process.Signal(r.stop); err != nil {
		return err
	}
	p.printf("serve: %s\n", serve.wait())

	h, err = p.ledger.read()
	if err != nil {
		return err
	}
	for _, pr := range []*proc{train, serve} {
		pid := pr.cmd.Process.Pid
		left := h.bytes[pid]
		if left == 0 {
			continue
		}
		if r.stop != syscall.SIGKILL || pr != serve {
			return fmt.Errorf("%s (pid %d) left %s on the device", pr.role, pid, units.Bytes(left))
		}
		n, err := p.ledger.reclaim(pid)
		if err != nil {
			return err
		}
		how := "the driver frees a dead process's memory: the parent does it in the ledger, as the driver would"
		if p.gpu != nil {
			how = "the driver freed it when the process died"
		}
		p.printf("serve released nothing itself: it left %s in the ledger; %s (%s)\n", units.Bytes(left), how, units.Bytes(n))
	}
	return nil
}
