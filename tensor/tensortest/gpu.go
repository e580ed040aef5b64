package tensortest

import (
	"testing"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/internal/hostmem"
)

// GPU stands in for a GPU: a simulated device with a backing store whose memory the CPU
// cannot address (its HostMemory is hidden, so data moves only through its copies and
// no op computes on it), with PinnedHost's page-locked memory (anonymous mmap here) and
// asynchronous copies (done at once, and counted in Async).
type GPU struct {
	device.Device
	name  string
	Async int // asynchronous copies so far; the device is used by one goroutine
}

// NewGPU returns a fresh GPU stand-in of 64 MiB named name ("cuda:0").
func NewGPU(t testing.TB, name string) *GPU {
	return &GPU{Device: Sim(t, 64<<20, true), name: name}
}

// Kind is CUDA.
func (g *GPU) Kind() device.Kind { return device.CUDA }

// Name is the name given to NewGPU.
func (g *GPU) Name() string { return g.name }

// HostAlloc maps size bytes of host memory.
func (g *GPU) HostAlloc(size int64) ([]byte, error) { return hostmem.Alloc(size) }

// HostFree unmaps memory from HostAlloc.
func (g *GPU) HostFree(b []byte) error { return hostmem.Free(b) }

// CopyToDeviceAsync copies at once and counts the copy.
func (g *GPU) CopyToDeviceAsync(dst device.Ptr, src []byte, s device.Stream) error {
	g.Async++
	return g.CopyToDevice(dst, src, s)
}

// CopyToHostAsync copies at once and counts the copy.
func (g *GPU) CopyToHostAsync(dst []byte, src device.Ptr, s device.Stream) error {
	g.Async++
	return g.CopyToHost(dst, src, s)
}
