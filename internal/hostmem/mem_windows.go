package hostmem

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/windows"
)

func mapMemory(n int64, access bool) ([]byte, error) {
	kind, prot := uint32(windows.MEM_RESERVE), uint32(windows.PAGE_NOACCESS)
	if access {
		kind, prot = windows.MEM_RESERVE|windows.MEM_COMMIT, windows.PAGE_READWRITE
	}
	addr, err := windows.VirtualAlloc(0, uintptr(n), kind, prot)
	if err != nil {
		return nil, fmt.Errorf("hostmem: VirtualAlloc of %d bytes: %w", n, err)
	}
	// VirtualAlloc hands back memory outside the Go heap as an integer; reading it
	// through *unsafe.Pointer is the one conversion Windows leaves us.
	p := *(*unsafe.Pointer)(unsafe.Pointer(&addr))
	return unsafe.Slice((*byte)(p), n), nil
}

func unmap(b []byte) error {
	return windows.VirtualFree(uintptr(unsafe.Pointer(unsafe.SliceData(b))), 0, windows.MEM_RELEASE)
}

func commit(b []byte) error {
	_, err := windows.VirtualAlloc(uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)), windows.MEM_COMMIT, windows.PAGE_READWRITE)
	if err != nil {
		return fmt.Errorf("hostmem.Commit: VirtualAlloc of %d bytes: %w", len(b), err)
	}
	return nil
}

func decommit(b []byte) error {
	if err := windows.VirtualFree(uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)), windows.MEM_DECOMMIT); err != nil {
		return fmt.Errorf("hostmem.Decommit: VirtualFree of %d bytes: %w", len(b), err)
	}
	return nil
}
