// Package cpu holds the CPU compute kernels: plain functions over memory the caller
// owns, in pure Go plus Go assembly for the GEMM micro-kernels and packing, exp, the
// optimizer steps, the elementwise arithmetic and the sums on amd64 (chosen at run time
// by CPU feature) and the GEMM micro-kernel on arm64 (pure-Go kernels everywhere else),
// parallel across goroutines for large inputs. Backend wraps them as a kernels.Backend
// over host memory: what the tensor package runs on cpu and on a simulated device with
// a backing store, and the reference every other backend is tested against. The op
// enums, Layout and the optimizer hyper-parameters are package kernels'.
//
// # Passing tensors
//
// Elementwise, copy, reduction and matmul kernels take Operands: a typed buffer plus a
// kernels.Layout (Shape, Strides and Offset, all counted in elements) built with F64,
// F32, F16, BF16, I32, I64, Bool or FromBytes. Strides may be 0 (broadcast) but not
// negative. Inputs broadcast to the output's shape by numpy rules, so a scalar is a
// rank-0 Operand over a one-element slice, and a view (transpose, permute, slice,
// expand) is just another Layout over the same buffer.
//
// # Precision
//
// A kernel computes in float64 when one of its operands is F64 and in float32
// otherwise: F16 and BF16 operands (and F32 ones in a float64 kernel) are converted a
// few hundred elements at a time in bounded scratch, and outputs are rounded to their
// type once, so no F64 value goes through float32. The kernels are written once over
// the type parameter float (float32 | float64); the float32 instantiation runs the
// same code as before float64 existed (math32, the vector exp), the float64 one
// package math. Matmul's float64 products run on gonum's Dgemm (product64); the float32
// GEMM below is untouched by them.
//
// Kernels over dense rows (softmax, layer norm, losses, embedding, optimizers) take
// []float32 or []float64 slices with explicit sizes and compute in that type. Sgemm
// takes row-major matrices with a leading dimension, as CBLAS does with CblasRowMajor.
//
// # The kernels
//
//   - Elementwise: Unary and UnaryBackward (neg, abs, exp, log, sqrt, tanh, sigmoid,
//     relu, gelu in tanh and erf forms), Binary and BinaryBackward (add, sub, mul,
//     div, pow, maximum, minimum; reduce a broadcast operand's gradient with Sum),
//     Axpy (gradient accumulation), Fill, Dropout (with DropoutMask, Philox4x32-10
//     keyed by a seed, so every backend draws the same mask).
//   - Copy: any dtype to any dtype, any layout to any layout. Materializing a view,
//     reshaping a non-contiguous tensor, and concat/stack (copy each input into its
//     slice of the output; the backward copies the slices of the gradient out) are all
//     Copy.
//   - Reductions: Sum, Mean, Max (with argmax) and MaxBackward over the dimensions
//     where the output has size 1.
//   - Matrix products: Matmul (batched, broadcast, strided, F64/F32/F16/BF16), Sgemm
//     and SgemmBatched on float32 slices; Gemm lets a system BLAS (package
//     kernels/cpu/blas) stand in for Builtin for float32 products.
//   - Softmax, LogSoftmax and their backward along any axis; CrossEntropy (mean,
//     ignore index) with its fused backward; MSE; LayerNorm with its backward.
//   - Embedding and its scatter-add backward; SGDStep and AdamStep (AdamW), in vector
//     loops that give each element the bits of the scalar loop; NonFinite and Unscale
//     for mixed precision.
//
// # Invariants
//
//   - Kernels never allocate outputs: the caller passes every output. A kernel
//     allocates at most small bounded scratch (iteration state; GEMM packing buffers,
//     kept from product to product, at most one set per task that ever ran at once;
//     output blocks and reductions' partials from sync.Pools, 8 to 16 bytes per
//     output and piece of a reduction (32768 elements, or a band of at least 256
//     rows); three 256×256 float64 blocks for a float64 product whose operands are
//     not F64 with a unit stride).
//   - Results are deterministic: the same inputs give the same bits on every run and
//     for every GOMAXPROCS. Reductions accumulate in float64 in an order that depends
//     only on the shapes (Sum says which), in pieces whose bounds depend only on the
//     shapes, combined in a fixed order; the vector loops (AVX2) give the bits of the
//     Go loops they stand in for. GEMM sums each output's products in k order however
//     its blocks are spread over goroutines, and so does gonum's Dgemm for float64. (A
//     system BLAS gives no such promise; Builtin does.)
//   - Aliasing: an elementwise output may be the very same memory as an input (same
//     buffer, same Layout); kernels over rows say which outputs may be their inputs.
//     Any other overlap between an output and an input gives unspecified results.
//   - Misuse (shapes that do not broadcast, layouts outside their buffer, lengths that
//     disagree, an integer output for a float kernel, an output with a stride of 0
//     along a dimension longer than 1) is a caller bug and panics with a message naming
//     the kernel and the shapes, before anything is written. Errors that depend on
//     data, an index out of range, are returned as *kernels.IndexError, also before
//     anything is written.
//   - Work below a size threshold runs on the calling goroutine (an elementwise
//     kernel then allocates nothing and takes no lock: forRange); above it a kernel
//     shares its pieces with the free workers of a pool of at most GOMAXPROCS-1
//     goroutines (parallel.go) and returns once every piece has run. The workers live
//     as long as the process: each watches for work for 200 µs after its last piece,
//     then sleeps, so an idle program burns no CPU. Kernels are safe to call from many
//     goroutines at once on disjoint outputs, and from inside each other.
package cpu
