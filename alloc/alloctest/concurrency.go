package alloctest

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
)

// concurrency runs many goroutines on one allocator at once, with GOMAXPROCS raised so
// that they move between OS threads (on a GPU, a context left to chance would fail).
// Each keeps a few live blocks on its stream (stream 0 or its own), writes its id into
// each block on the device and checks it is still there before freeing it, so two live
// blocks that overlap are caught; some blocks are used by stream 0 too (RecordStream);
// one goroutine empties the cache now and then.
func (s suite) concurrency(t *testing.T) {
	x := s.open(t, alloc.Config{})
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(8, runtime.NumCPU())))
	const workers, rounds = 16, 150
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- x.worker(w, rounds)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	st := x.a.Stats()
	require.Equal(t, int64(workers*rounds), st.Allocation[alloc.StatAll].Allocated)
	require.Zero(t, cur(st.Allocation))
	require.Zero(t, st.NumOOMs)
}

// worker is one goroutine of concurrency. It returns the first error it meets, having
// freed what it holds.
func (x *session) worker(id, rounds int) (err error) {
	a, d := x.a, x.Dev
	stream := device.Stream(0)
	if id%2 == 1 {
		if stream, err = d.NewStream(); err != nil {
			return err
		}
		defer func() {
			if e := d.DestroyStream(stream); err == nil {
				err = e
			}
		}()
	}
	type slot struct {
		p    device.Ptr
		size int64
	}
	var slots [6]slot
	defer func() {
		for _, sl := range slots {
			if sl.p != 0 {
				if e := a.Free(sl.p); err == nil {
					err = e
				}
			}
		}
	}()
	rng := uint64(id)*0x9e3779b97f4a7c15 + 1
	for r := range rounds {
		rng = rng*6364136223846793005 + 1442695040888963407
		sl := &slots[(rng>>33)%uint64(len(slots))]
		if sl.p != 0 {
			if err := x.checkTag(sl.p, id, stream); err != nil {
				return err
			}
			if err := a.Free(sl.p); err != nil {
				return err
			}
			sl.p = 0
		}
		// Mostly small-pool sizes, every eighth request a large one.
		size := int64(512 * (1 + (rng>>17)%1024))
		if r%8 == 0 {
			size = mib * int64(2+(rng>>40)%4)
		}
		p, err := a.Alloc(size, stream)
		if err != nil {
			return fmt.Errorf("worker %d round %d: %w", id, r, err)
		}
		*sl = slot{p, size}
		if err := d.Memset(p, byte(id), size, stream); err != nil {
			return fmt.Errorf("worker %d: Memset(%#x, %d bytes): %w", id, uintptr(p), size, err)
		}
		if stream != 0 && r%5 == 0 {
			if err := a.RecordStream(p, 0); err != nil {
				return err
			}
		}
		if id == 0 && r%25 == 24 {
			if err := a.EmptyCache(); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkTag checks that the first 8 bytes of the block at p still hold the worker's id,
// where the device keeps data.
func (x *session) checkTag(p device.Ptr, id int, s device.Stream) error {
	if !x.KeepsData {
		return nil
	}
	var b [8]byte
	if err := x.Dev.CopyToHost(b[:], p, s); err != nil {
		return fmt.Errorf("worker %d: CopyToHost(%#x): %w", id, uintptr(p), err)
	}
	want := uint64(byte(id)) * 0x0101010101010101
	if got := binary.LittleEndian.Uint64(b[:]); got != want {
		return fmt.Errorf("worker %d: block %#x holds %#x, want %#x: another live block overlaps it", id, uintptr(p), got, want)
	}
	return nil
}
