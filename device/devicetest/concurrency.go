package devicetest

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/device"
)

// concurrency: goroutines allocating, copying, checking and freeing at once, each on a
// stream and event of its own, leave the device as they found it.
func (s suite) concurrency(t *testing.T) {
	x := s.open(t)
	d := x.d
	const workers, rounds = 8, 40
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			if err := worker(d, x.c.KeepsData, w, rounds); err != nil {
				errs <- fmt.Errorf("worker %d: %w", w, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	x.expectUsed(0)
	if vm, ok := d.(device.VirtualMemory); ok {
		concurrentPieces(t, d, vm, x.c.KeepsData)
		x.expectUsed(0)
	}
}

// concurrentPieces: goroutines mapping, using and unmapping pieces of one reservation at
// once, each its own piece.
func concurrentPieces(t *testing.T, d device.Device, vm device.VirtualMemory, keepsData bool) {
	const workers, rounds = 4, 20
	g := vm.Granularity()
	r, err := vm.Reserve(workers * g)
	require.NoError(t, err)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			piece := r + device.Ptr(int64(w)*g)
			want := pattern(4096, byte(w))
			got := make([]byte, len(want))
			for i := range rounds {
				err := vm.Map(piece, g)
				if err == nil {
					err = d.CopyToDevice(piece+device.Ptr(g)-4096, want, 0)
				}
				if err == nil {
					err = d.CopyToHost(got, piece+device.Ptr(g)-4096, 0)
				}
				if err == nil && keepsData && !bytes.Equal(want, got) {
					err = fmt.Errorf("round %d: the piece's data came back different", i)
				}
				if err == nil {
					err = vm.Unmap(piece, g)
				}
				if err != nil {
					errs <- fmt.Errorf("piece %d: %w", w, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.NoError(t, vm.Unreserve(r, workers*g))
}

func worker(d device.Device, keepsData bool, w, rounds int) error {
	st, err := d.NewStream()
	if err != nil {
		return err
	}
	ev, err := d.NewEvent()
	if err != nil {
		return err
	}
	for i := range rounds {
		n := 512 + (w*131+i*977)%20000
		p, err := d.Malloc(int64(n))
		if err != nil {
			return err
		}
		want := pattern(n, byte(w*rounds+i))
		got := make([]byte, n)
		if err := d.CopyToDevice(p, want, st); err != nil {
			return err
		}
		if err := d.RecordEvent(ev, st); err != nil {
			return err
		}
		if err := d.SynchronizeEvent(ev); err != nil {
			return err
		}
		if err := d.CopyToHost(got, p, st); err != nil {
			return err
		}
		if keepsData && !bytes.Equal(want, got) {
			return fmt.Errorf("round %d: %d bytes at %#x came back different", i, n, uintptr(p))
		}
		if err := d.Free(p); err != nil {
			return err
		}
	}
	if err := d.DestroyEvent(ev); err != nil {
		return err
	}
	return d.DestroyStream(st)
}
