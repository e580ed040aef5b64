// softmax.cu: Softmax, LogSoftmax and their backward along the middle axis of a
// contiguous array [outer, n, inner], as kernels/cpu's softmax.go computes them (sums
// in double, the same order of float operations per element). inner == 1 (a row per
// outer index): a group of G threads per row, G = 32 for short rows and BLOCK for long
// ones, float32 rows of up to BLOCK·ROW_CHUNKS·4 held in the group's registers (the
// *_regs_* kernels, read once), longer ones and float64 read from memory;
// inner > 1: a thread per (outer, inner) column, walking the axis in order.
// Outputs may be their inputs (in place). S is the rows' storage type (common.cuh's row
// storage: float, double, f16_t, bf16_t) and T = row_compute<S>::type the type they
// compute in: float for F32, F16 and BF16 rows, double for F64 ones. A 16-bit row gives
// the bits of its float32 copy: the same math on the same values in the same order,
// each output rounded once (where the float32 kernels keep an intermediate in the
// output, the 16-bit ones recompute it).
#include "math.cuh"

// keeps says whether a row of S holds the compute type exactly, so that a kernel may
// keep an intermediate in its output.
template <typename S> __device__ __forceinline__ constexpr bool keeps() { return sizeof(S) == sizeof(typename row_compute<S>::type); }

template <typename S, int G>
__device__ __forceinline__ void softmax_rows_k(S *dst, const S *x, long long outer, long long n, int log) {
    typedef typename row_compute<S>::type T;
    __shared__ double sm[BLOCK / 32];
    __shared__ T smx[BLOCK / 32];
    long long row = group_row<G>();
    int lane = group_lane<G>();
    if (row >= outer) return; // G = BLOCK: the whole block leaves together
    const S *xr = x + row * n;
    S *dr = dst + row * n;
    T mx = NEG_INF;
    for (long long j = lane; j < n; j += G) mx = fmax_nan(mx, row_get(xr, j));
    mx = group_max<G>(mx, smx);
    double sum = 0;
    for (long long j = lane; j < n; j += G) {
        T e = c_exp(row_get(xr, j) - mx);
        sum += (double)e;
        if (!log && keeps<S>()) row_put(dr, j, e);
    }
    sum = group_sum<G>(sum, sm);
    if (log) {
        T ls = (T)::log(sum);
        for (long long j = lane; j < n; j += G) row_put(dr, j, (row_get(xr, j) - mx) - ls);
    } else {
        T scale = (T)(1.0 / sum);
        for (long long j = lane; j < n; j += G) row_put(dr, j, (keeps<S>() ? row_get(dr, j) : c_exp(row_get(xr, j) - mx)) * scale);
    }
}

template <typename S, int G>
__device__ __forceinline__ void softmax_backward_rows_k(S *dx, const S *g, const S *y, long long outer, long long n, int log) {
    typedef typename row_compute<S>::type T;
    __shared__ double sm[BLOCK / 32];
    long long row = group_row<G>();
    int lane = group_lane<G>();
    if (row >= outer) return;
    const S *gr = g + row * n, *yr = y + row * n;
    S *dr = dx + row * n;
    double dot = 0;
    for (long long j = lane; j < n; j += G) dot += log ? (double)row_get(gr, j) : (double)row_get(gr, j) * (double)row_get(yr, j);
    T d = (T)group_sum<G>(dot, sm);
    for (long long j = lane; j < n; j += G) {
        if (log) row_put(dr, j, row_get(gr, j) - c_exp(row_get(yr, j)) * d);
        else row_put(dr, j, row_get(yr, j) * (row_get(gr, j) - d));
    }
}

// The register-row kernels (float32, F16 and BF16 rows of up to G·C·4 elements,
// common.cuh's row_load, C chunk slots a lane): the row is read once and written once,
// where the kernels above read it two or three times; the per-element math is theirs,
// the lanes' sums run over row_load's order.
template <typename S, int G, bool V16, int C = ROW_CHUNKS>
__device__ __forceinline__ void softmax_regs_k(S *dst, const S *x, long long outer, long long n, int log) {
    __shared__ double sm[BLOCK / 32];
    __shared__ float smx[BLOCK / 32];
    long long row = group_row<G>();
    int lane = group_lane<G>();
    if (row >= outer) return; // G = BLOCK: the whole block leaves together
    float v[4 * C];
    row_load<G, V16, C>(v, x + row * n, n, lane, NEG_INF);
    float mx = NEG_INF;
#pragma unroll
    for (int k = 0; k < 4 * C; k++) mx = fmax_nan(mx, v[k]);
    mx = group_max<G>(mx, smx);
    double sum = 0;
#pragma unroll
    for (int k = 0; k < 4 * C; k++) {
        if (!row_in<G, V16>(k, n, lane)) break;
        float e = c_exp(v[k] - mx);
        sum += (double)e;
        if (!log) v[k] = e;
    }
    sum = group_sum<G>(sum, sm);
    float ls = (float)::log(sum), scale = (float)(1.0 / sum);
#pragma unroll
    for (int k = 0; k < 4 * C; k++) v[k] = log ? (v[k] - mx) - ls : v[k] * scale;
    row_store<G, V16, C>(dst + row * n, v, n, lane);
}

template <typename S, int G, bool V16, int C = ROW_CHUNKS>
__device__ __forceinline__ void softmax_backward_regs_k(S *dx, const S *g, const S *y, long long outer, long long n, int log) {
    __shared__ double sm[BLOCK / 32];
    long long row = group_row<G>();
    int lane = group_lane<G>();
    if (row >= outer) return;
    float gv[4 * C], yv[4 * C];
    row_load<G, V16, C>(gv, g + row * n, n, lane, 0);
    row_load<G, V16, C>(yv, y + row * n, n, lane, 0);
    double dot = 0;
#pragma unroll
    for (int k = 0; k < 4 * C; k++) {
        if (!row_in<G, V16>(k, n, lane)) break;
        dot += log ? (double)gv[k] : (double)gv[k] * (double)yv[k];
    }
    float d = (float)group_sum<G>(dot, sm);
#pragma unroll
    for (int k = 0; k < 4 * C; k++) gv[k] = log ? gv[k] - c_exp(yv[k]) * d : yv[k] * (gv[k] - d);
    row_store<G, V16, C>(dx + row * n, gv, n, lane);
}

#define SOFTMAX_REGS_KERNELS(S, SN, G, C, GN, V16, VN)                                                                         \
    KERNEL softmax_regs_##GN##_##SN##VN(S *dst, const S *x, long long outer, long long n, int log) {                           \
        softmax_regs_k<S, G, V16, C>(dst, x, outer, n, log);                                                                   \
    }                                                                                                                          \
    KERNEL softmax_backward_regs_##GN##_##SN##VN(S *dx, const S *g, const S *y, long long outer, long long n, int log) {       \
        softmax_backward_regs_k<S, G, V16, C>(dx, g, y, outer, n, log);                                                        \
    }

REGS_FORMS(SOFTMAX_REGS_KERNELS, float, f32)
REGS16_FORMS(SOFTMAX_REGS_KERNELS, f16_t, f16)
REGS16_FORMS(SOFTMAX_REGS_KERNELS, bf16_t, bf16)

// The column kernels: thread t owns column t % inner of outer index t / inner.
template <typename S>
__device__ __forceinline__ void softmax_cols_k(S *dst, const S *x, long long outer, long long n, long long inner, int log) {
    typedef typename row_compute<S>::type T;
    GRID_STRIDE(long long, t, outer * inner) {
        long long base = (t / inner) * n * inner + t % inner;
        T mx = NEG_INF;
        for (long long p = 0; p < n; p++) mx = fmax_nan(mx, row_get(x, base + p * inner));
        double sum = 0;
        for (long long p = 0; p < n; p++) {
            T e = c_exp(row_get(x, base + p * inner) - mx);
            sum += (double)e;
            if (!log && keeps<S>()) row_put(dst, base + p * inner, e);
        }
        if (log) {
            T ls = (T)::log(sum);
            for (long long p = 0; p < n; p++) row_put(dst, base + p * inner, (row_get(x, base + p * inner) - mx) - ls);
        } else {
            T scale = (T)(1.0 / sum);
            for (long long p = 0; p < n; p++) {
                long long i = base + p * inner;
                row_put(dst, i, (keeps<S>() ? row_get(dst, i) : c_exp(row_get(x, i) - mx)) * scale);
            }
        }
    }
}

template <typename S>
__device__ __forceinline__ void softmax_backward_cols_k(S *dx, const S *g, const S *y, long long outer, long long n, long long inner, int log) {
    typedef typename row_compute<S>::type T;
    GRID_STRIDE(long long, t, outer * inner) {
        long long base = (t / inner) * n * inner + t % inner;
        double dot = 0;
        for (long long p = 0; p < n; p++) {
            long long i = base + p * inner;
            dot += log ? (double)row_get(g, i) : (double)row_get(g, i) * (double)row_get(y, i);
        }
        T d = (T)dot;
        for (long long p = 0; p < n; p++) {
            long long i = base + p * inner;
            if (log) row_put(dx, i, row_get(g, i) - c_exp(row_get(y, i)) * d);
            else row_put(dx, i, row_get(y, i) * (row_get(g, i) - d));
        }
    }
}

// A warp reads its row from memory only in float64: float32 rows that short are the
// register-row kernels'.
#define SOFTMAX_WARP_KERNELS(T, TN)                                                                                             \
    KERNEL softmax_rows_warp_##TN(T *dst, const T *x, long long outer, long long n, int log) {                                  \
        softmax_rows_k<T, 32>(dst, x, outer, n, log);                                                                           \
    }                                                                                                                           \
    KERNEL softmax_backward_rows_warp_##TN(T *dx, const T *g, const T *y, long long outer, long long n, int log) {              \
        softmax_backward_rows_k<T, 32>(dx, g, y, outer, n, log);                                                                \
    }

#define SOFTMAX_KERNELS(T, TN)                                                                                                  \
    KERNEL softmax_rows_block_##TN(T *dst, const T *x, long long outer, long long n, int log) {                                 \
        softmax_rows_k<T, BLOCK>(dst, x, outer, n, log);                                                                        \
    }                                                                                                                           \
    KERNEL softmax_backward_rows_block_##TN(T *dx, const T *g, const T *y, long long outer, long long n, int log) {             \
        softmax_backward_rows_k<T, BLOCK>(dx, g, y, outer, n, log);                                                             \
    }                                                                                                                           \
    KERNEL_ROOM softmax_cols_##TN(T *dst, const T *x, long long outer, long long n, long long inner, int log) {                      \
        softmax_cols_k<T>(dst, x, outer, n, inner, log);                                                                        \
    }                                                                                                                           \
    KERNEL softmax_backward_cols_##TN(T *dx, const T *g, const T *y, long long outer, long long n, long long inner, int log) { \
        softmax_backward_cols_k<T>(dx, g, y, outer, n, inner, log);                                                             \
    }

SOFTMAX_KERNELS(float, f32)
SOFTMAX_KERNELS(double, f64)
SOFTMAX_KERNELS(f16_t, f16)
SOFTMAX_KERNELS(bf16_t, bf16)
SOFTMAX_WARP_KERNELS(double, f64)
