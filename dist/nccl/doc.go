// Package nccl binds NVIDIA's collective communication library (libnccl.so.2) through
// purego: it builds with CGO_ENABLED=0 and without NCCL installed, and loads the library
// at run time on first use. Most programs use it through package dist (the NCCL
// backend); this package is the raw layer, on device pointers and streams.
//
// Use: rank 0 makes an id with NewUniqueID, every rank receives it (dist sends it over
// its rendezvous), and every rank calls InitRank with its GPU; then each rank issues the
// same collectives in the same order (AllReduce, Broadcast, AllGather, ReduceScatter,
// between GroupStart and GroupEnd to fuse them), each enqueued on a stream of that GPU;
// Destroy ends the communicator, Abort ends it at once from any goroutine.
//
// Invariants:
//   - The library is opened and its symbols resolved once per process, on first use,
//     never at import; a machine without it gets errors wrapping ErrNoLibrary. NCCL
//     2.23 or later is required (ncclCommInitRankScalable, see InitRank).
//   - Each Comm issues every call that is not thread-safe in NCCL (init, collectives,
//     group calls, finalize, destroy) from one goroutine of its own, locked to its OS
//     thread with the GPU's primary context current: NCCL keeps group state per thread
//     and finds its device through the current context. AsyncError and Abort are called
//     from the caller's thread, as NCCL allows (PyTorch's watchdog does the same).
//   - Device pointers and streams are integers (device.Ptr, device.Stream); the only Go
//     memory NCCL sees (the id, the communicator's out parameter) is passed inside the
//     call expression of a //go:uintptrescapes function.
//   - Failures are *Error values carrying the ncclResult_t, NCCL's name for it and the
//     communicator's last error message.
package nccl
