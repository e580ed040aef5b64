// Package device is the raw layer under the caching allocator: device memory, streams,
// events and copies, with no caching of its own.
//
// # Use
//
// Programs get a device from device/named (Open, Default) or from device/cpu,
// device/sim or device/cuda, and hand it to the tensor package and to alloc; they
// rarely call its methods, which the caching allocator calls. A new kind of device
// implements Device (and VirtualMemory for expandable segments, HostMemory when the
// CPU can address its memory) and passes the conformance suites in device/devicetest
// and alloc/alloctest.
//
// Invariants every implementation keeps:
//   - A Ptr returned by Malloc, or mapped by VirtualMemory.Map, stays valid until the
//     matching Free or Unmap; nothing is freed behind the caller's back.
//   - Malloc and Map report a lack of device memory with an error that wraps
//     ErrOutOfMemory, and only then; the allocator retries after releasing its cache on
//     that error and on no other.
//   - Stream 0 is the device's default stream and always exists. Work ordered on one
//     stream runs in order; an Event recorded on a stream completes when the work
//     ordered before it on that stream has completed.
//   - Every method is safe for concurrent use by multiple goroutines.
//
// Device pointers are integers (Ptr), never unsafe.Pointer: on a GPU they do not point
// into this process. Devices whose memory the CPU can address implement HostMemory.
package device

import (
	"errors"
	"fmt"
)

// Ptr is an address in a device's memory space.
type Ptr uintptr

// Stream names an ordered queue of work on one device. The zero Stream is the default
// stream.
type Stream uintptr

// Event names a marker recorded on a stream.
type Event uintptr

// Kind tells which implementation a Device is.
type Kind uint8

const (
	// CPU is host memory from anonymous mmap (package device/cpu).
	CPU Kind = iota + 1
	// Sim is the simulated accelerator (package device/sim).
	Sim
	// CUDA is an NVIDIA GPU through the driver API (package device/cuda).
	CUDA
)

func (k Kind) String() string {
	switch k {
	case CPU:
		return "cpu"
	case Sim:
		return "sim"
	case CUDA:
		return "cuda"
	}
	return fmt.Sprintf("device.Kind(%d)", uint8(k))
}

// ErrOutOfMemory is wrapped by every error a device returns because it has no memory
// left for a request. Test with errors.Is.
var ErrOutOfMemory = errors.New("device out of memory")

// Wrapper is implemented by a device that wraps another one (a meter, a fault
// injector, a budget) and hands out that device's memory and streams as its own. Ops on
// its memory then run on the kernels of the device it wraps (the tensor package looks
// through Unwrap, to the innermost device, for them).
type Wrapper interface {
	// Unwrap returns the device this one wraps.
	Unwrap() Device
}

// Innermost follows Unwrap from d to the device that wraps no other (d itself when it
// wraps none).
func Innermost(d Device) Device {
	for {
		w, ok := d.(Wrapper)
		if !ok {
			return d
		}
		d = w.Unwrap()
	}
}

// Device is one accelerator (or the host acting as one).
type Device interface {
	// Name is the user-facing name: "cpu", "sim", "cuda:0".
	Name() string
	Kind() Kind
	// Residency says where the device keeps data, and so what computes on it: Host
	// (the device implements HostMemory and its Bytes work), Remote (only the device's
	// copies and kernels reach it) or Meta (it keeps none). A device that wraps another
	// one by embedding inherits the wrapped device's.
	Residency() Residency

	// Malloc returns size bytes of device memory (size > 0), aligned to at least 512
	// bytes. A lack of memory is an error wrapping ErrOutOfMemory.
	Malloc(size int64) (Ptr, error)
	// Free returns memory obtained from Malloc. Freeing anything else is an error.
	Free(p Ptr) error
	// MemInfo reports the device's free and total memory in bytes, as the driver sees
	// them (all processes included).
	MemInfo() (free, total int64, err error)

	// NewStream creates a stream other than the default one.
	NewStream() (Stream, error)
	DestroyStream(s Stream) error
	// SynchronizeStream waits until all work ordered on s has completed.
	SynchronizeStream(s Stream) error
	// Synchronize waits until all work on the device has completed.
	Synchronize() error

	NewEvent() (Event, error)
	// RecordEvent marks the current end of stream s with e.
	RecordEvent(e Event, s Stream) error
	// QueryEvent reports whether the work before e's last record has completed.
	QueryEvent(e Event) (done bool, err error)
	SynchronizeEvent(e Event) error
	DestroyEvent(e Event) error

	// CopyToDevice copies len(src) bytes from host memory to dst, ordered on s. It
	// returns once src may be reused.
	CopyToDevice(dst Ptr, src []byte, s Stream) error
	// CopyToHost copies len(dst) bytes from src to host memory, ordered on s. It returns
	// once dst holds the data.
	CopyToHost(dst []byte, src Ptr, s Stream) error
	// CopyOnDevice copies n bytes from src to dst on this device, ordered on s.
	CopyOnDevice(dst, src Ptr, n int64, s Stream) error
	// Memset sets n bytes at dst to value, ordered on s.
	Memset(dst Ptr, value byte, n int64, s Stream) error
}

// VirtualMemory is implemented by devices that can reserve address space and back it
// with physical memory piece by piece. The allocator's expandable segments use it.
type VirtualMemory interface {
	// Granularity is the size that addresses and sizes passed to Map and Unmap must be
	// multiples of (2 MiB on the H200; the page size on the CPU).
	Granularity() int64
	// Reserve reserves size bytes of address space backed by nothing.
	Reserve(size int64) (Ptr, error)
	// Map backs [addr, addr+size) inside a reserved range with new physical memory,
	// readable and writable by this device. A lack of memory is an error wrapping
	// ErrOutOfMemory and leaves nothing mapped.
	Map(addr Ptr, size int64) error
	// Unmap releases the physical memory behind [addr, addr+size), a range previously
	// passed to Map (or moved there by Remapper.Remap) as a whole.
	Unmap(addr Ptr, size int64) error
	// Unreserve gives back a range from Reserve; nothing in it may still be mapped.
	Unreserve(addr Ptr, size int64) error
}

// Remapper is implemented by virtual memory whose physical memory can move to another
// address without being released and made again (cuda: the piece's allocation handle
// is mapped at the new address and unmapped from the old, no cuMemRelease and
// cuMemCreate). The allocator moves free pages with it.
type Remapper interface {
	// Remap moves the physical memory of [from, from+size), a piece given to Map or
	// Remap as a whole, to [to, to+size), unmapped space inside a reserved range:
	// afterwards from is unmapped, and to is a piece, readable and writable by this
	// device, that Unmap and Remap take whole. It takes no memory, so it never fails
	// for lack of it. The contents at to are undefined. On failure nothing changes.
	Remap(from, to Ptr, size int64) error
}

// HostMemory is implemented by devices whose memory the CPU can address (cpu, and sim,
// which addresses it only with a backing store: Residency says which).
type HostMemory interface {
	// Bytes returns the n bytes at p as a slice aliasing device memory, or ok=false when
	// the device keeps no data (sim without backing store) or [p, p+n) is not wholly
	// inside one live Malloc allocation or one reserved range mapped throughout.
	Bytes(p Ptr, n int64) (b []byte, ok bool)
}

// Residency says where a device keeps the data in its memory, which decides what can
// compute on it: the CPU kernels where the CPU addresses it, the device's own kernels
// where only they reach it, nothing where there is no data (Device.Residency).
type Residency uint8

const (
	// Meta memory is accounted but holds no data (sim without backing store).
	Meta Residency = iota + 1
	// Host memory is addressed by the CPU through HostMemory.Bytes (cpu, and sim with a
	// backing store).
	Host
	// Remote memory is reached only by the device's kernels and copies (cuda).
	Remote
)

func (r Residency) String() string {
	switch r {
	case Meta:
		return "meta"
	case Host:
		return "host"
	case Remote:
		return "remote"
	}
	return fmt.Sprintf("device.Residency(%d)", uint8(r))
}
