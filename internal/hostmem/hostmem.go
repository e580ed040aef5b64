// Package hostmem maps host memory outside the Go heap, so that giving it back really
// returns it to the operating system, and keeps the table that resolves device addresses
// to that memory for the host-memory devices (device/cpu, device/sim with a backing
// store).
//
// Invariants:
//   - Every slice returned by Alloc or Reserve covers one whole mapping made by this
//     package: its length is the requested size rounded up to PageSize and it starts on a
//     page boundary. Free and Release take exactly such a slice back.
//   - Memory from Alloc is readable, writable and zeroed. A reservation from Reserve is
//     address space only: touching it faults until Commit makes a page range of it
//     readable and writable; Decommit hands the pages back to the OS and makes the range
//     inaccessible again; a later Commit of the range reads as zeros.
//   - Bases stay []byte (never a uintptr turned back into a pointer), so `go vet` stays
//     clean; the Go garbage collector ignores these slices' memory.
package hostmem

import (
	"fmt"
	"math"
	"os"
	"unsafe"
)

// pageSize is the OS page size: the unit of Alloc, Reserve, Commit and Decommit.
var pageSize = int64(os.Getpagesize())

// PageSize returns the OS page size in bytes.
func PageSize() int64 { return pageSize }

// RoundUp rounds n up to a multiple of align (a power of two).
func RoundUp(n, align int64) int64 { return (n + align - 1) &^ (align - 1) }

// Alloc maps size bytes (rounded up to whole pages) of zeroed, readable and writable
// memory.
func Alloc(size int64) ([]byte, error) {
	n, err := pages("hostmem.Alloc", size)
	if err != nil {
		return nil, err
	}
	return mapMemory(n, true)
}

// Free unmaps a slice returned by Alloc.
func Free(b []byte) error { return unmapMemory("hostmem.Free", b) }

// Reserve maps size bytes (rounded up to whole pages) of inaccessible address space with
// nothing committed behind it.
func Reserve(size int64) ([]byte, error) {
	n, err := pages("hostmem.Reserve", size)
	if err != nil {
		return nil, err
	}
	return mapMemory(n, false)
}

// Release unmaps a slice returned by Reserve, committed pages included.
func Release(b []byte) error { return unmapMemory("hostmem.Release", b) }

// Commit makes b, a page-aligned range of whole pages inside a reservation, readable and
// writable.
func Commit(b []byte) error {
	if err := checkPages("hostmem.Commit", b); err != nil {
		return err
	}
	return commit(b)
}

// Decommit returns the pages of b, a page-aligned range of whole pages inside a
// reservation, to the OS and makes the range inaccessible.
func Decommit(b []byte) error {
	if err := checkPages("hostmem.Decommit", b); err != nil {
		return err
	}
	return decommit(b)
}

func pages(op string, size int64) (int64, error) {
	if size <= 0 {
		return 0, fmt.Errorf("%s: size %d must be positive", op, size)
	}
	// The mapping becomes a slice, so its rounded length must be an int: on a 32-bit
	// platform sizes from 2 GiB on cannot be mapped at all.
	if size > 1<<62 || size > math.MaxInt-pageSize {
		return 0, fmt.Errorf("%s: size %d is beyond the address space", op, size)
	}
	return RoundUp(size, pageSize), nil
}

func checkPages(op string, b []byte) error {
	if len(b) == 0 {
		return fmt.Errorf("%s: empty range", op)
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	if int64(base)%pageSize != 0 || int64(len(b))%pageSize != 0 {
		return fmt.Errorf("%s: range [%#x, +%d) is not whole pages of %d bytes", op, base, len(b), pageSize)
	}
	return nil
}

func unmapMemory(op string, b []byte) error {
	if err := checkPages(op, b); err != nil {
		return err
	}
	if err := unmap(b); err != nil {
		return fmt.Errorf("%s: unmapping [%#x, +%d): %w", op, uintptr(unsafe.Pointer(unsafe.SliceData(b))), len(b), err)
	}
	return nil
}
