//go:build unix

package hostmem

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

func mapMemory(n int64, access bool) ([]byte, error) {
	prot := unix.PROT_NONE
	if access {
		prot = unix.PROT_READ | unix.PROT_WRITE
	}
	p, err := unix.MmapPtr(-1, 0, nil, uintptr(n), prot, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return nil, fmt.Errorf("hostmem: mmap of %d bytes: %w", n, err)
	}
	return unsafe.Slice((*byte)(p), n), nil
}

func unmap(b []byte) error {
	return unix.MunmapPtr(unsafe.Pointer(unsafe.SliceData(b)), uintptr(len(b)))
}

func commit(b []byte) error {
	if err := unix.Mprotect(b, unix.PROT_READ|unix.PROT_WRITE); err != nil {
		return fmt.Errorf("hostmem.Commit: mprotect of %d bytes: %w", len(b), err)
	}
	return nil
}
