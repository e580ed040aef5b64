package pinned

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/internal/hostmem"
)

// mincore fills vec with the residency of b's pages (bit 0 of each byte).
func mincore(b, vec []byte) error {
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)), uintptr(unsafe.Pointer(unsafe.SliceData(vec))))
	if errno != 0 {
		return errno
	}
	return nil
}

// residentPages counts the pages of b (page-aligned) the system backs now.
func residentPages(t *testing.T, b []byte) int {
	t.Helper()
	vec := make([]byte, (int64(len(b))+hostmem.PageSize()-1)/hostmem.PageSize())
	require.NoError(t, mincore(b, vec))
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}

// By the time the device registers a block, every page of it is backed, whether one
// goroutine or several faulted them in.
func TestHostRegisterPrefaultsEveryPage(t *testing.T) {
	for _, threads := range []int{0, 1, 8} {
		f, a := newRegister(t, alloc.PinnedConfig{UseHostRegister: true, NumRegisterThreads: threads})
		var pages, resident []int
		f.onRegister = func(b []byte) {
			pages = append(pages, len(b)/int(hostmem.PageSize()))
			resident = append(resident, residentPages(t, b))
		}
		small := mustAlloc(t, a, 3*hostmem.PageSize()) // under a page per goroutine
		large := mustAlloc(t, a, 3<<20+1)              // rounded to 4 MiB
		assert.Equal(t, pages, resident, "%d threads", threads)
		assert.Equal(t, []int{4, 1024 * 1024 * 4 / int(hostmem.PageSize())}, pages)
		require.NoError(t, a.Free(small))
		require.NoError(t, a.Free(large))
		requireEmpty(t, a)
	}
}

// A failed registration unmaps the memory it had mapped.
func TestHostRegisterFailureUnmaps(t *testing.T) {
	f, a := newRegister(t, alloc.PinnedConfig{UseHostRegister: true})
	f.regErr = errBroken
	_, err := a.Alloc(1 << 16)
	require.ErrorIs(t, err, errBroken)
	require.Len(t, f.tried, 1<<16)
	assert.ErrorIs(t, mincore(f.tried, make([]byte, 16)), unix.ENOMEM, "unmapped")
	f.regErr = nil
	requireEmpty(t, a)
}
