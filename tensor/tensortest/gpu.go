package tensortest

import (
	"testing"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/internal/hostmem"
)

// Remote stands in for a GPU without pinned memory: a simulated device with a backing
// store whose memory the CPU cannot address (its HostMemory is hidden, so data moves
// only through its copies and no op computes on it).
type Remote struct {
	device.Device
	name string
}

// NewRemote returns a fresh Remote of 64 MiB named name ("cuda:0").
func NewRemote(t testing.TB, name string) *Remote {
	return &Remote{Device: Sim(t, 64<<20, true), name: name}
}

// Kind is CUDA.
func (r *Remote) Kind() device.Kind { return device.CUDA }

// Name is the name given to NewRemote.
func (r *Remote) Name() string { return r.name }

// Residency is device.Remote, as a GPU's.
func (r *Remote) Residency() device.Residency { return device.Remote }

// GPU stands in for a GPU: a Remote with PinnedHost's page-locked memory (anonymous
// mmap here) and asynchronous copies (done at once, and counted in Async).
type GPU struct {
	*Remote
	Async int // asynchronous copies so far; the device is used by one goroutine
}

// NewGPU returns a fresh GPU stand-in of 64 MiB named name ("cuda:0").
func NewGPU(t testing.TB, name string) *GPU { return &GPU{Remote: NewRemote(t, name)} }

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
