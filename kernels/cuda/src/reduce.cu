// reduce.cu: Sum, Mean, Max (with its argmax) and MaxBackward over a Reduction, and
// NonFinite. Deterministic without float atomics: each output's reduced elements are
// cut into pieces whose bounds depend on the shapes alone; a piece is folded by one
// thread (reduce_thread: outputs next to each other in memory, reduced elements far
// apart) or one block in a fixed tree (reduce_block); with several pieces each writes a
// partial and reduce_finish combines them in piece order. Sums accumulate in double,
// as kernels/cpu's do; elements are read, and maxima compared, in the compute type C:
// double when the input or the output is F64 (the _f64 kernels), float otherwise. The
// kernels over 16-byte words of dense F16 and BF16 (sum_all, sum_rows, sum_cols) and
// float32 columns (sum_cols) are one launch each; the 16-bit ones add each thread's
// elements of an output read in one round in float first (fold_words' RUNS, sum_cols'
// runs), then that run in double: fewer conversions and double additions, an order
// that still depends on the shapes and the 16-byte phase alone.
#include "common.cuh"

#include <cuda_bf16.h>
#include <type_traits>

__device__ __forceinline__ Acc acc_zero() { return Acc{0.0, 0.0, -1}; }

// max_better reports whether (x at xi) replaces (m at mi) as the maximum: NaN beats
// every number, then the larger value, then the lower position. The order is total, so
// the result does not depend on the order of combination: the first NaN, else the
// first of equal maxima, as kernels/cpu finds them.
// better is max_better in the value type T and position type I (max_rows: float, int).
template <typename T, typename I>
__device__ __forceinline__ bool better(T x, I xi, T m, I mi) {
    if (xi < 0) return false;
    if (mi < 0) return true;
    bool xn = x != x, mn = m != m;
    if (xn || mn) return xn && (!mn || xi < mi);
    if (x != m) return x > m;
    return xi < mi;
}
__device__ __forceinline__ bool max_better(double x, long long xi, double m, long long mi) { return better(x, xi, m, mi); }

// acc_add folds x, at position r, into a: for a sum of squares (RED_SUMSQ) x·x rounded
// to C, as Mul rounds it.
template <typename C>
__device__ __forceinline__ void acc_add(Acc &a, int mode, C x, long long r) {
    if (mode == RED_SUMSQ) {
        a.sum += (double)(x * x);
    } else if (mode != RED_MAX) {
        a.sum += (double)x;
    } else if (max_better(x, r, a.max, a.arg)) {
        a.max = x;
        a.arg = r;
    }
}

__device__ __forceinline__ void acc_merge(Acc &a, bool isMax, const Acc &b) {
    if (!isMax) {
        a.sum += b.sum;
    } else if (max_better(b.max, b.arg, a.max, a.arg)) {
        a.max = b.max;
        a.arg = b.arg;
    }
}

// finish_out writes output o's result: the sum (or mean) rounded to C, then to the
// output's type, as kernels/cpu rounds it.
template <typename C>
__device__ __forceinline__ void finish_out(const Reduction &r, int mode, long long *idx, long long o, const Acc &a) {
    long long d = unravel<long long>(o, r.krank, r.kshape, r.kstride[0]);
    if (mode == RED_MAX) {
        st<C>(r.dst, r.dtd, d, (C)a.max);
        idx[o] = a.arg;
        return;
    }
    double v = a.sum;
    if (mode == RED_MEAN) v *= 1.0 / (double)r.nRed; // NaN for an empty reduction, as kernels/cpu
    st<C>(r.dst, r.dtd, d, (C)v);
}

// Partials are piece-major: part[c * nOut + o] is piece c of output o, so that threads
// of consecutive outputs write, and reduce_finish's threads read, consecutive partials
// (output-major, a warp's 32 accesses would fall 32 cache lines apart).

// fold_piece folds the reduced elements [lo, hi) of the output whose input elements
// start at src offset base, stepping by step from lo. Over one reduced dimension it
// keeps UNROLL accumulators, element j of each round of UNROLL steps going to
// accumulator j, combined in that order at the end: UNROLL loads in flight, and an
// order that depends on the shapes alone.
template <typename C>
__device__ __forceinline__ Acc fold_piece(const Reduction &r, int mode, long long base, long long lo, long long hi, long long step) {
    bool isMax = mode == RED_MAX;
    Acc a = acc_zero();
    if (r.rrank == 1) {
        long long s = r.rstride[0], e = lo;
        Acc u[UNROLL];
#pragma unroll
        for (int j = 0; j < UNROLL; j++) u[j] = acc_zero();
        for (; e + (UNROLL - 1) * step < hi; e += UNROLL * step) {
            C x[UNROLL];
#pragma unroll
            for (int j = 0; j < UNROLL; j++) x[j] = ld<C>(r.src, r.dts, base + (e + j * step) * s, 0);
#pragma unroll
            for (int j = 0; j < UNROLL; j++) acc_add(u[j], mode, x[j], e + j * step);
        }
#pragma unroll
        for (int j = 0; j < UNROLL - 1; j++) { // the last round, short of UNROLL
            long long ej = e + j * step;
            if (ej < hi) acc_add(u[j], mode, ld<C>(r.src, r.dts, base + ej * s, 0), ej);
        }
#pragma unroll
        for (int j = 0; j < UNROLL; j++) acc_merge(a, isMax, u[j]);
        return a;
    }
    for (long long e = lo; e < hi; e += step) {
        long long off = base + unravel<long long>(e, r.rrank, r.rshape, r.rstride);
        acc_add(a, mode, ld<C>(r.src, r.dts, off, 0), e);
    }
    return a;
}

// reduce_thread_k: thread t folds piece t / nOut of output t % nOut in order.
template <typename C>
__device__ __forceinline__ void reduce_thread_k(const Reduction &r, int mode, long long *idx, Acc *part) {
    bool isMax = mode == RED_MAX;
    long long total = r.nOut * r.pieces;
    GRID_STRIDE(long long, t, total) {
        long long o = t % r.nOut, c = t / r.nOut;
        long long base = unravel<long long>(o, r.krank, r.kshape, r.kstride[1]);
        long long lo = c * r.piece, hi = min(lo + r.piece, r.nRed);
        Acc a = fold_piece<C>(r, mode, base, lo, hi, 1);
        if (r.pieces == 1) finish_out<C>(r, mode, idx, o, a);
        else part[c * r.nOut + o] = a;
    }
}

// run_of is a float run of fold_words and sum_cols: element e of the first m of the U
// words x of the float type DT, squared when sq, summed in C in word order.
template <typename C, int DT, int U>
__device__ __forceinline__ C run_of(const uint4 *x, int e, int m, bool sq) {
    C f = 0;
#pragma unroll
    for (int u = 0; u < U; u++) {
        C v = vtype<DT>::template get<C>(x[u], e);
        if (u < m) f += sq ? v * v : v;
    }
    return f;
}

// fold_words is the share of lane j of a group of G threads (a block or a warp) in
// the reduction of the elements [lo, hi) of a dense reduced dimension of the float type
// DT, starting at src offset base: it reads the 16-byte words j, j+G, ... from the first
// word boundary at or after lo, UNROLL words in flight, then the element j of the head
// before that boundary and of the tail after the last whole word (U words in flight:
// sum_all asks for more than UNROLL; the order is the same; positions and word
// numbers of type I: max_rows asks for int, which its rows fit). A sum keeps an
// accumulator per element of a word (combined in order); a maximum one Acc, whose
// total order makes the result independent of the reading order. With RUNS (a sum in
// float, C), element e of a round's U words is summed in C in word order first and the
// run added to its double accumulator: a conversion to double and a double addition
// per U elements instead of per element, the run's rounding within (U-1)·2⁻²⁴ of its
// magnitudes. The order of a sum depends on the shapes and the 16-byte phase of the
// input only.
template <typename C, int DT, int G, int U = UNROLL, typename I = long long, bool RUNS = false>
__device__ __forceinline__ Acc fold_words(const Reduction &r, int mode, long long base, long long lo, long long hi, int j) {
    bool isMax = mode == RED_MAX, sq = mode == RED_SUMSQ;
    using V = vtype<DT>;
    constexpr int N = V::n, ES = 16 / N;
    unsigned long long start = r.src + (unsigned long long)base * ES; // element 0's address
    long long e0 = min(hi, lo + (long long)((16 - (start + lo * ES) % 16) % 16) / ES);
    long long words = (hi - e0) / N, e1 = e0 + words * N;
    const uint4 *w = (const uint4 *)(start + e0 * ES);
    double d[N];
#pragma unroll
    for (int e = 0; e < N; e++) d[e] = 0;
    // The words' maximum: a lane meets its positions in increasing order, so a later
    // element replaces the kept one only when max_better would say so for a later
    // position (a NaN over a number, a larger number), compared in C, not in double
    // with positions.
    C m = (C)NEG_INF;
    I at = -1, first = (I)e0, n = (I)words;
    auto see = [&](C v, I pos) {
        if (at < 0 || v > m || (v != v && m == m)) m = v, at = pos;
    };
    I i = j;
    for (; i + (U - 1) * G < n; i += U * G) {
        uint4 x[U];
#pragma unroll
        for (int u = 0; u < U; u++) x[u] = w[i + u * G];
        if (RUNS && !isMax) {
#pragma unroll
            for (int e = 0; e < N; e++) d[e] += (double)run_of<C, DT, U>(x, e, U, sq);
            continue;
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
#pragma unroll
            for (int e = 0; e < N; e++) {
                C v = V::template get<C>(x[u], e);
                if (isMax) see(v, first + (i + u * G) * N + e);
                else d[e] += (double)(sq ? v * v : v);
            }
        }
    }
    for (; i < n; i += G) {
        uint4 x = w[i];
#pragma unroll
        for (int e = 0; e < N; e++) {
            C v = V::template get<C>(x, e);
            if (isMax) see(v, first + i * N + e);
            else d[e] += (double)(sq ? v * v : v);
        }
    }
    Acc a = acc_zero();
    if (isMax && at >= 0) a.max = m, a.arg = at;
#pragma unroll
    for (int e = 0; e < N; e++) a.sum += d[e];
    long long h = lo + j, t = e1 + j;
    if (h < e0) acc_add(a, mode, ld<C>(r.src, r.dts, base + h, 0), h);
    if (t < hi) acc_add(a, mode, ld<C>(r.src, r.dts, base + t, 0), t);
    return a;
}

// by_words reports whether a reduction can read r's input in 16-byte words
// (fold_words): one dense reduced dimension of a float type of 4 or 2 bytes.
__device__ __forceinline__ bool by_words(const Reduction &r) {
    return r.rrank == 1 && r.rstride[0] == 1 && (r.dts == DT_F32 || r.dts == DT_F16 || r.dts == DT_BF16);
}

// words_of is fold_words for the input's type (by_words holds).
template <typename C, int G>
__device__ __forceinline__ Acc words_of(const Reduction &r, int mode, long long base, long long lo, long long hi, int j) {
    switch (r.dts) {
    case DT_F32: return fold_words<C, DT_F32, G>(r, mode, base, lo, hi, j);
    case DT_F16: return fold_words<C, DT_F16, G>(r, mode, base, lo, hi, j);
    }
    return fold_words<C, DT_BF16, G>(r, mode, base, lo, hi, j);
}

// warp_acc combines the Accs of a warp's lanes in a butterfly: a sum's additions and
// max_better's total order give every lane the same result whatever the pairing.
__device__ __forceinline__ Acc warp_acc(Acc a, bool isMax) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        Acc b;
        b.sum = __shfl_xor_sync(0xffffffffu, a.sum, o);
        b.max = __shfl_xor_sync(0xffffffffu, a.max, o);
        b.arg = __shfl_xor_sync(0xffffffffu, a.arg, o);
        acc_merge(a, isMax, b);
    }
    return a;
}

// reduce_warp_k: warp w of the grid folds output w (and every warps-th after it) whole:
// lane j takes the elements j, j+32, ... (over a dense dimension, its words), and
// the warp combines them with warp_acc. For outputs of up to a few thousand elements
// each, where a block per output would leave most of its threads idle.
template <typename C>
__device__ __forceinline__ void reduce_warp_k(const Reduction &r, int mode, long long *idx) {
    bool isMax = mode == RED_MAX, words = sizeof(C) == 4 && by_words(r);
    int lane = threadIdx.x & 31;
    long long warps = (long long)gridDim.x * (BLOCK / 32);
    for (long long o = (long long)blockIdx.x * (BLOCK / 32) + threadIdx.x / 32; o < r.nOut; o += warps) {
        long long base = unravel<long long>(o, r.krank, r.kshape, r.kstride[1]);
        Acc a = words ? words_of<C, 32>(r, mode, base, 0, r.nRed, lane) : fold_piece<C>(r, mode, base, lane, r.nRed, 32);
        a = warp_acc(a, isMax);
        if (lane == 0) finish_out<C>(r, mode, idx, o, a);
    }
}

// reduce_block_k: block b folds piece b / nOut of output b % nOut: thread j takes the
// elements j, j+BLOCK, ... of the piece, then the block combines them in a fixed tree;
// over a dense dimension it reads words (fold_words), and a sum combines with
// group_sum's butterfly instead.
template <typename C>
__device__ __forceinline__ void reduce_block_k(const Reduction &r, int mode, long long *idx, Acc *part) {
    __shared__ Acc tree[BLOCK];
    __shared__ double sums[BLOCK / 32];
    bool isMax = mode == RED_MAX;
    long long total = r.nOut * r.pieces;
    for (long long b = blockIdx.x; b < total; b += gridDim.x) {
        long long o = b % r.nOut, c = b / r.nOut;
        long long base = unravel<long long>(o, r.krank, r.kshape, r.kstride[1]);
        long long lo = c * r.piece, hi = min(lo + r.piece, r.nRed);
        bool words = sizeof(C) == 4 && by_words(r);
        if (words && !isMax) {
            double v = group_sum<BLOCK>(words_of<C, BLOCK>(r, mode, base, lo, hi, threadIdx.x).sum, sums);
            if (threadIdx.x == 0) {
                Acc a = acc_zero();
                a.sum = v;
                if (r.pieces == 1) finish_out<C>(r, mode, idx, o, a);
                else part[c * r.nOut + o] = a;
            }
            continue;
        }
        tree[threadIdx.x] = words ? words_of<C, BLOCK>(r, RED_MAX, base, lo, hi, threadIdx.x) : fold_piece<C>(r, mode, base, lo + threadIdx.x, hi, BLOCK);
        __syncthreads();
        for (int s = BLOCK / 2; s > 0; s >>= 1) {
            if (threadIdx.x < s) acc_merge(tree[threadIdx.x], isMax, tree[threadIdx.x + s]);
            __syncthreads();
        }
        if (threadIdx.x == 0) {
            if (r.pieces == 1) finish_out<C>(r, mode, idx, o, tree[0]);
            else part[c * r.nOut + o] = tree[0];
        }
        __syncthreads();
    }
}

// ---- column sums ------------------------------------------------------------------
//
// A sum (or mean) over the rows of a matrix whose columns are the outputs: the bias
// gradient, a [batch, width] gradient summed over the batch. A thread per output would
// read its column one element per row, 2 or 4 bytes a load; reduce_cols_k gives each
// thread COLS_V adjacent columns instead and reads them at once (16 bytes of float32,
// 8 of 2-byte types, two 16-byte words of float64), a warp 32 such reads of one row. A block is
// COLS_X × COLS_Y threads: COLS_X·COLS_V columns, its COLS_Y rows of threads taking the
// rows of its piece in turn; they combine in a fixed tree in shared memory. Blocks
// cover column groups × row pieces, the pieces combined in piece order by
// reduce_finish as for the other kernels. The host uses it when both dimensions merge
// to one and the columns are dense in a float type, aligned to COLS_V elements (the
// start on a whole read, 16 bytes at most). COLS_* are in common.cuh (the host reads them).
// colword<DT> is what a thread of reduce_cols reads of one row at once: its COLS_V
// elements of type DT as stored (W), element j of which get converts to C as ld does.
template <int DT> struct colword;
template <> struct colword<DT_F32> {
    using W = float4;
    template <typename C> static __device__ __forceinline__ C get(const W &w, int j) { return (C)(&w.x)[j]; }
};
template <> struct colword<DT_F16> {
    using W = uint2;
    template <typename C> static __device__ __forceinline__ C get(const W &w, int j) { return (C)f16_to_f32(((const unsigned short *)&w)[j]); }
};
template <> struct colword<DT_BF16> {
    using W = uint2;
    template <typename C> static __device__ __forceinline__ C get(const W &w, int j) { return (C)bf16_to_f32(((const unsigned short *)&w)[j]); }
};
struct f64x4 {
    double2 lo, hi;
};
template <> struct colword<DT_F64> {
    using W = f64x4;
    template <typename C> static __device__ __forceinline__ C get(const W &w, int j) { return (C)(j < 2 ? (&w.lo.x)[j] : (&w.hi.x)[j - 2]); }
};

// fold_cols adds rows row, row+COLS_Y, ... below hi of the COLS_V columns from col to
// s, in order, loading U rows before adding any: U reads in flight (twice COLS_U for
// 2-byte types, whose reads are half as wide).
template <typename C, int DT, int U>
__device__ __forceinline__ void fold_cols(const Reduction &r, bool sq, long long col, long long row, long long hi, double s[COLS_V]) {
    using CW = colword<DT>;
    const typename CW::W *p = (const typename CW::W *)r.src;
    long long rs = r.rstride[0];
    for (; row < hi; row += COLS_Y * U) {
        typename CW::W x[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            long long ru = row + u * COLS_Y;
            if (ru < hi) x[u] = p[(ru * rs + col) / COLS_V];
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            if (row + u * COLS_Y < hi) {
#pragma unroll
                for (int j = 0; j < COLS_V; j++) {
                    C v = CW::template get<C>(x[u], j);
                    s[j] += (double)(sq ? v * v : v);
                }
            }
        }
    }
}

// reduce_cols_k: block b takes column group b % groups and row piece b / groups; thread
// (tx, ty) folds rows lo+ty, lo+ty+COLS_Y, ... of its COLS_V columns in order.
template <typename C>
__device__ __forceinline__ void reduce_cols_k(const Reduction &r, int mode, Acc *part) {
    __shared__ double tree[COLS_Y][COLS_X * COLS_V];
    bool sq = mode == RED_SUMSQ;
    int tx = threadIdx.x % COLS_X, ty = threadIdx.x / COLS_X;
    long long groups = (r.nOut + COLS_X * COLS_V - 1) / (COLS_X * COLS_V);
    for (long long b = blockIdx.x; b < groups * r.pieces; b += gridDim.x) {
        long long g = b % groups, c = b / groups;
        long long col = (g * COLS_X + tx) * COLS_V;
        long long lo = c * r.piece, hi = min(lo + r.piece, r.nRed);
        double s[COLS_V];
#pragma unroll
        for (int j = 0; j < COLS_V; j++) s[j] = 0;
        if (col < r.nOut) {
            switch (r.dts) {
            case DT_F32: fold_cols<C, DT_F32, COLS_U>(r, sq, col, lo + ty, hi, s); break;
            case DT_F16: fold_cols<C, DT_F16, 2 * COLS_U>(r, sq, col, lo + ty, hi, s); break;
            case DT_BF16: fold_cols<C, DT_BF16, 2 * COLS_U>(r, sq, col, lo + ty, hi, s); break;
            default: fold_cols<C, DT_F64, COLS_U>(r, sq, col, lo + ty, hi, s); break;
            }
        }
#pragma unroll
        for (int j = 0; j < COLS_V; j++) tree[ty][tx * COLS_V + j] = s[j];
        __syncthreads();
        for (int h = COLS_Y / 2; h > 0; h >>= 1) {
            if (ty < h) {
#pragma unroll
                for (int j = 0; j < COLS_V; j++) tree[ty][tx * COLS_V + j] += tree[ty + h][tx * COLS_V + j];
            }
            __syncthreads();
        }
        if (ty == 0 && col < r.nOut) {
#pragma unroll
            for (int j = 0; j < COLS_V; j++) {
                Acc a = acc_zero();
                a.sum = tree[0][tx * COLS_V + j];
                if (r.pieces == 1) finish_out<C>(r, mode, nullptr, col + j, a);
                else part[c * r.nOut + col + j] = a;
            }
        }
        __syncthreads();
    }
}

// reduce_finish_k: thread o combines output o's partials in piece order.
template <typename C>
__device__ __forceinline__ void reduce_finish_k(const Reduction &r, int mode, long long *idx, const Acc *part) {
    bool isMax = mode == RED_MAX;
    GRID_STRIDE(long long, o, r.nOut) {
        Acc a = acc_zero();
        const Acc *p = part + o;
        for (long long c = 0; c < r.pieces; c++, p += r.nOut) acc_merge(a, isMax, *p);
        finish_out<C>(r, mode, idx, o, a);
    }
}

// reduce_finish_block_k: block o combines output o's partials: thread j those of pieces
// j, j+BLOCK, ... in order, then the block in reduce_block's fixed tree; for outputs of
// many pieces (a sum of everything), which one thread would combine serially.
template <typename C>
__device__ __forceinline__ void reduce_finish_block_k(const Reduction &r, int mode, long long *idx, const Acc *part) {
    __shared__ Acc tree[BLOCK];
    bool isMax = mode == RED_MAX;
    for (long long o = blockIdx.x; o < r.nOut; o += gridDim.x) {
        Acc a = acc_zero();
        for (long long c = threadIdx.x; c < r.pieces; c += BLOCK) acc_merge(a, isMax, part[c * r.nOut + o]);
        tree[threadIdx.x] = a;
        __syncthreads();
        for (int s = BLOCK / 2; s > 0; s >>= 1) {
            if (threadIdx.x < s) acc_merge(tree[threadIdx.x], isMax, tree[threadIdx.x + s]);
            __syncthreads();
        }
        if (threadIdx.x == 0) finish_out<C>(r, mode, idx, o, tree[0]);
        __syncthreads();
    }
}

// pair16<DT> is a pair of F16 or BF16 (DT) elements (T) and the packed instructions on
// it: max (NaN when either is, per element) and match.
template <int DT> struct pair16_type { using T = __half2; };
template <> struct pair16_type<DT_BF16> { using T = __nv_bfloat162; };
template <int DT> struct pair16 {
    using T = typename pair16_type<DT>::T;
    static __device__ __forceinline__ T max(T a, T b) { return __hmax2_nan(a, b); }
    // key is what match compares with: big (a number, a pair's element) as the pair's
    // type for F16, as float for BF16. match sets lo and hi to whether a's lower and
    // upper elements are NaN (isnan) or equal to the key (-0 equal to +0). F16 compares
    // packed (set.f16x2, from sm_53); BF16 in float, the elements' bits shifted into
    // place: the kernels are compiled for compute_80, where cuda_bf16.hpp's __heq2 and
    // __hisnan2 on bfloat162 convert each half to float, compare and round the result
    // back to a bfloat16 of 1.0 (set.bf16x2 is sm_90's), and BF16's maxima ran at 81% of
    // a copy where F16's ran at 92% (docs/benchmarks.md).
    using K = std::conditional_t<DT == DT_F16, __half2, float>;
    static __device__ __forceinline__ K key(float big) {
        if constexpr (DT == DT_F16) return __float2half2_rn(big);
        else return big;
    }
    static __device__ __forceinline__ void match(T a, K k, bool isnan, bool &lo, bool &hi) {
        if constexpr (DT == DT_F16) {
            T e = isnan ? __hisnan2(a) : __heq2(a, k);
            unsigned int m = *(const unsigned int *)&e;
            lo = (m & 0xffffu) != 0, hi = (m >> 16) != 0;
        } else {
            unsigned int b = *(const unsigned int *)&a;
            if (isnan) {
                lo = (b & 0x7fffu) > 0x7f80u, hi = (b & 0x7fff0000u) > 0x7f800000u;
            } else {
                lo = __uint_as_float(b << 16) == k, hi = __uint_as_float(b & 0xffff0000u) == k;
            }
        }
    }
    static __device__ __forceinline__ float lo(T a) { return __low2float(a); }
    static __device__ __forceinline__ float hi(T a) { return __high2float(a); }
};

// max_rows_k is reduce_warp_k's maximum over dense rows of whole words of F16 or BF16
// (DT), each on 16 bytes, in float: a warp a row, lane j its words j, j+32, ..., U of
// them a round (UNROLL). A round's largest element (NaN if any) comes from packed
// maxima; only if it would replace the lane's kept one (max_better: larger, or the first
// NaN; rounds come in increasing positions) are the round's elements compared with it
// (pair16's match), for the first position holding it (the first NaN): its value and
// position are kept. That is the first NaN, else the first of the largest, of the lane's
// elements, as a walk in order finds them; the warp combines with max_better's total
// order. For BF16 (SPLIT) the search for a NaN and the search for a number are loops of
// their own, the lane's choice made once a round rather than an element's compare
// chosen by a select (F16's packed compares lose nothing to the select). The host
// checks the rows (a row has at most warpElements). Rows of 1024 are one round a lane:
// every round is a lane's first, and its search runs for every element.
template <int DT>
__device__ __forceinline__ void max_rows_k(const Reduction &r, long long *idx) {
    constexpr int U = UNROLL;
    constexpr bool SPLIT = DT == DT_BF16;
    using P = pair16<DT>;
    using T2 = typename P::T;
    int lane = threadIdx.x & 31;
    long long warps = (long long)gridDim.x * (BLOCK / 32);
    int n = (int)(r.nRed / 8);
    for (long long o = (long long)blockIdx.x * (BLOCK / 32) + threadIdx.x / 32; o < r.nOut; o += warps) {
        const uint4 *w = (const uint4 *)(r.src + (unsigned long long)(o * r.kstride[1][0]) * 2);
        float m = NEG_INF;
        int at = -1;
        // round takes the first c of x's U words, the first word i of the row, each
        // next one 32 words on.
        auto round = [&](const uint4 *x, int c, int i) {
            T2 q = *(const T2 *)&x[0];
#pragma unroll
            for (int u = 0; u < U; u++) {
                const T2 *h = (const T2 *)&x[u];
                if (u < c) q = P::max(q, P::max(P::max(h[0], h[1]), P::max(h[2], h[3])));
            }
            float a = P::lo(q), b = P::hi(q);
            float big = (b > a || b != b) ? b : a;
            if (!(at < 0 || big > m || (big != big && m == m))) return;
            typename P::K want = P::key(big);
            unsigned int v = 0; // the bits of the element found, in its pair's lower half
            // find sets at and v to the first element that is NaN (nan) or big.
            auto find = [&](bool nan) {
#pragma unroll
                for (int u = U - 1; u >= 0; u--) { // the last match set is the first
                    const T2 *h = (const T2 *)&x[u];
#pragma unroll
                    for (int k = 3; k >= 0; k--) {
                        bool el, eh;
                        P::match(h[k], want, nan, el, eh);
                        unsigned int b = *(const unsigned int *)&h[k];
                        if (u < c && eh) at = (i + u * 32) * 8 + 2 * k + 1, v = b >> 16;
                        if (u < c && el) at = (i + u * 32) * 8 + 2 * k, v = b;
                    }
                }
            };
            if (SPLIT && big != big) find(true);
            else if (SPLIT) find(false);
            else find(big != big);
            unsigned short bits = (unsigned short)(v & 0xffffu);
            m = DT == DT_F16 ? f16_to_f32(bits) : bf16_to_f32(bits);
        };
        int i = lane;
        for (; i + (U - 1) * 32 < n; i += U * 32) {
            uint4 x[U];
#pragma unroll
            for (int u = 0; u < U; u++) x[u] = w[i + u * 32];
            round(x, U, i);
        }
        if (i < n) {
            uint4 x[U];
            int c = (n - i + 31) / 32;
#pragma unroll
            for (int u = 0; u < U; u++) x[u] = u < c ? w[i + u * 32] : make_uint4(0, 0, 0, 0);
            round(x, c, i);
        }
#pragma unroll
        for (int s = 16; s > 0; s >>= 1) {
            float m2 = __shfl_xor_sync(0xffffffffu, m, s);
            int at2 = __shfl_xor_sync(0xffffffffu, at, s);
            if (better(m2, at2, m, at)) m = m2, at = at2;
        }
        if (lane == 0) {
            Acc a = acc_zero();
            a.max = m, a.arg = at;
            finish_out<float>(r, RED_MAX, idx, o, a);
        }
    }
}

KERNEL max_rows_f16(Reduction r, long long *idx) { max_rows_k<DT_F16>(r, idx); }
KERNEL max_rows_bf16(Reduction r, long long *idx) { max_rows_k<DT_BF16>(r, idx); }

// sum_rows_k is reduce_warp_k's sum, mean or sum of squares over dense rows of whole
// words of F16 or BF16 (DT), each on 16 bytes, in float: the type fixed at compile time,
// no Acc's maximum carried through the warp's butterfly (warp_sum: the same additions
// as warp_acc's), and fold_words' float runs over a round's UNROLL words (reduce_warp_k
// adds each element in double). The host checks the rows (a row has at most
// warpElements).
template <int DT>
__device__ __forceinline__ void sum_rows_k(const Reduction &r, int mode) {
    int lane = threadIdx.x & 31;
    long long warps = (long long)gridDim.x * (BLOCK / 32);
    bool sq = mode == RED_SUMSQ;
    for (long long o = (long long)blockIdx.x * (BLOCK / 32) + threadIdx.x / 32; o < r.nOut; o += warps) {
        long long base = o * r.kstride[1][0];
        Acc a = sq ? fold_words<float, DT, 32, UNROLL, int, true>(r, RED_SUMSQ, base, 0, r.nRed, lane)
                   : fold_words<float, DT, 32, UNROLL, int, true>(r, RED_SUM, base, 0, r.nRed, lane);
        a.sum = warp_sum(a.sum);
        if (lane == 0) finish_out<float>(r, mode, nullptr, o, a);
    }
}

KERNEL sum_rows_f16(Reduction r, int mode) { sum_rows_k<DT_F16>(r, mode); }
KERNEL sum_rows_bf16(Reduction r, int mode) { sum_rows_k<DT_BF16>(r, mode); }

// ---- column sums over 16-byte words ---------------------------------------------------
//
// sum_cols_k: a sum, mean or sum of squares over the rows of a matrix of float32, F16 or
// BF16 (DT) whose columns are the outputs, dense, in whole 16-byte words (the host checks
// that the columns, the row stride and the input's start are). A thread owns one word,
// N adjacent columns, and walks a slab of rows: block b takes column group b % groups
// (CW_X words, CB columns) and row piece b / groups; thread (tx, ty) adds rows lo+ty,
// lo+ty+CW_Y, ... below hi, CW_U rows loaded before any is added, each column into a
// double (with RUNS, for F16 and BF16, the round's rows in float first, in row order,
// then into the double: a conversion and a double addition per CW_U elements; a last
// round of fewer rows is a shorter run). The block's CW_Y rows of threads combine in a fixed tree in shared
// memory. With one piece the block writes its outputs; with several, each block writes
// its piece's partial of each column, part[c * nOut + col] (a double), and the last block
// to finish among those that share a ticket (groups g, g + classes, ...: tickets[g %
// classes]) adds each of their columns' partials in piece order and writes the outputs:
// one launch. The order depends on the shapes alone.
template <int DT, bool RUNS>
__device__ __forceinline__ void sum_cols_k(const Reduction &r, int mode, double *part, unsigned int *tickets, int classes) {
    constexpr int U = CW_U;
    using V = vtype<DT>;
    constexpr int N = V::n, CB = CW_X * N;
    __shared__ double tree[CW_Y][N][CW_X]; // [ty][e][tx]: a warp's 32 doubles adjacent, no bank conflicts
    bool sq = mode == RED_SUMSQ;
    int tx = threadIdx.x % CW_X, ty = threadIdx.x / CW_X;
    long long groups = (r.nOut + CB - 1) / CB;
    long long g = blockIdx.x % groups, c = blockIdx.x / groups;
    long long word = g * CW_X + tx;
    long long lo = c * r.piece, hi = min(lo + r.piece, r.nRed);
    double d[N];
#pragma unroll
    for (int e = 0; e < N; e++) d[e] = 0;
    // add folds the first m of x's U rows into d.
    auto add = [&](const uint4 *x, int m) {
        if constexpr (RUNS) {
#pragma unroll
            for (int e = 0; e < N; e++) d[e] += (double)run_of<float, DT, U>(x, e, m, sq);
        } else {
#pragma unroll
            for (int u = 0; u < U; u++) {
#pragma unroll
                for (int e = 0; e < N; e++) {
                    float v = V::template get<float>(x[u], e);
                    if (u < m) d[e] += (double)(sq ? v * v : v);
                }
            }
        }
    };
    if (word * N < r.nOut) {
        long long step = CW_Y * (r.rstride[0] / N); // words from one of the thread's rows to its next
        long long row = lo + ty;
        const uint4 *p = (const uint4 *)r.src + row * (r.rstride[0] / N) + word;
        for (; row + (U - 1) * CW_Y < hi; row += U * CW_Y, p += U * step) {
            uint4 x[U];
#pragma unroll
            for (int u = 0; u < U; u++) x[u] = p[u * step];
            add(x, U);
        }
        if (row < hi) {
            int m = (int)((hi - row + CW_Y - 1) / CW_Y);
            uint4 x[U];
#pragma unroll
            for (int u = 0; u < U; u++) x[u] = u < m ? p[u * step] : make_uint4(0, 0, 0, 0);
            add(x, m);
        }
    }
#pragma unroll
    for (int e = 0; e < N; e++) tree[ty][e][tx] = d[e];
    __syncthreads();
    for (int h = CW_Y / 2; h > 0; h >>= 1) {
        if (ty < h) {
#pragma unroll
            for (int e = 0; e < N; e++) tree[ty][e][tx] += tree[ty + h][e][tx];
        }
        __syncthreads();
    }
    int t = threadIdx.x; // the block's column t, from here on
    long long col = g * CB + t;
    double sum = t < CB ? tree[0][t % N][t / N] : 0;
    if (r.pieces == 1) {
        if (t < CB && col < r.nOut) {
            Acc a = acc_zero();
            a.sum = sum;
            finish_out<float>(r, mode, nullptr, col, a);
        }
        return;
    }
    if (t < CB && col < r.nOut) part[c * r.nOut + col] = sum;
    long long k = g % classes, shared = (groups - 1 - k) / classes + 1; // groups on ticket k
    if (!last_of(tickets + k, (unsigned int)(shared * r.pieces))) return;
    for (long long gg = k; gg < groups; gg += classes) {
        col = gg * CB + t;
        if (t >= CB || col >= r.nOut) continue;
        Acc a = acc_zero();
        const double *q = part + col;
        long long i = 0;
        for (; i + CW_F <= r.pieces; i += CW_F) { // CW_F loads in flight, added in piece order
            double v[CW_F];
#pragma unroll
            for (int j = 0; j < CW_F; j++) v[j] = __ldcg(q + (i + j) * r.nOut);
#pragma unroll
            for (int j = 0; j < CW_F; j++) a.sum += v[j];
        }
        for (; i < r.pieces; i++) a.sum += __ldcg(q + i * r.nOut);
        finish_out<float>(r, mode, nullptr, col, a);
    }
}

KERNEL sum_cols_f32(Reduction r, int mode, double *part, unsigned int *tickets, int classes) { sum_cols_k<DT_F32, false>(r, mode, part, tickets, classes); }
KERNEL sum_cols_f16(Reduction r, int mode, double *part, unsigned int *tickets, int classes) { sum_cols_k<DT_F16, true>(r, mode, part, tickets, classes); }
KERNEL sum_cols_bf16(Reduction r, int mode, double *part, unsigned int *tickets, int classes) { sum_cols_k<DT_BF16, true>(r, mode, part, tickets, classes); }

// sum_all_k is reduce_block_k's sum (or mean) of all of a dense F16 or BF16 input (DT)
// into one output, and the reduce_finish or reduce_finish_block after it, in one
// launch: block c folds piece c (fold_words, SUM_U words in flight, each round's run of
// an element in float first) into part[c]; the last block to finish (last_block) combines the
// partials as the finishing kernel would (one thread in piece order up to
// FINISH_BLOCK_PIECES, else reduce_finish_block's threads and tree) and writes the
// output. The host checks that every piece starts on 16 bytes and is whole words, and
// that there are at least two.
template <int DT>
__device__ __forceinline__ void sum_all_k(const Reduction &r, int mode, Acc *part, unsigned int *ticket) {
    __shared__ double sums[BLOCK / 32];
    __shared__ Acc tree[BLOCK];
    for (long long c = blockIdx.x; c < r.pieces; c += gridDim.x) {
        long long lo = c * r.piece, hi = min(lo + r.piece, r.nRed);
        double v = group_sum<BLOCK>(fold_words<float, DT, BLOCK, SUM_U, long long, true>(r, RED_SUM, 0, lo, hi, threadIdx.x).sum, sums);
        if (threadIdx.x == 0) {
            Acc a = acc_zero();
            a.sum = v;
            part[c] = a;
        }
    }
    if (!last_block(ticket)) return;
    Acc a = acc_zero();
    if (r.pieces <= FINISH_BLOCK_PIECES) {
        if (threadIdx.x == 0) {
            for (long long c = 0; c < r.pieces; c++) a.sum += __ldcg(&part[c].sum);
            finish_out<float>(r, mode, nullptr, 0, a);
        }
        return;
    }
    for (long long c = threadIdx.x; c < r.pieces; c += BLOCK) a.sum += __ldcg(&part[c].sum);
    tree[threadIdx.x] = a;
    __syncthreads();
    for (int s = BLOCK / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) acc_merge(tree[threadIdx.x], false, tree[threadIdx.x + s]);
        __syncthreads();
    }
    if (threadIdx.x == 0) finish_out<float>(r, mode, nullptr, 0, tree[0]);
}

KERNEL sum_all_f16(Reduction r, int mode, Acc *part, unsigned int *ticket) { sum_all_k<DT_F16>(r, mode, part, ticket); }
KERNEL sum_all_bf16(Reduction r, int mode, Acc *part, unsigned int *ticket) { sum_all_k<DT_BF16>(r, mode, part, ticket); }

// max_backward_k: thread o writes g's element o (r.src; kstride[1] its strides) into dx
// (r.dst; kstride[0] and rstride its strides) at the position idx[o]; dx is zero
// already. An index outside the reduction is reported and skipped.
template <typename C>
__device__ __forceinline__ void max_backward_k(const Reduction &r, const long long *idx, ErrorFlag *flag, unsigned int seq) {
    GRID_STRIDE(long long, o, r.nOut) {
        long long k = idx[o];
        if (k < 0 || k >= r.nRed) {
            report(flag, seq, ERR_MAX_BACKWARD, o, k, r.nRed);
            continue;
        }
        long long d = unravel<long long>(o, r.krank, r.kshape, r.kstride[0]) + unravel<long long>(k, r.rrank, r.rshape, r.rstride);
        C v = ld<C>(r.src, r.dts, unravel<long long>(o, r.krank, r.kshape, r.kstride[1]), 0);
        st<C>(r.dst, r.dtd, d, v);
    }
}

// non_finite_k sets *found to 1 when an element of the walk's operand 0, read in C (an
// F64 beyond float's range is finite), is an Inf or a NaN (several threads may store
// the same 1).
template <typename C, typename I>
__device__ __forceinline__ void non_finite_k(const Walk &w, int *found) {
    GRID_STRIDE(I, i, w.size) {
        I off[1];
        offsets<1, I>(w, i, off);
        C x = ld<C>(w.base[0], w.dtype[0], off[0], 0);
        if (x - x != 0) *found = 1; // Inf-Inf and NaN-NaN are NaN
    }
}

#define REDUCE_KERNELS(C, CN)                                                                                                                      \
    KERNEL reduce_thread_##CN(Reduction r, int mode, long long *idx, Acc *part) { reduce_thread_k<C>(r, mode, idx, part); }                        \
    KERNEL reduce_block_##CN(Reduction r, int mode, long long *idx, Acc *part) { reduce_block_k<C>(r, mode, idx, part); }                          \
    KERNEL reduce_cols_##CN(Reduction r, int mode, long long *idx, Acc *part) { reduce_cols_k<C>(r, mode, part); }                                 \
    KERNEL reduce_warp_##CN(Reduction r, int mode, long long *idx, Acc *part) { reduce_warp_k<C>(r, mode, idx); }                                 \
    KERNEL_ROOM reduce_finish_##CN(Reduction r, int mode, long long *idx, const Acc *part) { reduce_finish_k<C>(r, mode, idx, part); }             \
    KERNEL reduce_finish_block_##CN(Reduction r, int mode, long long *idx, const Acc *part) { reduce_finish_block_k<C>(r, mode, idx, part); }      \
    KERNEL max_backward_##CN(Reduction r, const long long *idx, ErrorFlag *flag, unsigned int seq) { max_backward_k<C>(r, idx, flag, seq); }      \
    KERNEL non_finite_##CN##_i32(Walk w, int *found) { non_finite_k<C, int>(w, found); }                                                          \
    KERNEL non_finite_##CN##_i64(Walk w, int *found) { non_finite_k<C, long long>(w, found); }

REDUCE_KERNELS(float, f32)
REDUCE_KERNELS(double, f64)
