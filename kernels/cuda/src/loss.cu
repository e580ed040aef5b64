// loss.cu: CrossEntropy (mean over the rows whose label is not ignored, a log-sum-exp
// per row) and its fused backward, MSE and its backward, with kernels/cpu's loss.go
// formulas. The scalar loss and its gradient g may be of any float type (ld/st). A
// label outside [0, c) that is not ignored is reported through the ErrorFlag and its
// row left out (the host turns the flag into an error at the next synchronisation). T is
// the rows' element and compute type: float for F32 logits, double for F64 ones.
#include "math.cuh"

__device__ __forceinline__ bool label_ok(long long l, long long c) { return l >= 0 && l < c; }

// cross_entropy_rows_k: lse[i] = log Σ exp(logits[i]) per row, stably; reports bad labels.
template <typename T, int G>
__device__ __forceinline__ void cross_entropy_rows_k(T *lse, const T *logits, const long long *labels, long long n, long long c, long long ignore, ErrorFlag *flag, unsigned int seq) {
    __shared__ double sm[BLOCK / 32];
    __shared__ T smx[BLOCK / 32];
    long long row = group_row<G>();
    int lane = group_lane<G>();
    if (row >= n) return;
    long long l = labels[row];
    if (lane == 0 && l != ignore && !label_ok(l, c)) report(flag, seq, ERR_CROSS_ENTROPY, row, l, c);
    const T *xr = logits + row * c;
    T mx = NEG_INF;
    for (long long j = lane; j < c; j += G) mx = fmax_nan(mx, xr[j]);
    mx = group_max<G>(mx, smx);
    if (isinf(mx)) { // all -Inf, or a +Inf: the sum is exp(mx)
        if (lane == 0) lse[row] = mx;
        return;
    }
    double s = 0;
    for (long long j = lane; j < c; j += G) s += (double)c_exp(xr[j] - mx);
    s = group_sum<G>(s, sm);
    if (lane == 0) lse[row] = mx + (T)::log(s);
}

// cross_entropy_loss_k: one block sums lse[i] - logits[i, label] over the counted rows
// (in double, a fixed tree) and writes the mean, rounded to T then to the loss's type
// dtl, into the scalar loss.
template <typename T>
__device__ __forceinline__ void cross_entropy_loss_k(unsigned long long loss, int dtl, const T *lse, const T *logits, const long long *labels, long long n, long long c, long long ignore) {
    __shared__ double sm[BLOCK / 32];
    double sum = 0, count = 0;
    for (long long i = threadIdx.x; i < n; i += BLOCK) {
        long long l = labels[i];
        if (l == ignore || !label_ok(l, c)) continue;
        sum += (double)lse[i] - (double)logits[i * c + l];
        count += 1;
    }
    sum = group_sum<BLOCK>(sum, sm);
    count = group_sum<BLOCK>(count, sm);
    if (threadIdx.x == 0) st<T>(loss, dtl, 0, (T)(sum / count)); // NaN when every row is ignored
}

// cross_entropy_scale_k: one block counts the counted rows and writes g/count in T (g
// the loss's gradient, a float scalar of type dtg, rounded to T) into *scale.
template <typename T>
__device__ __forceinline__ void cross_entropy_scale_k(T *scale, unsigned long long g, int dtg, const long long *labels, long long n, long long ignore) {
    __shared__ double sm[BLOCK / 32];
    double count = 0;
    for (long long i = threadIdx.x; i < n; i += BLOCK) count += labels[i] != ignore;
    count = group_sum<BLOCK>(count, sm);
    if (threadIdx.x == 0) *scale = ld<T>(g, dtg, 0, 0) / (T)(long long)count;
}

// cross_entropy_backward_k: dlogits = (softmax - onehot)·scale per counted row, 0 for
// ignored rows; thread per element; dlogits may be logits.
template <typename T, typename I>
__device__ __forceinline__ void cross_entropy_backward_k(T *dl, const T *logits, const T *lse, const long long *labels, I n, I c, long long ignore, const T *scalep, ErrorFlag *flag, unsigned int seq) {
    T scale = *scalep;
    GRID_STRIDE(I, t, n * c) {
        I i = t / c, j = t % c;
        long long l = labels[i];
        if (l == ignore) {
            dl[t] = 0;
            continue;
        }
        if (!label_ok(l, c)) {
            if (j == 0) report(flag, seq, ERR_CROSS_ENTROPY_BACKWARD, i, l, c);
            dl[t] = 0;
            continue;
        }
        T v = c_exp(logits[t] - lse[i]) * scale;
        if (j == l) v -= scale;
        dl[t] = v;
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

#define LOSS_KERNELS(T, TN)                                                                                                                        \
    KERNEL cross_entropy_rows_warp_##TN(T *lse, const T *logits, const long long *labels, long long n, long long c, long long ignore, ErrorFlag *flag, \
                                        unsigned int seq) {                                                                                           \
        cross_entropy_rows_k<T, 32>(lse, logits, labels, n, c, ignore, flag, seq);                                                                    \
    }                                                                                                                                                 \
    KERNEL cross_entropy_rows_block_##TN(T *lse, const T *logits, const long long *labels, long long n, long long c, long long ignore,                \
                                         ErrorFlag *flag, unsigned int seq) {                                                                         \
        cross_entropy_rows_k<T, BLOCK>(lse, logits, labels, n, c, ignore, flag, seq);                                                                 \
    }                                                                                                                                                 \
    KERNEL cross_entropy_loss_##TN(unsigned long long loss, int dtl, const T *lse, const T *logits, const long long *labels, long long n, long long c, \
                                   long long ignore) {                                                                                                \
        cross_entropy_loss_k<T>(loss, dtl, lse, logits, labels, n, c, ignore);                                                                        \
    }                                                                                                                                                 \
    KERNEL cross_entropy_scale_##TN(T *scale, unsigned long long g, int dtg, const long long *labels, long long n, long long ignore) {                \
        cross_entropy_scale_k<T>(scale, g, dtg, labels, n, ignore);                                                                                   \
    }                                                                                                                                                 \
    KERNEL cross_entropy_backward_##TN##_i32(T *dl, const T *logits, const T *lse, const long long *labels, int n, int c, long long ignore,          \
                                             const T *scale, ErrorFlag *flag, unsigned int seq) {                                                     \
        cross_entropy_backward_k<T, int>(dl, logits, lse, labels, n, c, ignore, scale, flag, seq);                                                    \
    }                                                                                                                                                 \
    KERNEL cross_entropy_backward_##TN##_i64(T *dl, const T *logits, const T *lse, const long long *labels, long long n, long long c,                \
                                             long long ignore, const T *scale, ErrorFlag *flag, unsigned int seq) {                                   \
        cross_entropy_backward_k<T, long long>(dl, logits, lse, labels, n, c, ignore, scale, flag, seq);                                              \
    }                                                                                                                                                 \
    KERNEL mse_partial_##TN(unsigned long long loss, int dtl, const T *a, const T *b, long long n, long long piece, double *part) {                   \
        mse_partial_k<T>(loss, dtl, a, b, n, piece, part);                                                                                            \
    }                                                                                                                                                 \
    KERNEL sum_finish_##TN(unsigned long long loss, int dtl, const double *part, long long pieces, long long n) {                                    \
        sum_finish_k<T>(loss, dtl, part, pieces, n);                                                                                                  \
    }                                                                                                                                                 \
    KERNEL mse_backward_##TN(T *da, T *db, const T *a, const T *b, long long n, unsigned long long g, int dtg) {                                     \
        mse_backward_k<T>(da, db, a, b, n, g, dtg);                                                                                                   \
    }

LOSS_KERNELS(float, f32)
LOSS_KERNELS(double, f64)
