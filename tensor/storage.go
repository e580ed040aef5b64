package tensor

import (
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/kernels"
)

// Allocator is what tensors take their memory from: the device's caching allocator
// (*alloc.Allocator, the default), or one of the program's own behind a device that
// implements AllocatorSource (PyTorch's pluggable allocator). Alloc(0) need not be
// served: the tensor package makes empty storages itself. A lack of memory must be an
// *alloc.OOMError or an error wrapping device.ErrOutOfMemory, so that Try and
// errors.As see it as such. The memory must be the device's own (on a host device,
// inside what Bytes reaches), ordered on the stream given.
type Allocator interface {
	Alloc(size int64, s device.Stream) (device.Ptr, error)
	Free(p device.Ptr) error
}

// AllocatorSource is implemented by a device whose tensors take their memory from an
// allocator other than its caching allocator: a device type of the program's own,
// typically wrapping a real one by embedding. TensorAllocator is asked at every
// allocation; nil means the caching allocator.
type AllocatorSource interface {
	TensorAllocator() Allocator
}

// Storage is one block of device memory from the device's caching allocator, shared by
// every handle and view over it and by the graph nodes that saved it. It counts its
// references: each live Tensor handle over it holds one (a node's saved tensor is such a
// handle); the block goes back to the allocator when the last is dropped.
type Storage struct {
	// Set at allocation, never changed.
	dev  device.Device
	al   Allocator
	ptr  device.Ptr
	size int64
	// base is where the CPU addresses the block (res == device.Host; nil otherwise,
	// and once freed): the CPU kernels compute in host(), size bytes from it. A block
	// of 0 bytes has a base too (&noBytes), so that its host() is not nil.
	base unsafe.Pointer

	// version counts in-place writes (BumpVersion); a saved tensor records it and
	// backward fails if it changed (autograd.ErrModifiedInPlace). Changed atomically.
	version atomic.Uint64
	// spare is the handle allocated with the storage (block) for the first tensor over
	// it, until newHandle takes it; written only while the storage is not shared.
	spare *handle
	// others counts the handles over the storage beyond the first (Refs - 1), so that a
	// new storage, zero, holds its one reference without an atomic store (an atomic
	// read-modify-write an op fewer); changed atomically; at -1 the block is freed and
	// the storage is dead.
	others atomic.Int32
	// res is where the device keeps the data, which picks the kernels (backendFor).
	// Set at allocation, never changed.
	res device.Residency
	// inference marks the storage of a tensor made in inference mode: its version is
	// not counted, and no node may save it. Set before the storage is shared.
	inference bool
}

// block is a new storage and the handle of its first tensor in one allocation: an op
// makes both.
type block struct {
	st Storage
	h  handle
}

// Device is the device holding the storage.
func (s *Storage) Device() device.Device { return s.dev }

// Ptr is the block's device address (0 for a storage of 0 bytes).
func (s *Storage) Ptr() device.Ptr { return s.ptr }

// Size is the storage's size in bytes: exactly the bytes its tensor asked for.
func (s *Storage) Size() int64 { return s.size }

// Residency is where the data is: device.Host (the CPU addresses it: cpu, sim with a
// backing store), device.Remote (only the device reaches it: cuda) or device.Meta (no
// data: sim without backing store, where ops allocate and compute nothing).
func (s *Storage) Residency() device.Residency { return s.res }

// Refs is the number of handles holding the storage now.
func (s *Storage) Refs() int { return int(s.others.Load()) + 1 }

// Version is the count of in-place writes so far (always 0 for an inference tensor's
// storage, which counts none).
func (s *Storage) Version() uint64 { return s.version.Load() }

// Host returns the block's bytes where the CPU addresses them (Residency device.Host),
// nil otherwise. Writing through it is an in-place write: call BumpVersion.
func (s *Storage) Host() []byte { return s.host() }

// host is the block's bytes where the CPU addresses them, nil otherwise.
func (s *Storage) host() []byte {
	if s.base == nil {
		return nil
	}
	return unsafe.Slice((*byte)(s.base), s.size)
}

// noBytes is the base of the host blocks of 0 bytes, aligned for every element type.
var noBytes uint64

// BumpVersion records an in-place write (made by an op, or outside the tensor
// package's ops), so that backward refuses a saved tensor that changed. An inference
// tensor's storage counts none.
func (s *Storage) BumpVersion() {
	if !s.inference {
		s.version.Add(1)
	}
}

// mem is the block as the kernels see it.
func (s *Storage) mem() kernels.Mem {
	return kernels.Mem{Host: s.host(), Ptr: s.ptr, Size: s.size, Stream: streamOf(s.dev)}
}

// allocatorOf is the allocator dev's tensors use: its own (AllocatorSource) or its
// caching allocator. known, when not nil, is the allocator of a storage on dev: on a
// device that is no AllocatorSource it is the caching allocator, which alloc.For
// would look up under a lock (a device's allocator never changes).
func allocatorOf(dev device.Device, known Allocator) (Allocator, error) {
	if src, ok := dev.(AllocatorSource); ok {
		if al := src.TensorAllocator(); al != nil {
			return al, nil
		}
	} else if known != nil {
		return known, nil
	}
	return alloc.For(dev)
}

// newStorage allocates size bytes on dev's allocator for op, holding one reference;
// known is the allocator of a storage on dev, or nil (allocatorOf). The caching
// allocator's memory history keeps op with the block; lt is its placement hint
// (WithLifetime). The storage and its first handle are in blk, zero, or in a new
// block (nil).
func newStorage(dev device.Device, known Allocator, size int64, op string, lt alloc.Lifetime, blk *block) (*Storage, error) {
	al, err := allocatorOf(dev, known)
	if err != nil {
		return nil, err
	}
	var p device.Ptr
	if size > 0 {
		// During a graph capture, the capture's stream: the allocator serves it from
		// the graph's private pool.
		s := streamOf(dev)
		if ca, ok := al.(*alloc.Allocator); ok {
			p, err = ca.AllocTagged(size, s, alloc.Tag{Op: op, Lifetime: lt})
		} else {
			p, err = al.Alloc(size, s)
		}
		if err != nil {
			return nil, err
		}
	}
	if blk == nil {
		blk = new(block)
	}
	blk.st = Storage{dev: dev, al: al, ptr: p, size: size, res: dev.Residency()}
	s := &blk.st
	s.spare = &blk.h
	if s.res == device.Host {
		hm, isHost := dev.(device.HostMemory)
		switch {
		case size == 0:
			s.base = unsafe.Pointer(&noBytes)
		case !isHost:
			err := fmt.Errorf("tensor: %s reports host residency but does not implement device.HostMemory (a wrapper must forward Bytes)", dev.Name())
			return nil, errors.Join(err, al.Free(p))
		default:
			b, ok := hm.Bytes(p, size)
			if !ok || int64(len(b)) < size {
				err := fmt.Errorf("tensor: %s keeps data but gave no host bytes for its block of %d bytes at %#x", dev.Name(), size, p)
				return nil, errors.Join(err, al.Free(p))
			}
			s.base = unsafe.Pointer(unsafe.SliceData(b))
		}
	}
	return s, nil
}

func (s *Storage) retain() {
	if s.others.Add(1) <= 0 {
		panic(fmt.Sprintf("tensor: internal error: retain of a freed storage at %#x on %s", s.ptr, s.dev.Name()))
	}
}

// release drops one reference and frees the block with the last.
func (s *Storage) release() {
	switch n := s.others.Add(-1); {
	case n >= 0:
		return
	case n < -1:
		panic(fmt.Sprintf("tensor: internal error: storage at %#x on %s released more often than retained", s.ptr, s.dev.Name()))
	}
	s.base = nil
	if s.size == 0 {
		return
	}
	if err := s.al.Free(s.ptr); err != nil {
		panic(fmt.Sprintf("tensor: internal error: freeing storage at %#x on %s: %v", s.ptr, s.dev.Name(), err))
	}
}
