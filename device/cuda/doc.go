// Package cuda drives NVIDIA GPUs through the CUDA driver API. libcuda.so.1 is loaded at
// run time with purego, so the package builds with CGO_ENABLED=0 and without CUDA
// installed; Open and Count report a missing driver or device as an error wrapping
// ErrNoDriver or ErrNoDevice. On platforms other than linux/amd64 and linux/arm64 every
// constructor reports that CUDA is not available there.
//
// # Use
//
//	d, err := cuda.Open(0)          // errors.Is(err, cuda.ErrNoDriver / ErrNoDevice) without one
//	defer d.Close()                 // refuses while anything is still allocated
//	a, err := alloc.For(d)          // the caching allocator in front of it
//
// named.Open("cuda:0") is the shared value most programs want. Tensor ops that
// compute need kernels for the device; where there are none they panic with
// tensor.ErrNoKernels naming the op.
//
// Invariants:
//   - Loading happens on first use (Open, Count, DriverVersion), never at import: the
//     library is opened and every symbol resolved once per process, then immutable.
//   - Each Device works in its GPU's primary context, which it retains from Open to
//     Close. The driver keeps the current context per OS thread and goroutines move
//     between threads, so every entry point locks its goroutine to its thread and makes
//     the context current before its driver calls (see call in device.go for why this
//     beats a per-thread cache). Every method is therefore correct from any goroutine.
//   - Device pointers, streams, events and driver handles are integers (device.Ptr,
//     device.Stream, device.Event, uintptr), never unsafe.Pointer. Go memory handed to
//     the driver is converted to uintptr inside the call expression of a
//     //go:uintptrescapes function (syscallN, Device.call), which keeps it alive and on
//     the heap for the call, as purego requires.
//   - A Device records every Malloc, Map, Reserve, HostAlloc and HostRegister it has
//     made and not yet taken back (Usage): freeing anything else is an error, and nothing
//     is freed behind the caller's back (Close refuses while anything is live).
//   - Kernels come from PTX (LoadModule) or fatbins (LoadFatbin, SASS per architecture
//     plus PTX); Launch passes scalars and by-value structs (ArgBytes) through a pooled
//     parameter block, so a launch allocates nothing on the heap. Toolkit libraries
//     (cuBLAS) load like the driver, with OpenLibrary, and are called through
//     Device.CallLibrary with the Device's context current.
//   - Driver failures are *Error values; CUDA_ERROR_OUT_OF_MEMORY unwraps to
//     device.ErrOutOfMemory, which sends the caching allocator down its release-and-retry
//     path.
package cuda
