package cuda

import (
	"encoding/binary"
	"math"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/devicetest"
)

// Tests that need no GPU: error text, struct layouts, argument encoding.

func TestErrorText(t *testing.T) {
	err := error(&Error{Op: "cuMemAlloc(1073741824 bytes)", Code: 2, Name: "CUDA_ERROR_OUT_OF_MEMORY", Message: "out of memory"})
	assert.Equal(t, "cuda: cuMemAlloc(1073741824 bytes): CUDA_ERROR_OUT_OF_MEMORY (out of memory)", err.Error())
	assert.ErrorIs(t, err, device.ErrOutOfMemory)

	other := error(&Error{Op: "cuMemFree(0x10, 4 bytes)", Code: 1, Name: "CUDA_ERROR_INVALID_VALUE", Message: "invalid argument"})
	assert.NotErrorIs(t, other, device.ErrOutOfMemory)
	var ce *Error
	require.ErrorAs(t, other, &ce)
	assert.Equal(t, 1, ce.Code)
}

func TestDriverStructLayouts(t *testing.T) {
	// cuda.h: CUmemAllocationProp is 32 bytes with the location at 8 and the
	// win32HandleMetaData pointer at 16; CUmemAccessDesc is 12 bytes.
	var p memAllocationProp
	assert.Equal(t, uintptr(32), unsafe.Sizeof(p))
	assert.Equal(t, uintptr(8), unsafe.Offsetof(p.locationType))
	assert.Equal(t, uintptr(16), unsafe.Offsetof(p.win32HandleMetaData))
	assert.Equal(t, uintptr(24), unsafe.Offsetof(p.compressionType))
	var a memAccessDesc
	assert.Equal(t, uintptr(12), unsafe.Sizeof(a))
	assert.Equal(t, uintptr(8), unsafe.Offsetof(a.flags))
}

func TestKernelArgEncoding(t *testing.T) {
	// 4-byte parameters are read from the low half of the 8-byte slot (little-endian).
	assert.Equal(t, uint64(0xffffffff), ArgInt32(-1).bits)
	assert.Equal(t, uint64(math.Float32bits(1.5)), ArgFloat32(1.5).bits)
	assert.Equal(t, math.Float64bits(-2.25), ArgFloat64(-2.25).bits)
	assert.Equal(t, uint64(0x7654_3210), ArgPtr(0x7654_3210).bits)
	assert.Equal(t, uint64(math.MaxUint64), ArgInt64(-1).bits)

	p := newLaunchParams().(*launchParams)
	for i := range p.ptrs {
		require.Equal(t, unsafe.Pointer(&p.vals[i]), p.ptrs[i])
	}
	assert.Equal(t, Dim3{1, 1, 1}, Dim3{}.orOnes())
	assert.Equal(t, Dim3{4, 1, 2}, Dim3{X: 4, Z: 2}.orOnes())
}

func TestNoDriverIsOneClearError(t *testing.T) {
	_, err := load()
	if err == nil {
		t.Skip("the CUDA driver loads here; this test covers machines without it")
	}
	assert.ErrorIs(t, err, ErrNoDriver)
	assert.Contains(t, err.Error(), "cuda: ")
	_, err = Open(0)
	assert.ErrorIs(t, err, ErrNoDriver)
	_, err = Count()
	assert.ErrorIs(t, err, ErrNoDriver)
	_, err = DriverVersion()
	assert.ErrorIs(t, err, ErrNoDriver)
}

// Tests on the GPU.

func TestProperties(t *testing.T) {
	d := openTest(t)
	p := d.Properties()
	t.Logf("%s: %+v, granularity %d", d.Name(), p, d.Granularity())
	v, err := DriverVersion()
	require.NoError(t, err)
	t.Logf("driver supports CUDA %d.%d", v/1000, v%1000/10)
	assert.Equal(t, "cuda:0", d.Name())
	assert.Equal(t, device.CUDA, d.Kind())
	assert.NotEmpty(t, p.Name)
	assert.Positive(t, p.TotalMemory)
	assert.GreaterOrEqual(t, p.ComputeMajor, 5)
	assert.Positive(t, p.Multiprocessors)
	assert.Equal(t, 32, p.WarpSize)
	assert.GreaterOrEqual(t, p.MaxThreadsPerBlock, 1024)
	assert.True(t, p.UnifiedAddressing)
	if p.VirtualMemory {
		g := d.Granularity()
		assert.Positive(t, g)
		assert.Zero(t, g&(g-1), "granularity %d is a power of two", g)
	}
	free, total, err := d.MemInfo()
	require.NoError(t, err)
	assert.Equal(t, p.TotalMemory, total)
	assert.Positive(t, free)
	assert.LessOrEqual(t, free, total)
}

func TestConformance(t *testing.T) {
	openTest(t)
	devicetest.Run(t, func(t *testing.T) device.Device {
		d, err := Open(0)
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, d.Close()) })
		return d
	}, devicetest.Config{KeepsData: true})
}

func TestCopiesAreChecked(t *testing.T) {
	d := openTest(t)
	p := malloc(t, d, 4096)
	buf := make([]byte, 16)
	assert.ErrorContains(t, d.CopyToDevice(p+4090, buf, 0), "runs past the end")
	assert.ErrorContains(t, d.CopyToHostAsync(buf, p+4090, 0), "runs past the end")
	assert.ErrorContains(t, d.Memset(p, 0, 4097, 0), "runs past the end")
	assert.ErrorContains(t, d.CopyOnDevice(p, 0x1000, 16, 0), "not inside any live allocation")
	assert.ErrorContains(t, d.CopyToDevice(p, buf, 12345), "not a live stream")
	_, err := d.QueryEvent(12345)
	assert.ErrorContains(t, err, "not a live event")
}

func TestOpenUnknownOrdinal(t *testing.T) {
	openTest(t)
	n, err := Count()
	require.NoError(t, err)
	for _, ord := range []int{-1, n} {
		_, err := Open(ord)
		assert.ErrorIs(t, err, ErrNoDevice, "Open(%d)", ord)
	}
}

func TestMallocFree(t *testing.T) {
	d := openTest(t)
	freeBefore, _, err := d.MemInfo()
	require.NoError(t, err)
	sizes := []int64{1, 100, 512, 513, 4096, 1 << 20, 20 << 20, 256 << 20}
	var total int64
	ptrs := make([]device.Ptr, len(sizes))
	for i, n := range sizes {
		ptrs[i], err = d.Malloc(n)
		require.NoError(t, err)
		assert.Zero(t, ptrs[i]%512, "Malloc(%d) = %#x is 512-byte aligned", n, ptrs[i])
		total += n
	}
	assert.Equal(t, Usage{Mallocs: len(sizes), MallocBytes: total}, d.Usage())
	freeDuring, _, err := d.MemInfo()
	require.NoError(t, err)
	assert.LessOrEqual(t, freeDuring, freeBefore-256<<20)
	for _, p := range ptrs {
		require.NoError(t, d.Free(p))
	}
	assert.ErrorContains(t, d.Free(ptrs[0]), "not the start of a live allocation")
	assert.ErrorContains(t, d.Free(0x1000), "not the start of a live allocation")
	_, err = d.Malloc(0)
	assert.ErrorContains(t, err, "size must be positive")
}

func TestOutOfMemoryWrapsErrOutOfMemory(t *testing.T) {
	d := openTest(t)
	_, err := d.Malloc(1 << 40)
	require.Error(t, err)
	assert.ErrorIs(t, err, device.ErrOutOfMemory)
	assert.Equal(t, "cuda: cuMemAlloc(1099511627776 bytes): CUDA_ERROR_OUT_OF_MEMORY (out of memory)", err.Error())
	var ce *Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, 2, ce.Code)
}

func TestDriverErrorNames(t *testing.T) {
	d := openTest(t)
	// A pointer the driver never handed out.
	r := d.call(d.drv.cuMemFree, 0x1000)
	err := d.drv.errorf(r, "cuMemFree(0x1000)")
	assert.Equal(t, "CUDA_ERROR_INVALID_VALUE", err.Name)
	assert.Equal(t, "cuda: cuMemFree(0x1000): CUDA_ERROR_INVALID_VALUE (invalid argument)", err.Error())
	assert.Equal(t, "CUDA_ERROR_NOT_READY", d.drv.errorf(errorNotReady, "x").Name)
	unknown := d.drv.errorf(123456, "x")
	assert.Equal(t, "CUDA_ERROR_123456", unknown.Name)
	assert.Equal(t, "unrecognized error code", unknown.Message)

	// Events made for the allocator carry no timestamps.
	a, err2 := d.NewEvent()
	require.NoError(t, err2)
	b, err2 := d.NewEvent()
	require.NoError(t, err2)
	require.NoError(t, d.RecordEvent(a, 0))
	require.NoError(t, d.RecordEvent(b, 0))
	require.NoError(t, d.SynchronizeEvent(b))
	_, err2 = d.ElapsedTime(a, b)
	var ce *Error
	require.ErrorAs(t, err2, &ce)
	assert.Equal(t, "CUDA_ERROR_INVALID_HANDLE", ce.Name)
	require.NoError(t, d.DestroyEvent(a))
	require.NoError(t, d.DestroyEvent(b))
}

func TestCopiesAndMemset(t *testing.T) {
	d := openTest(t)
	const n = 1<<20 + 3
	a, b := malloc(t, d, n), malloc(t, d, n)
	src := make([]byte, n)
	for i := range src {
		src[i] = byte(i*7 + 1)
	}
	for _, s := range []device.Stream{0, newStream(t, d)} {
		require.NoError(t, d.CopyToDevice(a, src, s))
		require.NoError(t, d.CopyOnDevice(b, a, n, s))
		require.NoError(t, d.Memset(b+100, 0xab, 1000, s))
		got := make([]byte, n)
		require.NoError(t, d.CopyToHost(got, b, s))
		want := append([]byte(nil), src...)
		for i := 100; i < 1100; i++ {
			want[i] = 0xab
		}
		require.Equal(t, want, got, "stream %#x", s)
		require.NoError(t, d.Memset(a, 0, n, s))
		require.NoError(t, d.CopyToHost(got, a, s))
		require.Equal(t, make([]byte, n), got)
	}
	require.NoError(t, d.CopyToDevice(a, nil, 0))
	require.NoError(t, d.Synchronize())
}

func TestKernelLaunch(t *testing.T) {
	d := openTest(t)
	k := kernels(t, d)
	const n = 1 << 20
	x, y := malloc(t, d, 4*n), malloc(t, d, 4*n)
	fill(t, d, x, math.Float32bits(2), n, 0)
	fill(t, d, y, math.Float32bits(1), n, 0)
	cfg := LaunchConfig{Grid: Dim3{X: n / 256}, Block: Dim3{X: 256}}
	require.NoError(t, d.Launch(k.axpy, cfg, ArgFloat32(3), ArgPtr(x), ArgPtr(y), ArgUint64(n)))
	got := make([]byte, 4*n)
	require.NoError(t, d.CopyToHost(got, y, 0))
	for i := 0; i < n; i++ {
		require.Equal(t, float32(7), math.Float32frombits(binary.LittleEndian.Uint32(got[4*i:])), "y[%d]", i)
	}
	fill(t, d, x, 0xdeadbeef, n-1, 0)
	require.NoError(t, d.CopyToHost(got, x, 0))
	assert.Equal(t, uint32(0xdeadbeef), binary.LittleEndian.Uint32(got[4*(n-2):]))
	assert.Equal(t, math.Float32bits(2), binary.LittleEndian.Uint32(got[4*(n-1):]), "fill stops at n")

	_, err := d.LoadModule([]byte(".version 7.0\n.target sm_52\nthis is not PTX"))
	var ce *Error
	require.ErrorAs(t, err, &ce)
	t.Logf("bad PTX: %v", err)
	m, err := d.LoadModule(kernelsPTX)
	require.NoError(t, err)
	_, err = m.Function("no_such_kernel")
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "CUDA_ERROR_NOT_FOUND", ce.Name)
	require.NoError(t, m.Unload())
}

// holdStream launches wait_flag on s: s stays busy until release is called (or 10 s
// pass). release writes the flag through another stream and reports whether the kernel
// saw it.
func holdStream(t *testing.T, d *Device, s device.Stream) (release func() bool) {
	t.Helper()
	k := kernels(t, d)
	flag, seen := malloc(t, d, 4), malloc(t, d, 4)
	require.NoError(t, d.Memset(flag, 0, 4, s))
	require.NoError(t, d.Memset(seen, 0xff, 4, s))
	require.NoError(t, d.Launch(k.waitFlag, LaunchConfig{Stream: s}, ArgPtr(flag), ArgUint64(10e9), ArgPtr(seen)))
	other := newStream(t, d)
	return func() bool {
		require.NoError(t, d.CopyToDevice(flag, []byte{1, 0, 0, 0}, other))
		require.NoError(t, d.SynchronizeStream(s))
		got := make([]byte, 4)
		require.NoError(t, d.CopyToHost(got, seen, s))
		return binary.LittleEndian.Uint32(got) == 1
	}
}

func TestEventsAndStreams(t *testing.T) {
	d := openTest(t)
	s := newStream(t, d)
	start, err := d.NewTimingEvent()
	require.NoError(t, err)
	end, err := d.NewTimingEvent()
	require.NoError(t, err)
	e, err := d.NewEvent()
	require.NoError(t, err)

	done, err := d.QueryEvent(e)
	require.NoError(t, err)
	assert.True(t, done, "an event never recorded counts as complete")

	require.NoError(t, d.RecordEvent(start, s))
	release := holdStream(t, d, s)
	require.NoError(t, d.RecordEvent(e, s))
	require.NoError(t, d.RecordEvent(end, s))
	done, err = d.QueryEvent(e)
	require.NoError(t, err)
	assert.False(t, done, "the stream is held by wait_flag")

	// The default stream does not wait for the held non-blocking stream.
	other := malloc(t, d, 4)
	fill(t, d, other, 5, 1, 0)
	require.NoError(t, d.SynchronizeStream(0))
	done, err = d.QueryEvent(e)
	require.NoError(t, err)
	assert.False(t, done)

	// A stream told to wait for e waits for the held stream.
	waiter := newStream(t, d)
	require.NoError(t, d.StreamWaitEvent(waiter, e))
	waited, err := d.NewEvent()
	require.NoError(t, err)
	require.NoError(t, d.RecordEvent(waited, waiter))
	done, err = d.QueryEvent(waited)
	require.NoError(t, err)
	assert.False(t, done, "waiter waits for the held stream")

	assert.True(t, release(), "wait_flag saw the flag rather than timing out")
	require.NoError(t, d.SynchronizeEvent(e))
	require.NoError(t, d.SynchronizeEvent(waited))
	for _, ev := range []device.Event{e, waited, end} {
		done, err = d.QueryEvent(ev)
		require.NoError(t, err)
		assert.True(t, done)
	}
	elapsed, err := d.ElapsedTime(start, end)
	require.NoError(t, err)
	assert.Positive(t, elapsed)
	for _, ev := range []device.Event{start, end, e, waited} {
		require.NoError(t, d.DestroyEvent(ev))
	}
	assert.ErrorContains(t, d.DestroyStream(0), "default stream")
}

func TestPinnedHostAsyncCopies(t *testing.T) {
	d := openTest(t)
	const n = 4 << 20
	src, err := d.HostAlloc(n)
	require.NoError(t, err)
	dst, err := d.HostAlloc(n)
	require.NoError(t, err)
	assert.Equal(t, Usage{HostAllocs: 2, HostBytes: 2 * n}, d.Usage())
	for i := range src {
		src[i] = byte(i * 13)
	}
	clear(dst)
	p := malloc(t, d, n)
	s := newStream(t, d)
	release := holdStream(t, d, s)
	require.NoError(t, d.CopyToDeviceAsync(p, src, s))
	require.NoError(t, d.CopyToHostAsync(dst, p, s))
	e, err := d.NewEvent()
	require.NoError(t, err)
	require.NoError(t, d.RecordEvent(e, s))
	done, err := d.QueryEvent(e)
	require.NoError(t, err)
	assert.False(t, done, "async copies from pinned memory wait behind the held stream")
	assert.Equal(t, make([]byte, 16), dst[:16], "nothing copied yet")
	assert.True(t, release())
	require.NoError(t, d.SynchronizeEvent(e))
	require.Equal(t, src, dst)
	require.NoError(t, d.DestroyEvent(e))

	assert.ErrorContains(t, d.HostFree(src[:n/2]), "not a whole live HostAlloc")
	require.NoError(t, d.HostFree(src))
	require.NoError(t, d.HostFree(dst))
	assert.ErrorContains(t, d.HostFree(dst), "not a whole live HostAlloc")
	_, err = d.HostAlloc(0)
	assert.Error(t, err)
}

func TestVirtualMemory(t *testing.T) {
	d := openTest(t)
	if !d.Properties().VirtualMemory {
		t.Skipf("%s has no VMM support", d.Name())
	}
	g := d.Granularity()
	base, err := d.Reserve(32 * g)
	require.NoError(t, err)
	assert.Zero(t, int64(base)%g)
	// One page, then ten pages as one handle right after it, as the small and large
	// expandable segments map them.
	require.NoError(t, d.Map(base, g))
	require.NoError(t, d.Map(base+device.Ptr(g), 10*g))
	assert.Equal(t, Usage{Mappings: 2, MappedBytes: 11 * g, Reservations: 1, ReservedBytes: 32 * g}, d.Usage())

	// Copies and memsets run across the boundary of the two physical allocations.
	n := 3 * g
	src := make([]byte, n)
	for i := range src {
		src[i] = byte(i*31 + 5)
	}
	require.NoError(t, d.CopyToDevice(base, src, 0))
	require.NoError(t, d.Memset(base+device.Ptr(g)-8, 0x5a, 16, 0))
	got := make([]byte, n)
	require.NoError(t, d.CopyToHost(got, base, 0))
	for i := g - 8; i < g+8; i++ {
		src[i] = 0x5a
	}
	require.Equal(t, src, got)
	fill(t, d, base+device.Ptr(g), 9, int(10*g/4), 0)
	require.NoError(t, d.CopyToHost(got[:4], base+device.Ptr(11*g)-4, 0))
	assert.Equal(t, []byte{9, 0, 0, 0}, got[:4])

	assert.ErrorContains(t, d.Map(base, g), "overlaps the mapped piece")
	assert.ErrorContains(t, d.Map(base+device.Ptr(31*g), 2*g), "runs past the end of the reservation")
	assert.ErrorContains(t, d.Map(base+1, g), "multiples of the granularity")
	assert.ErrorContains(t, d.Unmap(base+device.Ptr(g), g), "not one whole live Map")
	assert.ErrorContains(t, d.Unreserve(base, 32*g), "still has 2 mapped pieces")

	require.NoError(t, d.Synchronize())
	require.NoError(t, d.Unmap(base+device.Ptr(g), 10*g))
	// Unmapped space can be mapped again, now as pages.
	for i := int64(1); i < 11; i++ {
		require.NoError(t, d.Map(base+device.Ptr(i*g), g))
	}
	for i := int64(0); i < 11; i++ {
		require.NoError(t, d.Unmap(base+device.Ptr(i*g), g))
	}
	assert.ErrorContains(t, d.Unreserve(base, 16*g), "unreserve it with the size Reserve was given")
	require.NoError(t, d.Unreserve(base, 32*g))
}

func TestVirtualMemoryOutOfMemory(t *testing.T) {
	d := openTest(t)
	if !d.Properties().VirtualMemory {
		t.Skipf("%s has no VMM support", d.Name())
	}
	g := d.Granularity()
	size := (d.Properties().TotalMemory/g + 1) * g
	base, err := d.Reserve(size)
	require.NoError(t, err)
	err = d.Map(base, size)
	require.ErrorIs(t, err, device.ErrOutOfMemory)
	t.Logf("Map of %d bytes: %v", size, err)
	assert.Equal(t, Usage{Reservations: 1, ReservedBytes: size}, d.Usage(), "nothing left mapped")
	// The range is still usable after the failed Map.
	require.NoError(t, d.Map(base, g))
	require.NoError(t, d.Unmap(base, g))
	require.NoError(t, d.Unreserve(base, size))
}

func TestContextFromAnyThread(t *testing.T) {
	d := openTest(t)
	// Clear the current context on this thread, as a thread the driver has never seen
	// would have it; every entry point must still work.
	lockThread(t)
	require.Equal(t, success, syscallN(d.drv.cuCtxSetCurrent, 0))
	p, err := d.Malloc(4096)
	require.NoError(t, err)
	var cur uintptr
	require.Equal(t, success, syscallN(d.drv.cuCtxGetCurrent, uintptr(unsafe.Pointer(&cur))))
	assert.Equal(t, d.ctx, cur)
	require.NoError(t, d.Free(p))
}

func TestCloseRefusesWhileMemoryLive(t *testing.T) {
	openTest(t)
	d, err := Open(0)
	require.NoError(t, err)
	p, err := d.Malloc(1 << 20)
	require.NoError(t, err)
	assert.ErrorContains(t, d.Close(), "memory still live")
	require.NoError(t, d.Free(p))
	require.NoError(t, d.Close())
	assert.ErrorContains(t, d.Close(), "twice")
}
