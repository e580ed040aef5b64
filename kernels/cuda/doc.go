// Package cuda is the CUDA backend of package kernels: every op of the tensor package
// on an NVIDIA GPU's memory (device/cuda), as a kernels.Backend. For returns a
// device's Backend; the tensor package picks it for tensors on cuda:N, so a program
// only chooses its device. Matrix products run on cuBLAS, loaded at run time like
// libcuda (BLASEnv, BLAS); every other kernel is CUDA C in src/, compiled offline by
// scripts/gpu/gen_kernels.sh into gen/*.ptx (reviewed) and gen/*.fatbin (SASS for
// sm_80 and sm_90, PTX for compute_80: embedded, loaded per family on first use).
//
// # Invariants
//
// kernels/cpu's, which is the reference every kernel is tested against
// (kernels/kernelstest), and these:
//
//   - Asynchronous: a method orders its kernels on the stream of its first output
//     (Mem.Stream) and returns; no op synchronises or queries an event, except
//     NonFinite, which returns a value. Kernels of one stream run in launch order.
//   - Errors that depend on the data (a class label or an embedding index outside its
//     range, probabilities of BinaryCrossEntropy outside [0, 1]) are found by the
//     kernels and written to an error record; Check (kernels.Async) reports the
//     first of them (the earliest launch's), at the next synchronisation point: the
//     tensor package calls it in ToSlice, Item and tensor.Synchronize. The record is
//     in page-locked host memory that the kernels write across the bus (under a lock
//     in device memory), so Check waits for the device and reads it with no copy: a
//     value read after a flagged kernel costs one round trip (its own copy), not two.
//     An index is a *kernels.IndexError naming the op, its position, value and limit;
//     a bad index's row is skipped meanwhile, never read or written out of bounds. A
//     range error is the *kernels.RangeError kernels/cpu returns, with the count of
//     the launch's elements outside the domain (every block adds its own); the outputs
//     are written all the same, as there. Device errors (a launch refused, a family
//     that does not load, a cuBLAS failure) are kept and reported by Check too. Misuse
//     (shapes that do not agree, layouts outside their block) panics before anything
//     is launched, as on the CPU.
//   - Deterministic: the same inputs give the same bits on every run on a given GPU
//     and library. Reductions (Sum, Mean, Max, softmax, layer norm, losses) use no
//     float atomics: each output's elements are cut into pieces whose bounds depend on
//     the shapes alone, folded by one thread or by one block in a fixed tree, and
//     combined in piece order; sums accumulate in float64, as kernels/cpu's do, but
//     for the runs below. Where one launch does it all (cross-entropy's forward, the
//     sum of a whole 16-bit tensor, column sums over 16-byte words), the last block to
//     take a ticket (an integer atomic in the stream's scratch, after a __threadfence;
//     common.cuh's last_of) combines the blocks' parts in piece order. Kernels of one
//     op over contiguous 16-bit words (cast_to_f32, gelu_tanh, max_rows), taken only
//     where the operands are dense, whole words and aligned, give the bits of the
//     general kernels. The sums over 16-byte words (sum_all and sum_rows of F16 and
//     BF16, sum_cols of float32, F16 and BF16 over dense columns) add a thread's few
//     elements of one output read in one round (4 or 8, 16-byte words apart) in float32
//     first and that run into the float64 sum (float32 columns: each element into
//     float64): a conversion and a float64 addition a run, not an element, at most
//     7·2⁻²⁴ of the run's magnitudes off. Their order, and so their bits, depends on
//     the shapes and the input's 16-byte phase alone, and differs from the general
//     kernels' (which a view off the words' alignment takes).
//     EmbeddingBackward gives each element of the gradient to one thread, which adds
//     the rows that land on it in index order. cuBLAS products are deterministic for a
//     given workspace configuration (CUBLAS_WORKSPACE_CONFIG).
//   - Numbers: every kernel computes in float64 when an operand is F64 (for a row
//     kernel, its first input; a Scalar does not count), exactly where kernels/cpu runs
//     its float64 kernels, and in float32 otherwise (F16 and BF16 are read as float32;
//     sums accumulate in float64 for every type); each output is rounded once to its
//     type (F64 to F16 or BF16 too, not through float32), with kernels/cpu's formulas
//     in its order of operations. Number arguments (alpha, eps, p, inv, value, the
//     optimizers' hyper-parameters, Adam's bias corrections computed in float64 as
//     there) reach a kernel rounded once to its compute type; a Scalar is read in
//     float64 where the output is F64, else as float32, as kernels/cpu reads it.
//     The kernels are compiled with -fmad=false (scripts/gpu/gen_kernels.sh, recorded
//     in gen/manifest.json): nvcc contracts no product and sum into a fused
//     multiply-add, so every one rounds on its own, as Go rounds them (its compiler
//     fuses none on amd64), in every kernel, not only those written with care; a
//     kernel that wants an FMA writes fma(), as only the fallback GEMM does (cuBLAS and
//     kernels/cpu's GEMM fuse theirs too). Results then differ from the CPU's in the
//     last bits only where the math library does (exp, log, tanh, erf, pow); the
//     float32 library functions compile to the same instructions with or without the
//     flag, the double log, log1p and pow lose one to three internal contractions to
//     it. Cross-entropy's register-row forward departs on purpose: ex2.approx terms,
//     float32 lane sums (src/loss.cu, lse_term; within 1e-6). Conversions (Copy, Fill) are kernels/cpu's bit for bit, but for the payload
//     of a NaN (the GPU's conversions make it the canonical one); so are dropout masks
//     (Philox4x32-10: the same mask on every backend for a seed). Products of F16 or
//     BF16 run on tensor cores with F32 accumulation; F32 products use TF32 only after
//     SetTF32(true); products of three F64 operands run on cuBLAS in
//     CUBLAS_COMPUTE_64F, any other mix with an F64 operand on the fallback GEMM in
//     double.
//   - Memory: outputs and temporaries of ops are the caller's, from the caching
//     allocator. The backend keeps two kinds of memory of its own, listed by Held: a
//     cuBLAS workspace per (handle, stream) from the device's caching allocator, sized
//     as PyTorch sizes it (WorkspaceBytes), so it shows in the allocator's statistics as
//     PyTorch's does; and, straight from the driver, 4 MiB and 256 bytes of scratch
//     per stream (reduction partials, cross-entropy's block parts and the tickets of
//     last blocks, zero between launches) and a 64-byte error flag (the record's
//     lock; the record too where page-locked host memory is not to be had), so that
//     no op makes an allocation the simulated devices do not make; and the 48-byte
//     error record in page-locked host memory (HostAlloc, Held's Host). Release gives
//     them all back.
//   - Host cost: each family's functions are resolved once; a launch passes its
//     by-value structs through device/cuda's pooled parameter block, with no heap
//     allocation (BenchmarkOpHostCost measures it on a GPU).
//   - Streams: kernels run on their first output's stream; cuBLAS handles are set to
//     it and given that stream's workspace. Concurrent methods are safe; ops that use
//     the scratch hold its stream's lock across their launches.
//
// The kernels are templates over their compute type, instantiated for float and double
// (the _f32 and _f64 entry points of each family; module.go's variants name them).
package cuda
