//go:build unix

package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/subletml/sublet/device"
)

// ledger is the driver's view of one device shared by several processes: a file in which
// every process's device wraps its Malloc and Free, one line each ("PID + PTR SIZE",
// "PID - PTR"), under an exclusive lock (flock) held across the check and the write.
// Reading it gives the bytes each process holds, as a driver knows them.
//
// A simulated device lives in one process, so two processes cannot share one; with a
// capacity the ledger is what they share: a Malloc that would take the bytes of all
// processes past it fails with device.ErrOutOfMemory, and MemInfo reports the capacity
// less everyone's bytes, as cuMemGetInfo does on a GPU. On a GPU (capacity 0) the driver
// enforces the capacity and the ledger only records.
type ledger struct {
	path     string
	capacity int64
}

// holdings maps each process's id to the bytes it holds; ptrs to its live pointers.
type holdings struct {
	bytes map[int]int64
	ptrs  map[int]map[uint64]int64
}

func (h holdings) total() int64 {
	var n int64
	for _, b := range h.bytes {
		n += b
	}
	return n
}

// pids lists the processes that hold memory, in increasing order.
func (h holdings) pids() []int {
	var ps []int
	for p, b := range h.bytes {
		if b > 0 {
			ps = append(ps, p)
		}
	}
	sort.Ints(ps)
	return ps
}

// update runs f on the ledger's holdings with the file locked; f's lines are appended
// before the lock is released.
func (l ledger) update(f func(h holdings) ([]string, error)) error {
	file, err := os.OpenFile(l.path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	defer file.Close()
	if err := syscall.Flock(int(file.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("ledger %s: lock: %w", l.path, err)
	}
	defer syscall.Flock(int(file.Fd()), syscall.LOCK_UN)
	h, err := parseLedger(file)
	if err != nil {
		return fmt.Errorf("ledger %s: %w", l.path, err)
	}
	lines, err := f(h)
	if len(lines) > 0 {
		if _, werr := file.WriteString(strings.Join(lines, "")); werr != nil {
			return errors.Join(err, fmt.Errorf("ledger %s: %w", l.path, werr))
		}
	}
	return err
}

// read returns the holdings.
func (l ledger) read() (holdings, error) {
	var out holdings
	err := l.update(func(h holdings) ([]string, error) { out = h; return nil, nil })
	return out, err
}

func parseLedger(r io.Reader) (holdings, error) {
	h := holdings{bytes: map[int]int64{}, ptrs: map[int]map[uint64]int64{}}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		bad := fmt.Errorf("line %d: %q: want \"PID + PTR SIZE\" or \"PID - PTR\"", n, sc.Text())
		if len(f) < 3 {
			return h, bad
		}
		pid, err1 := strconv.Atoi(f[0])
		ptr, err2 := strconv.ParseUint(f[2], 0, 64)
		if err1 != nil || err2 != nil {
			return h, bad
		}
		if h.ptrs[pid] == nil {
			h.ptrs[pid] = map[uint64]int64{}
		}
		switch {
		case f[1] == "+" && len(f) == 4:
			size, err := strconv.ParseInt(f[3], 10, 64)
			if err != nil || size <= 0 {
				return h, bad
			}
			h.ptrs[pid][ptr] = size
			h.bytes[pid] += size
		case f[1] == "-" && len(f) == 3:
			size, ok := h.ptrs[pid][ptr]
			if !ok {
				return h, fmt.Errorf("line %d: process %d frees %#x, which it does not hold", n, pid, ptr)
			}
			delete(h.ptrs[pid], ptr)
			h.bytes[pid] -= size
		default:
			return h, bad
		}
	}
	return h, sc.Err()
}

// reclaim frees what process pid still holds, as the driver does when a process dies.
// It returns the bytes reclaimed.
func (l ledger) reclaim(pid int) (int64, error) {
	var n int64
	err := l.update(func(h holdings) ([]string, error) {
		var lines []string
		for ptr, size := range h.ptrs[pid] {
			lines = append(lines, fmt.Sprintf("%d - %#x\n", pid, ptr))
			n += size
		}
		return lines, nil
	})
	return n, err
}

// ledgerDevice is this process's device with its Malloc and Free written to the ledger.
type ledgerDevice struct {
	device.Device
	l   ledger
	pid int
}

func (d *ledgerDevice) Malloc(size int64) (device.Ptr, error) {
	var p device.Ptr
	err := d.l.update(func(h holdings) ([]string, error) {
		if d.l.capacity > 0 && h.total()+size > d.l.capacity {
			return nil, fmt.Errorf("Malloc(%d): the processes sharing the device hold %d of its %d bytes: %w", size, h.total(), d.l.capacity, device.ErrOutOfMemory)
		}
		var err error
		if p, err = d.Device.Malloc(size); err != nil {
			return nil, err
		}
		return []string{fmt.Sprintf("%d + %#x %d\n", d.pid, uint64(p), size)}, nil
	})
	return p, err
}

func (d *ledgerDevice) Free(p device.Ptr) error {
	return d.l.update(func(holdings) ([]string, error) {
		if err := d.Device.Free(p); err != nil {
			return nil, err
		}
		return []string{fmt.Sprintf("%d - %#x\n", d.pid, uint64(p))}, nil
	})
}

// MemInfo is the shared capacity less everyone's bytes, or the driver's on a GPU.
func (d *ledgerDevice) MemInfo() (free, total int64, err error) {
	if d.l.capacity == 0 {
		return d.Device.MemInfo()
	}
	h, err := d.l.read()
	if err != nil {
		return 0, 0, err
	}
	return d.l.capacity - h.total(), d.l.capacity, nil
}
