// Command multiprocess runs two processes on one device, each capped by a memory
// fraction, and shows that each cleans up on a normal exit, on an error and on SIGTERM,
// and that nothing is left on the device afterwards.
//
// The program starts its own executable twice as workers. "train" holds a model and runs
// steps that allocate and free activations; "serve" fills its cache until its fraction
// stops it (the allocator refuses the segment without asking the device), then serves
// requests until it is told to stop. Every exit path of a worker runs one release: every
// block freed, the cache given back to the device, a check that nothing is reserved.
// SIGTERM is handled: it cancels the worker's work, and the same release runs before it
// exits with status 143. Two rounds:
//
//  1. train finishes its steps and exits 0; serve is sent SIGTERM.
//  2. train fails (a step needs more than its fraction allows) and exits 1; serve is sent
//     SIGKILL, which no handler can catch: it releases nothing, and only the driver's
//     cleanup of a dead process gives its memory back.
//
// The device's memory is read before, during and after each round. On cuda:N that is
// the driver's cuMemGetInfo, all processes included, with the parent's own CUDA context
// already made. On sim, which lives inside one process, the processes share a simulated
// device through a ledger file: each worker's device writes its Malloc and Free there
// under a file lock, a Malloc past the shared capacity fails as out of memory, and free
// memory is the capacity less what the ledger says every process holds; after SIGKILL
// the parent reclaims what the dead process left there, as the driver would.
//
//	go run ./examples/multiprocess                   # sim, 1 GiB shared, fractions 0.4 and 0.4
//	go run ./examples/multiprocess -capacity 8GiB -train 0.3 -serve 0.6
//	go run ./examples/multiprocess -device cuda:0    # a real GPU (driver memory before and after)
//
// It needs a Unix system (signals, file locks).
package main
