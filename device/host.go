package device

// PinnedHost is implemented by devices that can allocate page-locked (pinned) host
// memory, the memory that asynchronous copies need to overlap with other work. The pinned
// host caching allocator (package alloc/pinned) uses it when a device offers it.
//
// A copy ordered on a stream by CopyToDeviceAsync or CopyToHostAsync may still be running
// when the call returns: the host buffer must stay untouched until an event recorded on
// the stream after the copy has completed. With pageable host memory (anything not from
// HostAlloc) the driver finishes the host side of the copy before returning, so the
// buffer may be reused at once, but nothing overlaps.
type PinnedHost interface {
	// HostAlloc returns size bytes (size > 0) of page-locked host memory. A lack of
	// memory is an error wrapping ErrOutOfMemory.
	HostAlloc(size int64) ([]byte, error)
	// HostFree returns a slice obtained from HostAlloc, whole (same start and length).
	// Freeing anything else is an error.
	HostFree(b []byte) error

	// CopyToDeviceAsync copies len(src) bytes from host memory to dst, ordered on s,
	// without waiting for the copy to complete.
	CopyToDeviceAsync(dst Ptr, src []byte, s Stream) error
	// CopyToHostAsync copies len(dst) bytes from src to host memory, ordered on s,
	// without waiting for the copy to complete.
	CopyToHostAsync(dst []byte, src Ptr, s Stream) error
}

// HostRegisterer is implemented by devices that can page-lock ordinary host memory in
// place (cuMemHostRegister): PyTorch's pinned_use_cuda_host_register path, where the
// caller maps the memory and faults its pages in, from several threads for a large
// buffer, so that the registration itself is short. Registered memory serves the
// asynchronous copies of PinnedHost like HostAlloc memory.
type HostRegisterer interface {
	// HostRegister page-locks b: whole pages of memory outside the Go heap (anonymous
	// mmap), not registered already, which must stay mapped until HostUnregister. A lack
	// of lockable memory is an error wrapping ErrOutOfMemory.
	HostRegister(b []byte) error
	// HostUnregister undoes HostRegister of the same slice (same start and length); the
	// memory stays mapped. Anything else is an error.
	HostUnregister(b []byte) error
}
