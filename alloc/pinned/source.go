package pinned

import (
	"errors"
	"fmt"
	"sync"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/internal/hostmem"
)

// source is where blocks come from.
type source interface {
	alloc(size int64) ([]byte, error)
	free(b []byte) error
}

// pinnedSource is the device's page-locked host memory.
type pinnedSource struct{ dev device.PinnedHost }

func (s pinnedSource) alloc(size int64) ([]byte, error) { return s.dev.HostAlloc(size) }
func (s pinnedSource) free(b []byte) error              { return s.dev.HostFree(b) }

// registerSource is anonymous mmap page-locked in place by the device
// (pinned_use_cuda_host_register). As in PyTorch, the pages are faulted in first, by
// threads goroutines, so that the registration does not fault them one by one itself.
type registerSource struct {
	dev     device.HostRegisterer
	threads int
}

func (s registerSource) alloc(size int64) ([]byte, error) {
	b, err := mmapSource{}.alloc(size)
	if err != nil {
		return nil, err
	}
	prefault(b, s.threads)
	if err := s.dev.HostRegister(b); err != nil {
		return nil, errors.Join(err, hostmem.Free(b))
	}
	return b, nil
}

func (s registerSource) free(b []byte) error {
	if err := s.dev.HostUnregister(b); err != nil {
		return err
	}
	if err := hostmem.Free(b); err != nil {
		// The caller keeps the block cached: keep it page-locked too.
		return errors.Join(err, s.dev.HostRegister(b))
	}
	return nil
}

// prefault writes a zero to the first byte of every page of b (page-aligned memory)
// from the goroutines of prefaultChunks, so that the system backs each page now.
func prefault(b []byte, threads int) {
	page := hostmem.PageSize()
	touch := func(c [2]int64) {
		for p := hostmem.RoundUp(c[0], page); p < c[1]; p += page {
			b[p] = 0
		}
	}
	chunks := prefaultChunks(int64(len(b)), page, threads)
	if len(chunks) == 1 {
		touch(chunks[0])
		return
	}
	var wg sync.WaitGroup
	for _, c := range chunks {
		wg.Go(func() { touch(c) })
	}
	wg.Wait()
}

// prefaultChunks splits n bytes into the ranges [lo, hi) that prefault's goroutines
// touch, as PyTorch's mapPagesForRegister does: threads equal ranges, the last taking
// the remainder, or one range when threads is 1 or n is under a page per thread. A
// range holds the pages that start in it.
func prefaultChunks(n, page int64, threads int) [][2]int64 {
	t := int64(threads)
	if t <= 1 || n < page*t {
		return [][2]int64{{0, n}}
	}
	chunks := make([][2]int64, t)
	for i := range t {
		chunks[i] = [2]int64{n * i / t, n * (i + 1) / t}
	}
	return chunks
}

// mmapSource is ordinary anonymous memory, rounded up to whole pages, for devices
// without pinned memory. A failed mmap counts as a lack of memory.
type mmapSource struct{}

func (mmapSource) alloc(size int64) ([]byte, error) {
	b, err := hostmem.Alloc(size)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", device.ErrOutOfMemory, err)
	}
	return b, nil
}

func (mmapSource) free(b []byte) error { return hostmem.Free(b) }
