// Package sublet is the map of the sublet module, an embeddable Go tensor runtime whose
// device memory is managed by a caching allocator that decides as PyTorch's CUDA
// caching allocator does. This package has no code; import the packages below.
//
// # What to import for what
//
// Training and inference:
//
//	tensor            tensors, scopes (grad mode, random generator, autocast), every op and its backward
//	nn                layers (Linear, LayerNorm, Embedding, Dropout, Sequential, NewMLP) and losses
//	optim             SGD, Adam, AdamW
//	checkpoint        gradient checkpointing: recompute in backward instead of keeping activations
//	amp               mixed precision: autocast scopes to float16/bfloat16, GradScaler
//	data              samplers and a prefetching loader that moves batches to the device
//	dist              data-parallel training over several processes (`sublet run` starts them)
//	tensor/gradcheck  check a backward rule against finite differences
//	tensor/dense      convert to and from gorgonia.org/tensor's Dense
//
// Devices:
//
//	device/named      open a device by name: cpu, sim, sim-backed, cuda, cuda:N (SUBLET_DEVICE)
//	device/cpu        host memory as a device
//	device/sim        a simulated GPU: fixed capacity, no GPU needed; without data it proves
//	                  memory at full model size in milliseconds
//	device/cuda       NVIDIA GPUs through the driver API, loaded at run time (no cgo)
//	device            the interfaces every device implements
//
// Memory: the allocator and seeing where memory goes:
//
//	alloc             the caching allocator: Alloc, Free, EmptyCache, Stats, Summary, the OOM error,
//	                  the SUBLET_ALLOC_CONF settings (PYTORCH_CUDA_ALLOC_CONF's keys)
//	alloc/pinned      the caching allocator of page-locked host memory (staging for copies)
//	alloc/memsnap     memory snapshots in PyTorch's format, for pytorch.org/memory_viz
//	alloc/memviz      a snapshot as one self-contained HTML page
//	alloc/memplot     memory over time as a PNG
//	alloc/memprof     device memory as pprof profiles by Go stack
//	alloc/memmetrics  the allocator's statistics as Prometheus metrics
//	alloc/recorder    record a program's allocations as a trace
//	alloc/replay      read, generate and replay traces ("what if expandable segments were on?")
//	profiler          time and memory per named region, as torch.profiler's table and a Chrome trace
//
// Below those, and rarely imported by programs: autograd (the engine tensor's ops
// record into), kernels and kernels/cpu (the compute backends), dtype (element types).
// The command sublet (cmd/sublet) replays traces, shows devices and settings, renders
// snapshots and starts distributed runs.
//
// # Ownership in three sentences
//
// Every tensor handle belongs to a scope, or to the caller (a parameter belongs to its
// module), and closing the scope releases what it still owns, so device memory comes
// back at moments the program names instead of whenever the garbage collector runs.
// Backward releases each saved activation as soon as its node has used it, and an
// optimizer step leaves exactly parameters, gradients and optimizer state allocated.
// The garbage collector only reports handles nobody released (tensor.Leaks); it never
// frees device memory behind the program's back.
//
// # Where the documentation is
//
//   - README.md: installing, a first program, what runs on which device.
//   - The package docs (go doc ./tensor, ./alloc, ...): each starts with its use, then
//     its invariants; runnable examples beside them (go test -run Example ./...).
//   - docs/ownership.md: the ownership and release contract in full.
//   - docs/allocator.md: every decision the caching allocator makes, and its statistics.
//   - docs/autocast.md: the autocast policy, the weight-cast cache and GradScaler.
//   - docs/checkpoint.md: what checkpointing keeps, and PyTorch's figures it is held to.
//   - docs/alloc-settings.md: the allocator settings measured on a trace.
//   - docs/observability.md: history, snapshots, the viewer, pprof, Prometheus, the profiler.
//   - docs/gpu.md and docs/benchmarks.md: the GPU suite, and every measured figure.
//   - examples/README.md: one runnable program per situation, each run by a test.
package sublet
