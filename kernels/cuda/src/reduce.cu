// reduce.cu: Sum, Mean, Max (with its argmax) and MaxBackward over a Reduction, and
// NonFinite. Deterministic without float atomics: each output's reduced elements are
// cut into pieces whose bounds depend on the shapes alone; a piece is folded by one
// thread (reduce_thread: outputs next to each other in memory, reduced elements far
// apart) or one block in a fixed tree (reduce_block); with several pieces each writes a
// partial and reduce_finish combines them in piece order. Sums accumulate in double,
// as kernels/cpu's do; elements are read, and maxima compared, in the compute type C:
// double when the input or the output is F64 (the _f64 kernels), float otherwise.
#include "common.cuh"

__device__ __forceinline__ Acc acc_zero() { return Acc{0.0, 0.0, -1}; }

// max_better reports whether (x at xi) replaces (m at mi) as the maximum: NaN beats
// every number, then the larger value, then the lower position. The order is total, so
// the result does not depend on the order of combination: the first NaN, else the
// first of equal maxima, as kernels/cpu finds them.
__device__ __forceinline__ bool max_better(double x, long long xi, double m, long long mi) {
    if (xi < 0) return false;
    if (mi < 0) return true;
    bool xn = x != x, mn = m != m;
    if (xn || mn) return xn && (!mn || xi < mi);
    if (x != m) return x > m;
    return xi < mi;
}

template <typename C>
__device__ __forceinline__ void acc_add(Acc &a, bool isMax, C x, long long r) {
    if (!isMax) {
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
__device__ __forceinline__ Acc fold_piece(const Reduction &r, bool isMax, long long base, long long lo, long long hi, long long step) {
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
            for (int j = 0; j < UNROLL; j++) acc_add(u[j], isMax, x[j], e + j * step);
        }
#pragma unroll
        for (int j = 0; j < UNROLL - 1; j++) { // the last round, short of UNROLL
            long long ej = e + j * step;
            if (ej < hi) acc_add(u[j], isMax, ld<C>(r.src, r.dts, base + ej * s, 0), ej);
        }
#pragma unroll
        for (int j = 0; j < UNROLL; j++) acc_merge(a, isMax, u[j]);
        return a;
    }
    for (long long e = lo; e < hi; e += step) {
        long long off = base + unravel<long long>(e, r.rrank, r.rshape, r.rstride);
        acc_add(a, isMax, ld<C>(r.src, r.dts, off, 0), e);
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
        Acc a = fold_piece<C>(r, isMax, base, lo, hi, 1);
        if (r.pieces == 1) finish_out<C>(r, mode, idx, o, a);
        else part[c * r.nOut + o] = a;
    }
}

// reduce_block_k: block b folds piece b / nOut of output b % nOut: thread j takes the
// elements j, j+BLOCK, ... of the piece, then the block combines them in a fixed tree.
template <typename C>
__device__ __forceinline__ void reduce_block_k(const Reduction &r, int mode, long long *idx, Acc *part) {
    __shared__ Acc tree[BLOCK];
    bool isMax = mode == RED_MAX;
    long long total = r.nOut * r.pieces;
    for (long long b = blockIdx.x; b < total; b += gridDim.x) {
        long long o = b % r.nOut, c = b / r.nOut;
        long long base = unravel<long long>(o, r.krank, r.kshape, r.kstride[1]);
        long long lo = c * r.piece, hi = min(lo + r.piece, r.nRed);
        tree[threadIdx.x] = fold_piece<C>(r, isMax, base, lo + threadIdx.x, hi, BLOCK);
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
    KERNEL_ROOM reduce_finish_##CN(Reduction r, int mode, long long *idx, const Acc *part) { reduce_finish_k<C>(r, mode, idx, part); }             \
    KERNEL reduce_finish_block_##CN(Reduction r, int mode, long long *idx, const Acc *part) { reduce_finish_block_k<C>(r, mode, idx, part); }      \
    KERNEL max_backward_##CN(Reduction r, const long long *idx, ErrorFlag *flag, unsigned int seq) { max_backward_k<C>(r, idx, flag, seq); }      \
    KERNEL non_finite_##CN##_i32(Walk w, int *found) { non_finite_k<C, int>(w, found); }                                                          \
    KERNEL non_finite_##CN##_i64(Walk w, int *found) { non_finite_k<C, long long>(w, found); }

REDUCE_KERNELS(float, f32)
REDUCE_KERNELS(double, f64)
