// common.cuh: what every kernel family of sublet's CUDA backend shares: the element
// type and op codes (equal to package dtype's and package kernels' values; the Go test
// TestCodesMatchHeaders checks them), the by-value structs the host fills (their Go
// mirrors are checked against zconst.go, generated from this header), typed loads and
// stores that convert exactly as kernels/cpu converts, index arithmetic, deterministic
// group reductions and the device-side error flag.
//
// Storage types are runtime codes (one kernel reads any mix of F64, F32, F16, BF16, I32,
// I64, Bool operands, as kernels/cpu's do); the compute type C is a template parameter,
// instantiated for float and for double, the _f32 and _f64 entry points of each family.
// The host picks the _f64 one whenever an operand is F64, as kernels/cpu picks its
// float64 kernels, so no F64 value goes through float32.
#pragma once

#include <cuda_fp16.h>

// Element types: package dtype's DType values.
#define DT_F32 1
#define DT_F16 2
#define DT_BF16 3
#define DT_I32 4
#define DT_I64 5
#define DT_BOOL 6
#define DT_F64 7
// DT_IMM marks an operand that is an immediate value (kernels.Scalar, or an absent
// operand read as 0): Walk.imm holds it.
#define DT_IMM 100

// Unary ops: package kernels' UnaryOp values.
#define OP_NEG 1
#define OP_ABS 2
#define OP_EXP 3
#define OP_LOG 4
#define OP_SQRT 5
#define OP_TANH 6
#define OP_SIGMOID 7
#define OP_RELU 8
#define OP_GELU_TANH 9
#define OP_GELU_ERF 10

// Binary ops: package kernels' BinaryOp values; ARG_A and ARG_B its Arg values.
#define OP_ADD 1
#define OP_SUB 2
#define OP_MUL 3
#define OP_DIV 4
#define OP_POW 5
#define OP_MAXIMUM 6
#define OP_MINIMUM 7
#define ARG_A 0
#define ARG_B 1

// Reduction modes.
#define RED_SUM 0
#define RED_MEAN 1
#define RED_MAX 2
#define RED_SUMSQ 3 // a sum of squares

// Ops that report data-dependent errors through ErrorFlag.op (kernels/cuda names them):
// an index outside its range (report), or elements outside the op's domain (report_outside).
#define ERR_CROSS_ENTROPY 1
#define ERR_CROSS_ENTROPY_BACKWARD 2
#define ERR_EMBEDDING 3
#define ERR_EMBEDDING_BACKWARD 4
#define ERR_MAX_BACKWARD 5
#define ERR_BINARY_CROSS_ENTROPY 6 // a range error: probabilities outside [0, 1] or NaN

#define MAX_RANK 16 // kernels.MaxRank
#define MAX_OPS 5   // operands of one elementwise kernel, the output included (the most:
                    // BinaryCrossEntropyWithLogitsBackward's dst, g, x, y, pos_weight)

// Threads per block of every kernel (its __launch_bounds__): enough to hide latency,
// few enough that no kernel spills at that bound.
#define BLOCK 256

// UNROLL is how many elements a thread of an elementwise kernel takes per round over a
// walk of one dimension (dense or broadcast operands, after merging): each a block
// apart, so that every load is coalesced, and all loaded before any is stored, so that
// UNROLL loads per operand are in flight at once.
#define UNROLL 4

// CAST_U and GELU_U are the words a thread of copy.cu's cast_to_f32 and of
// elementwise.cu's gelu_tanh takes per round (map_words): the fastest of those measured
// on an H100 (scripts/gpu/mb/bench16.cu).
#define CAST_U 4
#define GELU_U 2

// CE_U is the words a thread of loss.cu's cross_entropy_backward_words takes per round
// (map_words).
#define CE_U 4

// A reduction's partials of one output are combined by a thread of reduce_finish when
// they are at most FINISH_BLOCK_PIECES, else by a block (reduce_finish_block), and
// sum_all's last block combines them as these would. SUM_U is the words of 16 bytes
// a thread of sum_all has in flight (bench16: U=8 beat UNROLL's 4).
#define FINISH_BLOCK_PIECES 64
#define SUM_U 8

// A column sum over dense 16-byte words (reduce.cu's sum_cols) gives a thread one word of
// adjacent columns (4 of float32, 8 of F16 or BF16), a block CW_X words × CW_Y rows of
// threads, and a thread loads CW_U rows before adding any (the fastest of 4, 8 and 16
// on an H100: git show 9e2bb51:scripts/gpu/mb/gkred.cu); F16 and BF16 add each such
// round's CW_U elements of a column in float before adding them to the thread's double.
#define CW_X 32
#define CW_Y (BLOCK / CW_X)
#define CW_U 8
// CW_F is how many partials of a column sum_cols' last block loads before adding them
// (in piece order either way): the combination runs on the few blocks that finish last
// while the other SMs idle, so it waits for memory as few times as it can. 32 against 8
// took 16-bit column sums of 64M elements on an H100 from 2568-2592 to 2598-2610 GB/s
// (docs/benchmarks.md, 2026-12-07).
#define CW_F 32

// TILE is the side of copy.cu's copy_transpose tiles, in elements.
#define TILE 32

// TWORDS_COLS is the columns of copy.cu's copy_transpose_words tiles (each 128 bytes).
#define TWORDS_COLS 64

// A column sum (reduce.cu's reduce_cols) gives a thread COLS_V adjacent columns, a block
// COLS_X × COLS_Y threads, and a thread loads COLS_U rows before adding any.
#define COLS_V 4
#define COLS_X 32
#define COLS_Y (BLOCK / COLS_X)
#define COLS_U 4

// Walk is an elementwise kernel's iteration: the output's shape after merging
// dimensions (shape[rank-1] innermost), each operand's strides along it (in elements),
// the address of each operand's first element (its Offset applied), its type, and the
// value of an immediate operand. Operand 0 is the output.
struct Walk {
    long long size; // elements of the output
    int rank;       // dimensions, >= 1
    int ops;        // operands used
    long long shape[MAX_RANK];
    long long stride[MAX_OPS][MAX_RANK];
    unsigned long long base[MAX_OPS];
    int dtype[MAX_OPS];
    double imm[MAX_OPS];
};

// Reduction is a reduce kernel's iteration: the kept dimensions (enumerating the
// outputs; stride 0 is the output's, 1 the input's) and the reduced ones (the input's
// strides), each merged; the reduced elements of one output are cut into pieces of
// piece elements, pieces of them, combined in piece order.
struct Reduction {
    long long nOut, nRed;
    int krank, rrank;
    long long kshape[MAX_RANK];
    long long kstride[2][MAX_RANK];
    long long rshape[MAX_RANK];
    long long rstride[MAX_RANK];
    unsigned long long dst, src;
    int dtd, dts;
    long long piece;
    long long pieces;
};

// Acc is the running state of one output of a reduction, and a partial result in
// device memory between reduce kernels: a sum, or the maximum so far (a value of the
// compute type, which a double holds exactly) and its position (-1 before the first
// element).
struct Acc {
    double sum;
    double max;
    long long arg;
};

// Mat holds the matrix strides (in elements) of the fallback GEMM's operands dst, a, b;
// a Walk enumerates their batches.
struct Mat {
    long long rs[3], cs[3];
};

// ---- multi-tensor lists ----------------------------------------------------------------
//
// A multi-tensor kernel (an optimizer step or the unscale over all parameters) takes its
// tensors' table by value, as PyTorch's multi_tensor_apply does: nothing to upload, and
// a launch captured in a CUDA graph keeps its table. Each tensor is cut into chunks of
// LIST_CHUNK elements (its last one shorter); chunk[i] is tensor i's first chunk in the
// list's order and chunk[count] the list's chunks in all. Blocks stride over the
// chunks, and each finds its tensor with list_find. Tensors without elements are left
// out by the host. The lists' lengths keep a kernel's parameters under CUDA's 4 KiB.
#define LIST_CHUNK 2048
#define OPTIM_LIST 56
#define SCALE_LIST 128

// OptimList is the table of a multi-tensor optimizer step over contiguous parameters of
// one type T: parameter p, gradient g, state s0 (SGD's momentum buffer, Adam's m) and s1
// (Adam's v) of n elements each, and each tensor's own step numbers: Adam's step size
// lr/(1-β1^t) and 1/√(1-β2^t), already rounded to T by the host; SGD's first-step flag.
struct OptimList {
    long long chunk[OPTIM_LIST + 1];
    unsigned long long p[OPTIM_LIST], g[OPTIM_LIST], s0[OPTIM_LIST], s1[OPTIM_LIST];
    long long n[OPTIM_LIST];
    double stepSize[OPTIM_LIST], rbc2[OPTIM_LIST];
    int first[OPTIM_LIST];
    int count;
};

// ScaleList is the table of the multi-tensor unscale: contiguous gradients g of n
// elements of a float type dtype.
struct ScaleList {
    long long chunk[SCALE_LIST + 1];
    unsigned long long g[SCALE_LIST];
    long long n[SCALE_LIST];
    int dtype[SCALE_LIST];
    int count;
};

// ErrorFlag records the first data-dependent error of the kernels since the host last
// read and cleared it, from the lowest launch number: an index outside its range (the
// lowest position), or the count of a launch's elements outside the op's domain (a range
// error, summed over the launch's blocks). Kernels update it under *lock, so the record
// is whole. The record lives in page-locked host memory that kernels write across the
// bus, so that the host reads it after a synchronisation without a copy; the lock lives
// in device memory, as atomics on host memory are not guaranteed over PCIe (where the
// host memory is not to be had, kernels/cuda keeps the record in device memory too).
struct ErrorFlag {
    int *lock;         // device memory: 0 free, 1 held; set by the host, never changed
    unsigned int seq;  // the failing launch's number (from 1); 0: no error
    int op;            // ERR_*
    long long pos;     // index errors: position of the bad index in its operand, row-major
    long long index;   // its value
    long long limit;   // valid indices are [0, limit)
    long long count;   // range errors: elements outside the domain (NaN included)
};

// KERNEL declares an entry point, launched with blocks of BLOCK threads. ptxas then
// keeps registers few enough for many blocks an SM and may spill a few to do so;
// KERNEL_ROOM declares one that would spill (gen_kernels.sh fails on any stack frame):
// four blocks an SM are enough for it, which leaves it 64 registers a thread.
#define KERNEL extern "C" __global__ void __launch_bounds__(BLOCK)
#define KERNEL_ROOM extern "C" __global__ void __launch_bounds__(BLOCK, 4)

// NEG_INF is -Inf as a float (exact in double too).
#define NEG_INF (-__int_as_float(0x7f800000))

// ---- conversions, as kernels/cpu converts -------------------------------------------

__device__ __forceinline__ float bf16_to_f32(unsigned short h) { return __uint_as_float((unsigned int)h << 16); }

// f32_to_bf16 is dtype.F32ToBF16: round to nearest even; a NaN keeps its sign and upper
// payload and is made quiet.
__device__ __forceinline__ unsigned short f32_to_bf16(float f) {
    unsigned int b = __float_as_uint(f);
    if ((b & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((b >> 16) | 0x0040u);
    return (unsigned short)((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
}

__device__ __forceinline__ float f16_to_f32(unsigned short h) { return __half2float(__ushort_as_half(h)); }
__device__ __forceinline__ unsigned short f32_to_f16(float f) { return __half_as_ushort(__float2half_rn(f)); }

// to_odd_f32 is dtype's toOdd32: f rounded to float32 toward zero, its lowest bit set
// when that is inexact. Rounding it to nearest in F16 or BF16 (two or more bits fewer)
// rounds f itself once: an inexact value never lands on a tie of the narrower format.
__device__ __forceinline__ float to_odd_f32(double f) {
    float r = __double2float_rz(f);
    if ((double)r != f && f == f) r = __uint_as_float(__float_as_uint(r) | 1u);
    return r;
}

// to_f16 and to_bf16 round a value of the compute type to the 16-bit formats once, as
// dtype.F32ToF16 and dtype.F64ToF16 (BF16 alike) do.
__device__ __forceinline__ unsigned short to_f16(float f) { return f32_to_f16(f); }
__device__ __forceinline__ unsigned short to_f16(double f) { return f32_to_f16(to_odd_f32(f)); }
__device__ __forceinline__ unsigned short to_bf16(float f) { return f32_to_bf16(f); }
__device__ __forceinline__ unsigned short to_bf16(double f) { return f32_to_bf16(to_odd_f32(f)); }

// f64_to_int is kernels/cpu's f64ToInt: truncation toward zero, NaN to 0, saturation.
__device__ __forceinline__ long long f64_to_int(double f, long long lo, long long hi) {
    if (f != f) return 0;
    if (f <= (double)lo) return lo;
    if (f >= (double)hi) return hi;
    return (long long)f;
}

// ld reads element i of an operand of type dt at base as the compute type C, as
// kernels/cpu's loads convert (exactly, but for I64 to double and F64, I32 and I64 to
// float, which round to nearest); an immediate reads imm (the host rounded it).
template <typename C>
__device__ __forceinline__ C ld(unsigned long long base, int dt, long long i, double imm) {
    switch (dt) {
    case DT_F32: return (C)((const float *)base)[i];
    case DT_F64: return (C)((const double *)base)[i];
    case DT_F16: return (C)f16_to_f32(((const unsigned short *)base)[i]);
    case DT_BF16: return (C)bf16_to_f32(((const unsigned short *)base)[i]);
    case DT_I32: return (C)((const int *)base)[i];
    case DT_I64: return (C)((const long long *)base)[i];
    case DT_BOOL: return (C)((const unsigned char *)base)[i];
    }
    return (C)imm;
}

// st writes v, of the compute type, as element i of a float operand of type dt,
// rounded once to it.
template <typename C>
__device__ __forceinline__ void st(unsigned long long base, int dt, long long i, C v) {
    switch (dt) {
    case DT_F32: ((float *)base)[i] = (float)v; return;
    case DT_F64: ((double *)base)[i] = (double)v; return;
    case DT_F16: ((unsigned short *)base)[i] = to_f16(v); return;
    case DT_BF16: ((unsigned short *)base)[i] = to_bf16(v); return;
    }
}

// ---- 16-byte vectors -------------------------------------------------------------------
//
// A walk whose operands lie densely along the inner dimension moves 16 bytes per load
// and store (VEC elements of 4 or 2 bytes): the bandwidth of a memory system that
// serves 16-byte requests best. Elements convert as ld and st convert them.

// elem_size is the bytes of an element of dt (0 for an immediate).
__device__ __forceinline__ int elem_size(int dt) {
    switch (dt) {
    case DT_F16:
    case DT_BF16: return 2;
    case DT_F32:
    case DT_I32: return 4;
    case DT_I64:
    case DT_F64: return 8;
    case DT_BOOL: return 1;
    }
    return 0;
}

// vget reads element e of a word of dt as C, as ld does.
template <typename C>
__device__ __forceinline__ C vget(const uint4 &v, int dt, int e) {
    const unsigned int *u = (const unsigned int *)&v;
    const unsigned short *h = (const unsigned short *)&v;
    switch (dt) {
    case DT_F32: return (C)__uint_as_float(u[e]);
    case DT_I32: return (C)(int)u[e];
    case DT_F16: return (C)f16_to_f32(h[e]);
    case DT_BF16: return (C)bf16_to_f32(h[e]);
    }
    return (C)0;
}

// vset writes x as element e of a word of the float type dt, as st does.
template <typename C>
__device__ __forceinline__ void vset(uint4 &v, int dt, int e, C x) {
    unsigned int *u = (unsigned int *)&v;
    unsigned short *h = (unsigned short *)&v;
    switch (dt) {
    case DT_F32: u[e] = __float_as_uint((float)x); return;
    case DT_F16: h[e] = to_f16(x); return;
    case DT_BF16: h[e] = to_bf16(x); return;
    }
}

// vtype reads and writes the elements of one float type in 16-byte words: T is the
// element's storage (unsigned int for F32, unsigned short for F16 and BF16).
template <int DT> struct vtype;
template <> struct vtype<DT_F32> {
    static constexpr int n = 4;
    template <typename C> static __device__ __forceinline__ C get(const uint4 &v, int e) { return (C)__uint_as_float(((const unsigned int *)&v)[e]); }
    template <typename C> static __device__ __forceinline__ void set(uint4 &v, int e, C x) { ((unsigned int *)&v)[e] = __float_as_uint((float)x); }
};
template <> struct vtype<DT_F16> {
    static constexpr int n = 8;
    template <typename C> static __device__ __forceinline__ C get(const uint4 &v, int e) { return (C)f16_to_f32(((const unsigned short *)&v)[e]); }
    template <typename C> static __device__ __forceinline__ void set(uint4 &v, int e, C x) { ((unsigned short *)&v)[e] = to_f16(x); }
};
template <> struct vtype<DT_BF16> {
    static constexpr int n = 8;
    template <typename C> static __device__ __forceinline__ C get(const uint4 &v, int e) { return (C)bf16_to_f32(((const unsigned short *)&v)[e]); }
    template <typename C> static __device__ __forceinline__ void set(uint4 &v, int e, C x) { ((unsigned short *)&v)[e] = to_bf16(x); }
};

// vec_width returns how many elements the first n operands of w move per 16 bytes (4
// or 8, from the output's element size), or 0 when they cannot: the walk has at most
// two dimensions, the inner one a multiple of that; the output and every input that is
// not an immediate are dense along it (stride 1, elements of the output's size, each
// row starting on 16 bytes) or, inputs only, repeated along it (stride 0). With same
// set, the dense ones must also be of the output's type.
__device__ __forceinline__ int vec_width(const Walk &w, int n, bool same) {
    int es = elem_size(w.dtype[0]);
    if (w.rank > 2 || (es != 4 && es != 2)) return 0;
    int vec = 16 / es, in = w.rank - 1;
    if (w.shape[in] % vec != 0) return 0;
    for (int k = 0; k < n; k++) {
        if (w.dtype[k] == DT_IMM || (k > 0 && w.stride[k][in] == 0)) continue;
        if (w.stride[k][in] != 1 || elem_size(w.dtype[k]) != es || (w.base[k] & 15) != 0) return 0;
        if (same && w.dtype[k] != w.dtype[0]) return 0;
        if (w.rank == 2 && w.stride[k][0] % vec != 0) return 0;
    }
    return vec;
}

// ---- index arithmetic ---------------------------------------------------------------

// offsets writes the element offset of each of the first OPS operands of w for the
// output's element i (row-major). I is the index type: int when every offset fits.
template <int OPS, typename I>
__device__ __forceinline__ void offsets(const Walk &w, I i, I off[OPS]) {
#pragma unroll
    for (int k = 0; k < OPS; k++) off[k] = 0;
    for (int d = w.rank - 1; d >= 0; d--) {
        I n = (I)w.shape[d];
        I x = i % n;
        i /= n;
#pragma unroll
        for (int k = 0; k < OPS; k++) off[k] += x * (I)w.stride[k][d];
    }
}

// unravel returns the offset of element i of a walk over rank dimensions of shape with
// strides stride.
template <typename I>
__device__ __forceinline__ I unravel(I i, int rank, const long long *shape, const long long *stride) {
    I off = 0;
    for (int d = rank - 1; d >= 0; d--) {
        I n = (I)shape[d];
        off += (i % n) * (I)stride[d];
        i /= n;
    }
    return off;
}

// ---- deterministic group reductions -------------------------------------------------
//
// A group is a warp (G = 32) or a whole block (G = BLOCK). Lanes combine in a fixed
// butterfly, so the result depends on the data and G only, never on scheduling; every
// lane gets lane 0's result.

// warp_sum sums v over the warp in v's type.
template <typename T> __device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return __shfl_sync(0xffffffffu, v, 0);
}

// fmax_nan is the larger of a and b, NaN when either is (kernels/cpu's row maximum).
template <typename T> __device__ __forceinline__ T fmax_nan(T a, T b) { return (b > a || b != b) ? b : a; }

template <typename T> __device__ __forceinline__ T warp_max(T v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmax_nan(v, __shfl_xor_sync(0xffffffffu, v, o));
    return __shfl_sync(0xffffffffu, v, 0);
}

// group_sum sums v over the group in T, double or float (a float v given double shared
// memory is summed in double); G = BLOCK needs BLOCK/32 elements of shared memory in
// smem and every thread of the block to call it.
template <int G, typename T>
__device__ __forceinline__ T group_sum(T v, T *smem) {
    v = warp_sum(v);
    if (G == 32) return v;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) smem[warp] = v;
    __syncthreads();
    v = warp_sum(lane < G / 32 ? smem[lane] : (T)0);
    __syncthreads();
    return v;
}
template <int G> __device__ __forceinline__ double group_sum(float v, double *smem) { return group_sum<G>((double)v, smem); }

// group_max is the largest v of the group (NaN if any is); G = BLOCK needs BLOCK/32
// elements of shared memory in smem and every thread of the block to call it.
template <int G, typename T>
__device__ __forceinline__ T group_max(T v, T *smem) {
    v = warp_max(v);
    if (G == 32) return v;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) smem[warp] = v;
    __syncthreads();
    v = warp_max(lane < G / 32 ? smem[lane] : (T)NEG_INF);
    __syncthreads();
    return v;
}

// group_row is the row that this thread's group of G threads (a warp or the whole
// block; BLOCK/G groups a block) works on; group_lane is the thread's place in it.
template <int G> __device__ __forceinline__ long long group_row() { return (long long)blockIdx.x * (BLOCK / G) + threadIdx.x / G; }
template <int G> __device__ __forceinline__ int group_lane() { return threadIdx.x % G; }

// ---- row storage ----------------------------------------------------------------------
//
// The row kernels (softmax, layer norm, cross-entropy) read and write their row operands
// stored as S and compute in row_compute<S>::type: float and double rows as themselves,
// F16 and BF16 rows (f16_t, bf16_t: their bits) in float, converted exactly on load
// and rounded once on store, as kernels/cpu's rows16.go does.
struct f16_t {
    unsigned short bits;
};
struct bf16_t {
    unsigned short bits;
};
template <typename S> struct row_compute { typedef S type; };
template <> struct row_compute<f16_t> { typedef float type; };
template <> struct row_compute<bf16_t> { typedef float type; };

// from_bits converts the bits of a 16-bit element of S to float; to_bits rounds back.
template <typename S> __device__ __forceinline__ float from_bits(unsigned short h);
template <> __device__ __forceinline__ float from_bits<f16_t>(unsigned short h) { return f16_to_f32(h); }
template <> __device__ __forceinline__ float from_bits<bf16_t>(unsigned short h) { return bf16_to_f32(h); }
template <typename S> __device__ __forceinline__ unsigned short to_bits(float f);
template <> __device__ __forceinline__ unsigned short to_bits<f16_t>(float f) { return to_f16(f); }
template <> __device__ __forceinline__ unsigned short to_bits<bf16_t>(float f) { return to_bf16(f); }

// row_get reads element i of a row as its compute type; row_put writes v rounded to S.
__device__ __forceinline__ float row_get(const float *p, long long i) { return p[i]; }
__device__ __forceinline__ double row_get(const double *p, long long i) { return p[i]; }
template <typename S> __device__ __forceinline__ float row_get(const S *p, long long i) { return from_bits<S>(p[i].bits); }
__device__ __forceinline__ void row_put(float *p, long long i, float v) { p[i] = v; }
__device__ __forceinline__ void row_put(double *p, long long i, double v) { p[i] = v; }
template <typename S> __device__ __forceinline__ void row_put(S *p, long long i, float v) { p[i].bits = to_bits<S>(v); }

// pack2 rounds lo and hi to S in one instruction (cvt.rn.f16x2.f32, cvt.rn.bf16x2.f32:
// to nearest even, as to_bits; a NaN comes out canonical, which is what to_bits makes of
// the canonical NaN that float arithmetic gives), lo in the lower half.
template <typename S> __device__ __forceinline__ unsigned int pack2(float lo, float hi);
template <> __device__ __forceinline__ unsigned int pack2<f16_t>(float lo, float hi) {
    unsigned int r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}
template <> __device__ __forceinline__ unsigned int pack2<bf16_t>(float lo, float hi) {
    unsigned int r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

// unpack4 converts the four 16-bit elements of S in w (8 bytes, the lower first) to
// float; pack4 rounds four floats into them, two an instruction (pack2: the bits of
// to_bits for the results of float arithmetic, whose NaNs are canonical; BF16's to_bits
// alone takes five integer instructions an element, which kept BF16 rows below F16's
// rate).
template <typename S> __device__ __forceinline__ void unpack4(float *v, uint2 w) {
    v[0] = from_bits<S>((unsigned short)(w.x & 0xffffu)), v[1] = from_bits<S>((unsigned short)(w.x >> 16));
    v[2] = from_bits<S>((unsigned short)(w.y & 0xffffu)), v[3] = from_bits<S>((unsigned short)(w.y >> 16));
}
template <typename S> __device__ __forceinline__ uint2 pack4(const float *v) { return make_uint2(pack2<S>(v[0], v[1]), pack2<S>(v[2], v[3])); }

// ---- contiguous words ------------------------------------------------------------------
//
// A kernel for one op over contiguous operands (its own entry point, compiled for that op
// and those types alone: no switch over ops or types, no other path's registers) walks
// n words of input W (8 or 16 bytes): U words a thread per round, a block apart so that
// every load is coalesced, all U loaded before any is stored, the grid striding; store(i,
// x) writes word i's outputs from its input word x. The host checks that n plus one
// round of the grid fits an int.
template <int U, typename W, typename F>
__device__ __forceinline__ void map_words(const W *__restrict__ src, int n, F store) {
    for (int base = blockIdx.x * (BLOCK * U); base < n; base += gridDim.x * (BLOCK * U)) {
        W x[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            int i = base + u * BLOCK + threadIdx.x;
            if (i < n) x[u] = src[i];
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            int i = base + u * BLOCK + threadIdx.x;
            if (i < n) store(i, x[u]);
        }
    }
}

// ---- rows kept in registers --------------------------------------------------------
//
// A row kernel over rows of up to G·ROW_CHUNKS·4 elements (float32, F16 or BF16) keeps its
// row in registers, as float: lane l of its group of G holds chunks l, l + G, ..., l +
// (ROW_CHUNKS-1)·G of 4 elements each (chunk c: elements 4c .. 4c+3), read from memory
// once. This partition fixes the order of every sum, so it is the same for every
// storage type: a 16-bit row gives the bits of its float32 copy. With V16 every load
// and store moves 16 bytes (the caller checked 16-byte addresses, and n % 4 == 0 for
// float32 rows, n % 8 == 0 for 16-bit ones): a float32 chunk is one 16-byte word; a
// 16-bit chunk is 8 bytes, so lanes 2m and 2m+1 load the chunk pairs (2m, 2m+1) of
// two slots, one each, and swap halves (row_load, row_store). Without V16, elements
// move one at a time. The elements and their order are the same either way, so the
// bits are too. Positions at or past n hold fill and are never stored.
//
// The helpers take the chunk slots a lane has, C (ROW_CHUNKS unless said): a kernel
// with fewer slots takes shorter rows in fewer registers (more blocks an SM), and for
// rows of up to G·C·4 its lanes hold the same chunks in the same slots, so it gives the
// same sums and bits as the ROW_CHUNKS form. ROW_CHUNKS_BLOCK4 is the slots of the
// 16-bit block4 kernels: rows of up to BLOCK·4·4 (4096), where the block form leaves
// half its slots empty.
#define ROW_CHUNKS 8
#define ROW_CHUNKS_BLOCK4 4

// REGS_FORMS instantiates a register-row family's kernels for rows of S (named SN):
// K(S, SN, G, C, GN, V16, VN) defines one kernel, a warp (G 32) or a block (G BLOCK)
// a row, C chunk slots a lane, rows of 16-byte words or not (V16, the _v16 names).
// REGS16_FORMS adds, for 16-bit rows, the block4 form of up to BLOCK·ROW_CHUNKS_BLOCK4·4
// (4096) elements: the block form's bits in fewer registers.
#define REGS_FORMS(K, S, SN)                      \
    K(S, SN, 32, ROW_CHUNKS, warp, false, )       \
    K(S, SN, 32, ROW_CHUNKS, warp, true, _v16)    \
    K(S, SN, BLOCK, ROW_CHUNKS, block, false, )   \
    K(S, SN, BLOCK, ROW_CHUNKS, block, true, _v16)
#define REGS16_FORMS(K, S, SN)                              \
    REGS_FORMS(K, S, SN)                                    \
    K(S, SN, BLOCK, ROW_CHUNKS_BLOCK4, block4, false, )     \
    K(S, SN, BLOCK, ROW_CHUNKS_BLOCK4, block4, true, _v16)

// chunk_load reads the chunk of 4 elements at position j of r into v (fill at n or
// past), chunk_store writes the ones below n.
template <bool V16>
__device__ __forceinline__ void chunk_load(float *v, const float *r, long long j, long long n, float fill) {
    if (V16) { // n % 4 == 0: the chunk is wholly in or wholly out
        float4 a = j < n ? *(const float4 *)(r + j) : make_float4(fill, fill, fill, fill);
        v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w;
        return;
    }
#pragma unroll
    for (int k = 0; k < 4; k++) v[k] = j + k < n ? r[j + k] : fill;
}

// chunk_load of a 16-bit row: with V16 (n % 8 == 0, r on 16 bytes), one 8-byte load.
template <bool V16, typename S>
__device__ __forceinline__ void chunk_load(float *v, const S *r, long long j, long long n, float fill) {
    if (V16) {
        if (j < n) {
            unpack4<S>(v, *(const uint2 *)(r + j));
        } else {
#pragma unroll
            for (int k = 0; k < 4; k++) v[k] = fill;
        }
        return;
    }
#pragma unroll
    for (int k = 0; k < 4; k++) v[k] = j + k < n ? row_get(r, j + k) : fill;
}

template <bool V16>
__device__ __forceinline__ void chunk_store(float *r, const float *v, long long j, long long n) {
    if (V16) {
        if (j < n) *(float4 *)(r + j) = make_float4(v[0], v[1], v[2], v[3]);
        return;
    }
#pragma unroll
    for (int k = 0; k < 4; k++)
        if (j + k < n) r[j + k] = v[k];
}

template <bool V16, typename S>
__device__ __forceinline__ void chunk_store(S *r, const float *v, long long j, long long n) {
    if (V16) {
        if (j < n) *(uint2 *)(r + j) = pack4<S>(v);
        return;
    }
#pragma unroll
    for (int k = 0; k < 4; k++)
        if (j + k < n) row_put(r, j + k, v[k]);
}

// chunk_at is the position of a lane's chunk i in its row.
template <int G> __device__ __forceinline__ long long chunk_at(int lane, int i) { return 4 * (long long)(lane + G * i); }

template <int G, bool V16, int C = ROW_CHUNKS>
__device__ __forceinline__ void row_load(float *v, const float *r, long long n, int lane, float fill) {
#pragma unroll
    for (int i = 0; i < C; i++) chunk_load<V16>(v + 4 * i, r, chunk_at<G>(lane, i), n, fill);
}

// pair_store writes a lane's chunks i and i+1 (i even), their 8 elements in p: a
// step of row_store.
template <int G, bool V16>
__device__ __forceinline__ void pair_store(float *r, const float *p, int i, long long n, int lane) {
    chunk_store<V16>(r, p, chunk_at<G>(lane, i), n);
    chunk_store<V16>(r, p + 4, chunk_at<G>(lane, i + 1), n);
}

// load_pair reads a 16-bit row's chunks of slots i and i+1 (i even) for a lane (V16):
// lane 2m loads chunks 2m and 2m+1 of slot i (16 bytes at chunk_at(2m, i)), lane 2m+1
// those of slot i+1, and each passes its partner the half it holds for it: the even
// lane keeps the first half and receives the first of the odd lane's, the odd lane
// keeps its second and receives the even lane's second. a and b are the lane's chunks
// of slots i and i+1 as bits (0 at n or past). Every lane of the warp runs it.
template <int G, typename S>
__device__ __forceinline__ void load_pair(const S *r, long long n, int lane, int i, uint2 &a, uint2 &b) {
    int odd = lane & 1;
    long long j = chunk_at<G>(lane - odd, i + odd); // the pair this lane loads; n % 8 == 0: wholly in or out
    uint4 w = j < n ? *(const uint4 *)(r + j) : make_uint4(0, 0, 0, 0);
    uint2 keep = odd ? make_uint2(w.z, w.w) : make_uint2(w.x, w.y);
    uint2 give = odd ? make_uint2(w.x, w.y) : make_uint2(w.z, w.w);
    uint2 got = make_uint2(__shfl_xor_sync(0xffffffffu, give.x, 1), __shfl_xor_sync(0xffffffffu, give.y, 1));
    a = odd ? got : keep;
    b = odd ? keep : got;
}

// row_load_bits reads a 16-bit row as row_load does but keeps each chunk's bits (a
// uint2 of 4 elements, the lower first; 0 bits, +0, at n or past): half the registers
// of floats, converted where they are used (bits_at).
template <int G, bool V16, int C = ROW_CHUNKS, typename S>
__device__ __forceinline__ void row_load_bits(uint2 *raw, const S *r, long long n, int lane) {
#pragma unroll
    for (int i = 0; i < C; i += V16 ? 2 : 1) {
        if (V16) {
            load_pair<G>(r, n, lane, i, raw[i], raw[i + 1]);
            continue;
        }
        long long j = chunk_at<G>(lane, i);
        unsigned int h[4];
#pragma unroll
        for (int k = 0; k < 4; k++) h[k] = j + k < n ? r[j + k].bits : 0;
        raw[i] = make_uint2(h[0] | h[1] << 16, h[2] | h[3] << 16);
    }
}

// bits_at is element k of a lane's row_load_bits row as float.
template <typename S> __device__ __forceinline__ float bits_at(const uint2 *raw, int k) {
    unsigned int h = k % 4 < 2 ? raw[k / 4].x : raw[k / 4].y;
    return from_bits<S>((unsigned short)(k % 2 ? h >> 16 : h & 0xffffu));
}

// row_load of a 16-bit row: with V16, load_pair's chunks converted as they come.
template <int G, bool V16, int C = ROW_CHUNKS, typename S>
__device__ __forceinline__ void row_load(float *v, const S *r, long long n, int lane, float fill) {
    if (!V16) {
#pragma unroll
        for (int i = 0; i < C; i++) chunk_load<false>(v + 4 * i, r, chunk_at<G>(lane, i), n, fill);
        return;
    }
#pragma unroll
    for (int i = 0; i < C; i += 2) {
        uint2 a, b;
        load_pair<G>(r, n, lane, i, a, b);
        unpack4<S>(v + 4 * i, a);
        unpack4<S>(v + 4 * (i + 1), b);
#pragma unroll
        for (int s = 0; s < 2; s++) // n % 8 == 0: a chunk is wholly in or wholly out
            if (chunk_at<G>(lane, i + s) >= n) {
#pragma unroll
                for (int k = 0; k < 4; k++) v[4 * (i + s) + k] = fill;
            }
    }
}

// pair_store of a 16-bit row: with V16, row_load_bits' exchange reversed, then 16 bytes
// a lane; every lane of the warp runs it.
template <int G, bool V16, typename S>
__device__ __forceinline__ void pair_store(S *r, const float *p, int i, long long n, int lane) {
    if (!V16) {
        chunk_store<false>(r, p, chunk_at<G>(lane, i), n);
        chunk_store<false>(r, p + 4, chunk_at<G>(lane, i + 1), n);
        return;
    }
    int odd = lane & 1;
    uint2 lo = pack4<S>(p), hi = pack4<S>(p + 4);
    uint2 give = odd ? lo : hi;
    uint2 got = make_uint2(__shfl_xor_sync(0xffffffffu, give.x, 1), __shfl_xor_sync(0xffffffffu, give.y, 1));
    long long j = chunk_at<G>(lane - odd, i + odd);
    uint4 a = odd ? make_uint4(got.x, got.y, hi.x, hi.y) : make_uint4(lo.x, lo.y, got.x, got.y);
    if (j < n) *(uint4 *)(r + j) = a;
}

// row_store writes a lane's register row (positions below n), a pair of chunks at a time.
template <int G, bool V16, int C = ROW_CHUNKS, typename S>
__device__ __forceinline__ void row_store(S *r, const float *v, long long n, int lane) {
#pragma unroll
    for (int i = 0; i < C; i += 2) pair_store<G, V16>(r, v + 4 * i, i, n, lane);
}

// reg_row is a lane's register row for a kernel that reads it several times: float32
// rows as floats (row_load, fill 0), 16-bit rows as their bits (row_load_bits),
// converted at each use (at), in half the registers. The values are the same either
// way.
template <typename S, int C = ROW_CHUNKS> struct reg_row {
    uint2 bits[C];
    template <int G, bool V16> __device__ __forceinline__ void load(const S *r, long long n, int lane) { row_load_bits<G, V16, C>(bits, r, n, lane); }
    __device__ __forceinline__ float at(int k) const { return bits_at<S>(bits, k); }
};
template <int C> struct reg_row<float, C> {
    float v[4 * C];
    template <int G, bool V16> __device__ __forceinline__ void load(const float *r, long long n, int lane) { row_load<G, V16, C>(v, r, n, lane, 0); }
    __device__ __forceinline__ float at(int k) const { return v[k]; }
};

// reg_row_each is reg_row<bf16_t> with each conversion an asm volatile, so that ptxas
// converts at each use instead of keeping converted elements live: BF16 layer norm's
// forward over rows of 1024 then takes 55 registers instead of 73-74 (four blocks an
// SM instead of three) and ran at 91.7% of a copy instead of 89.1% on the H100
// (rows16's harness); F16's, at 54, lost a point with it. The same values.
struct reg_row_each {
    uint2 bits[ROW_CHUNKS];
    template <int G, bool V16> __device__ __forceinline__ void load(const bf16_t *r, long long n, int lane) { row_load_bits<G, V16>(bits, r, n, lane); }
    __device__ __forceinline__ float at(int k) const {
        unsigned int h = k % 4 < 2 ? bits[k / 4].x : bits[k / 4].y, u;
        if (k % 2) asm volatile("and.b32 %0, %1, 0xffff0000;" : "=r"(u) : "r"(h));
        else asm volatile("shl.b32 %0, %1, 16;" : "=r"(u) : "r"(h));
        return __uint_as_float(u);
    }
};

// row_in says whether element k of a lane's register row (row_load's v[k]) is at a
// position below n; with V16, n is a multiple of 4, so its chunk says. Positions grow
// with k, so a loop over k may stop at the first false: ptxas then keeps its sums'
// operands in fewer registers (72 instead of 128 for layer norm's variance).
template <int G, bool V16>
__device__ __forceinline__ bool row_in(int k, long long n, int lane) { return chunk_at<G>(lane, k / 4) + (V16 ? 0 : k % 4) < n; }

// ---- the error flag -----------------------------------------------------------------

// report records an index outside [0, limit) at pos, found by launch seq of op, unless
// the flag already holds an earlier one. Rare by nature, so a spin lock serves (lanes
// of one warp make progress on their own from sm_70 on).
__device__ __noinline__ void report(ErrorFlag *f, unsigned int seq, int op, long long pos, long long index, long long limit) {
    int *lock = f->lock;
    while (atomicCAS(lock, 0, 1) != 0) __nanosleep(64);
    __threadfence_system();
    volatile ErrorFlag *v = f;
    if (v->seq == 0 || seq < v->seq || (seq == v->seq && pos < v->pos)) {
        v->seq = seq;
        v->op = op;
        v->pos = pos;
        v->index = index;
        v->limit = limit;
        v->count = 0;
    }
    __threadfence_system(); // the record's stores reach host memory before another thread may take the lock
    atomicExch(lock, 0);
}

// report_count adds count elements outside op's domain, found by launch seq, unless the
// flag already holds an earlier launch's error (a later launch's gives way).
__device__ __noinline__ void report_count(ErrorFlag *f, unsigned int seq, int op, long long count) {
    int *lock = f->lock;
    while (atomicCAS(lock, 0, 1) != 0) __nanosleep(64);
    __threadfence_system();
    volatile ErrorFlag *v = f;
    if (v->seq == 0 || seq < v->seq) {
        v->seq = seq;
        v->op = op;
        v->pos = 0;
        v->index = 0;
        v->limit = 0;
        v->count = count;
    } else if (seq == v->seq) {
        v->count += count;
    }
    __threadfence_system(); // the record's stores reach host memory before another thread may take the lock
    atomicExch(lock, 0);
}

// report_outside reports the n elements outside op's domain that this thread of launch
// seq found. Every thread of the block calls it, after its last element: the block's
// counts are summed in shared memory (integers: any order gives the same sum) and one
// thread takes the lock; a block with nothing to report passes one barrier only.
__device__ __forceinline__ void report_outside(ErrorFlag *f, unsigned int seq, int op, unsigned long long n) {
    if (!__syncthreads_or(n != 0)) return;
    __shared__ unsigned long long total;
    if (threadIdx.x == 0) total = 0;
    __syncthreads();
    if (n != 0) atomicAdd(&total, n);
    __syncthreads();
    if (threadIdx.x == 0) report_count(f, seq, op, (long long)total);
}

// list_chunk finds chunk c of a list (OptimList, ScaleList): its tensor i, the last
// below count with chunk[i] <= c, and its elements [lo, hi) of that tensor. Every
// thread of a block asks for the same c, so the table's reads are uniform.
template <typename L> __device__ __forceinline__ void list_chunk(const L &l, long long c, int &i, long long &lo, long long &hi) {
    int a = 0, b = l.count - 1;
    while (a < b) {
        int mid = (a + b + 1) >> 1;
        if (l.chunk[mid] <= c) {
            a = mid;
        } else {
            b = mid - 1;
        }
    }
    i = a;
    lo = (c - l.chunk[a]) * LIST_CHUNK;
    hi = min(lo + LIST_CHUNK, l.n[a]);
}

// last_of reports, to every thread of the block, whether this block is the last of the
// n blocks that share *ticket to finish, as last_block does for a whole grid.
__device__ __forceinline__ bool last_of(unsigned int *ticket, unsigned int n) {
    __shared__ bool last;
    __threadfence(); // this block's results are seen by every block before its ticket is
    __syncthreads();
    if (threadIdx.x == 0) {
        last = atomicAdd(ticket, 1u) == n - 1;
        if (last) *ticket = 0;
    }
    __syncthreads();
    if (last) __threadfence();
    return last;
}

// last_block reports, to every thread of the block, whether this block is the last of
// the grid to finish: each takes a ticket (*ticket counts them) once its results are
// written and fenced, and the last sets the counter back to 0 (other blocks took
// theirs), so that the next launch, or a CUDA graph's replay, finds it zero. The
// tickets sit after a stream's scratch (kernels/cuda's scratch.go); a stream runs one
// kernel at a time, and each resets its own before it ends. Every thread calls it.
__device__ __forceinline__ bool last_block(unsigned int *ticket) { return last_of(ticket, gridDim.x); }

// grid_stride loops i over [0, n) across the whole grid.
#define GRID_STRIDE(I, i, n) for (I i = (I)blockIdx.x * BLOCK + threadIdx.x; i < (I)(n); i += (I)gridDim.x * BLOCK)
