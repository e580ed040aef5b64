//go:build linux && (amd64 || arm64)

package cuda

import (
	"fmt"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// Benchmarks of the driver paths the allocator and the kernels use, and of the options
// for keeping the context current (see Device.call). Run on the GPU machine:
//
//	./cuda.test -test.run '^$' -test.bench . -test.benchtime 200ms

func BenchmarkMallocFree(b *testing.B) {
	d := openTest(b)
	for _, size := range []int64{512, 1 << 20, 20 << 20, 1 << 30} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			for b.Loop() {
				p, err := d.Malloc(size)
				if err != nil {
					b.Fatal(err)
				}
				if err := d.Free(p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkMapUnmap(b *testing.B) {
	d := openTest(b)
	if !d.Properties().VirtualMemory {
		b.Skip("no VMM support")
	}
	g := d.Granularity()
	for _, size := range []int64{g, 10 * g} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			base, err := d.Reserve(size)
			require.NoError(b, err)
			for b.Loop() {
				if err := d.Map(base, size); err != nil {
					b.Fatal(err)
				}
				if err := d.Unmap(base, size); err != nil {
					b.Fatal(err)
				}
			}
			require.NoError(b, d.Unreserve(base, size))
		})
	}
}

func BenchmarkEventRecordQuery(b *testing.B) {
	d := openTest(b)
	e, err := d.NewEvent()
	require.NoError(b, err)
	s := newStream(b, d)
	for b.Loop() {
		if err := d.RecordEvent(e, s); err != nil {
			b.Fatal(err)
		}
		if _, err := d.QueryEvent(e); err != nil {
			b.Fatal(err)
		}
	}
	require.NoError(b, d.DestroyEvent(e))
}

// BenchmarkEventRecordQueryParallel is the same from GOMAXPROCS goroutines, each with
// its own stream and event.
func BenchmarkEventRecordQueryParallel(b *testing.B) {
	d := openTest(b)
	var mu sync.Mutex
	b.RunParallel(func(pb *testing.PB) {
		mu.Lock()
		s, err := d.NewStream()
		require.NoError(b, err)
		e, err := d.NewEvent()
		require.NoError(b, err)
		mu.Unlock()
		for pb.Next() {
			if err := d.RecordEvent(e, s); err != nil {
				b.Fatal(err)
			}
			if _, err := d.QueryEvent(e); err != nil {
				b.Fatal(err)
			}
		}
		require.NoError(b, d.DestroyEvent(e))
		require.NoError(b, d.DestroyStream(s))
	})
}

func BenchmarkLaunch(b *testing.B) {
	d := openTest(b)
	k := kernels(b, d)
	p := malloc(b, d, 1024)
	s := newStream(b, d)
	cfg := LaunchConfig{Grid: Dim3{X: 1}, Block: Dim3{X: 256}, Stream: s}
	for b.Loop() {
		if err := d.Launch(k.fill, cfg, ArgPtr(p), ArgUint32(1), ArgUint64(256)); err != nil {
			b.Fatal(err)
		}
	}
	require.NoError(b, d.SynchronizeStream(s))
}

func BenchmarkCopyToDeviceAsyncPinned4KiB(b *testing.B) {
	d := openTest(b)
	h, err := d.HostAlloc(4096)
	require.NoError(b, err)
	p := malloc(b, d, 4096)
	s := newStream(b, d)
	for b.Loop() {
		if err := d.CopyToDeviceAsync(p, h, s); err != nil {
			b.Fatal(err)
		}
	}
	require.NoError(b, d.SynchronizeStream(s))
	require.NoError(b, d.HostFree(h))
}

// BenchmarkSyscall is one foreign call through purego.SyscallN with a pre-resolved
// symbol and no context work: cuDriverGetVersion.
func BenchmarkSyscall(b *testing.B) {
	d := openTest(b)
	var v int32
	for b.Loop() {
		syscallN(d.drv.cuDriverGetVersion, uintptr(unsafe.Pointer(&v)))
	}
}

// BenchmarkCall is the same call through Device.call, which adds LockOSThread and
// cuCtxSetCurrent: the per-call cost of the chosen context policy.
func BenchmarkCall(b *testing.B) {
	d := openTest(b)
	var v int32
	for b.Loop() {
		d.call(d.drv.cuDriverGetVersion, uintptr(unsafe.Pointer(&v)))
	}
}

// BenchmarkContextSwitch compares the primitives of the two context policies: setting
// the context on every call, against identifying the thread (gettid) and looking it up
// in a cache, which a per-thread policy would pay on every call instead.
func BenchmarkContextSwitch(b *testing.B) {
	d := openTest(b)
	b.Run("SetCurrent", func(b *testing.B) {
		for b.Loop() {
			d.enter()
			d.exit()
		}
	})
	b.Run("GetCurrent", func(b *testing.B) {
		var cur uintptr
		for b.Loop() {
			runtime.LockOSThread()
			syscallN(d.drv.cuCtxGetCurrent, uintptr(unsafe.Pointer(&cur)))
			runtime.UnlockOSThread()
		}
	})
	b.Run("GettidCache", func(b *testing.B) {
		var cache sync.Map
		for b.Loop() {
			runtime.LockOSThread()
			tid := syscall.Gettid()
			if _, ok := cache.Load(tid); !ok {
				cache.Store(tid, d.ctx)
			}
			runtime.UnlockOSThread()
		}
	})
}
