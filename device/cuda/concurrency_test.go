package cuda

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/device"
)

// TestManyGoroutines runs 64 goroutines that allocate, copy, launch, record events and
// free on one Device at once, yielding between calls so that the scheduler moves them
// between OS threads; a context left to chance would fail with
// CUDA_ERROR_INVALID_CONTEXT.
func TestManyGoroutines(t *testing.T) {
	d := openTest(t)
	kernels(t, d)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(8, runtime.NumCPU())))
	const workers, rounds, words = 64, 8, 4096
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- worker(d, uint32(w), rounds, words)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err)
	}
}

func worker(d *Device, id uint32, rounds, words int) (err error) {
	s := device.Stream(0)
	if id%2 == 1 {
		if s, err = d.NewStream(); err != nil {
			return err
		}
		defer func() {
			if e := d.DestroyStream(s); err == nil {
				err = e
			}
		}()
	}
	e, err := d.NewEvent()
	if err != nil {
		return err
	}
	defer func() {
		if e2 := d.DestroyEvent(e); err == nil {
			err = e2
		}
	}()
	host := make([]byte, 4*words)
	for r := range rounds {
		p, err := d.Malloc(int64(4 * words))
		if err != nil {
			return err
		}
		runtime.Gosched()
		value := id<<16 | uint32(r)
		for i := range words {
			binary.LittleEndian.PutUint32(host[4*i:], ^value)
		}
		steps := []func() error{
			func() error { return d.CopyToDevice(p, host, s) },
			func() error {
				cfg := LaunchConfig{Grid: Dim3{X: uint32(words / 256)}, Block: Dim3{X: 256}, Stream: s}
				return d.Launch(testGPU.kernels.fill, cfg, ArgPtr(p), ArgUint32(value), ArgUint64(uint64(words/2)))
			},
			func() error { return d.RecordEvent(e, s) },
			func() error { _, err := d.QueryEvent(e); return err },
			func() error { return d.SynchronizeEvent(e) },
			func() error { return d.CopyToHost(host, p, s) },
		}
		for _, step := range steps {
			if err := step(); err != nil {
				return err
			}
			runtime.Gosched()
		}
		if err := d.Free(p); err != nil {
			return err
		}
		for i := range words {
			want := value
			if i >= words/2 {
				want = ^value
			}
			if got := binary.LittleEndian.Uint32(host[4*i:]); got != want {
				return fmt.Errorf("worker %d round %d: word %d = %#x, want %#x", id, r, i, got, want)
			}
		}
	}
	return nil
}

// TestManyGoroutinesVirtualMemory maps and unmaps pages of one reservation from many
// goroutines at once.
func TestManyGoroutinesVirtualMemory(t *testing.T) {
	d := openTest(t)
	if !d.Properties().VirtualMemory {
		t.Skipf("%s has no VMM support", d.Name())
	}
	g := d.Granularity()
	const workers = 32
	base, err := d.Reserve(workers * g)
	require.NoError(t, err)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			addr := base + device.Ptr(int64(w)*g)
			for range 4 {
				if err := d.Map(addr, g); err != nil {
					errs <- err
					return
				}
				runtime.Gosched()
				if err := d.Memset(addr, byte(w), g, 0); err != nil {
					errs <- err
					return
				}
				if err := d.SynchronizeStream(0); err != nil {
					errs <- err
					return
				}
				if err := d.Unmap(addr, g); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err)
	}
	require.NoError(t, d.Unreserve(base, workers*g))
}
