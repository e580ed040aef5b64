// Package cpu holds the CPU compute kernels: plain functions over memory the caller
// owns, in pure Go (plus Go assembly for the GEMM micro-kernel on amd64), parallel
// across goroutines for large inputs.
//
// # Passing tensors
//
// Elementwise, copy and reduction kernels take Operands: a typed buffer plus a Layout
// (Shape, Strides and Offset, all counted in elements) built with F32, F16, BF16, I32,
// I64, Bool or FromBytes. Strides may be 0 (broadcast) but not negative. Inputs
// broadcast to the output's shape by numpy rules, so a scalar is a rank-0 Operand over
// a one-element slice. F16 and BF16 operands are converted to float32 in chunks of a
// few hundred elements on the stack and computed in float32; outputs are rounded to
// their type once.
//
// Kernels on dense float32 rows (GEMM, softmax, layer norm, losses, embedding,
// optimizers) take []float32 slices with explicit sizes; a matrix is row-major with a
// leading dimension (the stride between rows), as in CBLAS's row-major convention.
//
// # Invariants
//
//   - Kernels never allocate outputs: the caller passes every output. A kernel
//     allocates at most small bounded scratch (iteration state, GEMM packing buffers
//     from a sync.Pool).
//   - Results are deterministic: the same inputs give the same bits on every run and
//     for every GOMAXPROCS. Parallel reductions split work at boundaries that depend
//     only on the shapes, and combine partial results in a fixed order.
//   - Aliasing: an output may be the very same memory as an input (same buffer, same
//     Layout) for elementwise kernels; any other overlap between an output and an
//     input gives unspecified results. Kernels that say so work in place.
//   - Misuse (shapes that do not broadcast, layouts outside their buffer, lengths that
//     disagree) is a caller bug and panics with a message naming the kernel and the
//     shapes. Errors depending on data, such as an index out of range, are returned as
//     *IndexError.
//   - Work below a size threshold runs on the calling goroutine; above it a kernel
//     starts at most GOMAXPROCS-1 goroutines and waits for them before returning.
package cpu
