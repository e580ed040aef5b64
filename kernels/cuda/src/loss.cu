// loss.cu: CrossEntropy (mean over the rows whose label is not ignored, a log-sum-exp
// per row) and its fused backward, MSE and its backward, with kernels/cpu's loss.go
// formulas. The scalar loss and its gradient g may be of any float type (ld/st). A
// label outside [0, c) that is not ignored is reported through the ErrorFlag and its
// row left out (the host turns the flag into an error at the next synchronisation).
// Cross-entropy's logits and dlogits are stored as S (common.cuh's row storage: float,
// double, f16_t, bf16_t) and computed in T = row_compute<S>::type, the type of lse: a
// 16-bit row gives the bits of its float32 copy. MSE's T is the operands' type.
#include "math.cuh"

__device__ __forceinline__ bool label_ok(long long l, long long c) { return l >= 0 && l < c; }

// cross_entropy_rows_k is the whole forward in one launch. Groups of G threads take
// the rows group_row, + gridDim.x·BLOCK/G, ...: each writes lse[row] = log Σ exp(row)
// (stably) and reports a bad label. Each block then writes its part, the sum of
// lse - logit[label] over its rows whose label is in range and the count of its rows
// whose label is not ignore (in double, a fixed tree), into part[2·block], and takes
// a ticket; the last block to take one sums the parts in block order (a fixed tree),
// writes the mean, rounded to T then to the loss's type dtl, into the loss and the
// count, rounded to T, into lse[n] (CrossEntropyBackward's divisor), and sets the
// ticket back to 0 for the next launch (a CUDA graph replays it). The grid depends on
// n and c only, so the bits do too.
template <typename S, int G>
__device__ __forceinline__ void cross_entropy_rows_k(unsigned long long loss, int dtl, typename row_compute<S>::type *lse, const S *logits,
                                                     const long long *labels, long long n, long long c, long long ignore, double *part,
                                                     unsigned int *ticket, ErrorFlag *flag, unsigned int seq) {
    typedef typename row_compute<S>::type T;
    __shared__ double sm[BLOCK / 32];
    __shared__ T smx[BLOCK / 32];
    int lane = group_lane<G>();
    double sum = 0, count = 0; // lane 0's rows
    for (long long row = group_row<G>(); row < n; row += (long long)gridDim.x * (BLOCK / G)) { // G = BLOCK: the block's one row
        long long l = labels[row];
        if (lane == 0 && l != ignore && !label_ok(l, c)) report(flag, seq, ERR_CROSS_ENTROPY, row, l, c);
        const S *xr = logits + row * c;
        T mx = NEG_INF;
        for (long long j = lane; j < c; j += G) mx = fmax_nan(mx, row_get(xr, j));
        mx = group_max<G>(mx, smx);
        T v = mx; // all -Inf, or a +Inf: the sum is exp(mx)
        if (!isinf(mx)) {
            double s = 0;
            for (long long j = lane; j < c; j += G) s += (double)c_exp(row_get(xr, j) - mx);
            s = group_sum<G>(s, sm);
            v = mx + (T)::log(s);
        }
        if (lane != 0) continue;
        lse[row] = v;
        if (l == ignore) continue;
        count += 1;
        if (label_ok(l, c)) sum += (double)v - (double)row_get(xr, l);
    }
    sum = group_sum<BLOCK>(sum, sm);
    count = group_sum<BLOCK>(count, sm);
    if (threadIdx.x == 0) part[2 * blockIdx.x] = sum, part[2 * blockIdx.x + 1] = count;
    if (!last_block(ticket)) return;
    sum = 0, count = 0;
    for (long long b = threadIdx.x; b < gridDim.x; b += BLOCK) sum += __ldcg(part + 2 * b), count += __ldcg(part + 2 * b + 1);
    sum = group_sum<BLOCK>(sum, sm);
    count = group_sum<BLOCK>(count, sm);
    if (threadIdx.x == 0) {
        st<T>(loss, dtl, 0, (T)(sum / count)); // NaN when every row is ignored
        lse[n] = (T)count;
    }
}

// cross_entropy_backward_k: dlogits = (softmax - onehot)·scale per counted row, 0 for
// ignored rows; thread per element; dlogits may be logits. scale = g/count in T: g the
// loss's gradient (a float scalar of type dtg, rounded to T), count lse[n], as
// cross_entropy_rows_k left it.
template <typename S, typename I>
__device__ __forceinline__ void cross_entropy_backward_k(S *dl, const S *logits, const typename row_compute<S>::type *lse, const long long *labels,
                                                         I n, I c, long long ignore, unsigned long long g, int dtg, ErrorFlag *flag, unsigned int seq) {
    typedef typename row_compute<S>::type T;
    T scale = ld<T>(g, dtg, 0, 0) / lse[n];
    GRID_STRIDE(I, t, n * c) {
        I i = t / c, j = t % c;
        long long l = labels[i];
        if (l == ignore) {
            row_put(dl, t, (T)0);
            continue;
        }
        if (!label_ok(l, c)) {
            if (j == 0) report(flag, seq, ERR_CROSS_ENTROPY_BACKWARD, i, l, c);
            row_put(dl, t, (T)0);
            continue;
        }
        T v = c_exp(row_get(logits, t) - lse[i]) * scale;
        if (j == l) v -= scale;
        row_put(dl, t, v);
    }
}

// mse_partial_k: block c sums (a-b)² over the elements [c·piece, (c+1)·piece) in a fixed
// tree; with one piece it writes the mean into the loss, else part[c].
template <typename T>
__device__ __forceinline__ void mse_partial_k(unsigned long long loss, int dtl, const T *a, const T *b, long long n, long long piece, double *part) {
    __shared__ double sm[BLOCK / 32];
    long long lo = blockIdx.x * piece, hi = min(lo + piece, n);
    double s = 0;
    for (long long i = lo + threadIdx.x; i < hi; i += BLOCK) {
        double d = (double)a[i] - (double)b[i];
        s += d * d;
    }
    s = group_sum<BLOCK>(s, sm);
    if (threadIdx.x != 0) return;
    if (gridDim.x == 1) st<T>(loss, dtl, 0, (T)(s / (double)n)); // NaN for empty inputs
    else part[blockIdx.x] = s;
}

// sum_finish_k: one block sums the partials in a fixed tree and writes total/n, rounded
// to T, into the loss.
template <typename T>
__device__ __forceinline__ void sum_finish_k(unsigned long long loss, int dtl, const double *part, long long pieces, long long n) {
    __shared__ double sm[BLOCK / 32];
    double s = 0;
    for (long long i = threadIdx.x; i < pieces; i += BLOCK) s += part[i];
    s = group_sum<BLOCK>(s, sm);
    if (threadIdx.x == 0) st<T>(loss, dtl, 0, (T)(s / (double)n));
}

// mse_backward_k: da = 2g(a-b)/n, db = -da (either may be null, or its input).
template <typename T>
__device__ __forceinline__ void mse_backward_k(T *da, T *db, const T *a, const T *b, long long n, unsigned long long g, int dtg) {
    T scale = (T)2 * ld<T>(g, dtg, 0, 0) / (T)n;
    GRID_STRIDE(long long, i, n) {
        T d = (a[i] - b[i]) * scale;
        if (da) da[i] = d;
        if (db) db[i] = -d;
    }
}

#define CROSS_ENTROPY_KERNELS(S, SN, T)                                                                                                          \
    KERNEL cross_entropy_rows_warp_##SN(unsigned long long loss, int dtl, T *lse, const S *logits, const long long *labels, long long n, long long c, \
                                        long long ignore, double *part, unsigned int *ticket, ErrorFlag *flag, unsigned int seq) {                    \
        cross_entropy_rows_k<S, 32>(loss, dtl, lse, logits, labels, n, c, ignore, part, ticket, flag, seq);                                           \
    }                                                                                                                                                 \
    KERNEL cross_entropy_rows_block_##SN(unsigned long long loss, int dtl, T *lse, const S *logits, const long long *labels, long long n, long long c, \
                                         long long ignore, double *part, unsigned int *ticket, ErrorFlag *flag, unsigned int seq) {                   \
        cross_entropy_rows_k<S, BLOCK>(loss, dtl, lse, logits, labels, n, c, ignore, part, ticket, flag, seq);                                        \
    }                                                                                                                                                 \
    KERNEL cross_entropy_backward_##SN##_i32(S *dl, const S *logits, const T *lse, const long long *labels, int n, int c, long long ignore,          \
                                             unsigned long long g, int dtg, ErrorFlag *flag, unsigned int seq) {                                      \
        cross_entropy_backward_k<S, int>(dl, logits, lse, labels, n, c, ignore, g, dtg, flag, seq);                                                   \
    }                                                                                                                                                 \
    KERNEL cross_entropy_backward_##SN##_i64(S *dl, const S *logits, const T *lse, const long long *labels, long long n, long long c,                \
                                             long long ignore, unsigned long long g, int dtg, ErrorFlag *flag, unsigned int seq) {                    \
        cross_entropy_backward_k<S, long long>(dl, logits, lse, labels, n, c, ignore, g, dtg, flag, seq);                                             \
    }

CROSS_ENTROPY_KERNELS(float, f32, float)
CROSS_ENTROPY_KERNELS(double, f64, double)
CROSS_ENTROPY_KERNELS(f16_t, f16, float)
CROSS_ENTROPY_KERNELS(bf16_t, bf16, float)

#define MSE_KERNELS(T, TN)                                                                                                                         \
    KERNEL mse_partial_##TN(unsigned long long loss, int dtl, const T *a, const T *b, long long n, long long piece, double *part) {                   \
        mse_partial_k<T>(loss, dtl, a, b, n, piece, part);                                                                                            \
    }                                                                                                                                                 \
    KERNEL sum_finish_##TN(unsigned long long loss, int dtl, const double *part, long long pieces, long long n) {                                    \
        sum_finish_k<T>(loss, dtl, part, pieces, n);                                                                                                  \
    }                                                                                                                                                 \
    KERNEL mse_backward_##TN(T *da, T *db, const T *a, const T *b, long long n, unsigned long long g, int dtg) {                                     \
        mse_backward_k<T>(da, db, a, b, n, g, dtg);                                                                                                   \
    }

MSE_KERNELS(float, f32)
MSE_KERNELS(double, f64)
