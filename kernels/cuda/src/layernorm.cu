// layernorm.cu: LayerNorm and its backward over rows of n contiguous elements, with
// kernels/cpu's layernorm.go formulas but for the forward's moments: the mean and the
// biased variance (of the deviations from the mean rounded to T) summed in T, as
// PyTorch's kernels sum them in their accumulation type (two passes over the row: in
// registers for float32, F16 and BF16 rows of up to BLOCK·ROW_CHUNKS·4, the *_regs_*
// kernels; from memory otherwise), rstd = 1/sqrt(var + eps) in double, the per-element
// math in T. Summing a float row's moments in double took two conversions and a double
// addition an element, which held the 16-bit forward at 89-91 % of a copy's rate on an
// H100 against 92 % in float (scripts/gpu/mb/gkln16.cu; kernels/cpu keeps float64, the
// reference). dw and db are column sums over the rows in row order, cut into pieces of
// rows when there are many (partials combined in piece order). S is the storage type
// of x, y, w, b, g and dx (common.cuh's row storage) and T = row_compute<S>::type the
// type they compute in, of mean, rstd, dw and db: float for F32, F16 and BF16 rows,
// double for F64 ones; eps comes rounded to T, as kernels/cpu rounds it. A 16-bit row
// gives the bits of its float32 copy.
#include "common.cuh"

template <typename S, int G>
__device__ __forceinline__ void layer_norm_k(S *y, typename row_compute<S>::type *mean, typename row_compute<S>::type *rstd, const S *x, const S *w, const S *b,
                                             long long rows, long long n, typename row_compute<S>::type eps) {
    typedef typename row_compute<S>::type T;
    __shared__ T sm[BLOCK / 32];
    long long row = group_row<G>();
    int lane = group_lane<G>();
    if (row >= rows) return;
    const S *xr = x + row * n;
    S *yr = y + row * n;
    T s = 0;
    for (long long j = lane; j < n; j += G) s += row_get(xr, j);
    T m = group_sum<G>(s, sm) / (T)n;
    T ss = 0;
    for (long long j = lane; j < n; j += G) {
        T d = row_get(xr, j) - m;
        ss += d * d;
    }
    ss = group_sum<G>(ss, sm);
    T r = (T)(1.0 / sqrt((double)ss / (double)n + (double)eps));
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = r;
    }
    for (long long j = lane; j < n; j += G) {
        T h = (row_get(xr, j) - m) * r;
        if (w) h *= row_get(w, j);
        if (b) h += row_get(b, j);
        row_put(yr, j, h);
    }
}

// layer_norm_dx_k: dx = rstd·(ĝ - mean(ĝ) - x̂·mean(ĝ·x̂)) with ĝ = g·w, x̂ = (x-mean)·rstd.
template <typename S, int G>
__device__ __forceinline__ void layer_norm_dx_k(S *dx, const S *g, const S *x, const typename row_compute<S>::type *mean, const typename row_compute<S>::type *rstd,
                                                const S *w, long long rows, long long n) {
    typedef typename row_compute<S>::type T;
    __shared__ double sm[BLOCK / 32];
    long long row = group_row<G>();
    int lane = group_lane<G>();
    if (row >= rows) return;
    T m = mean[row], r = rstd[row];
    const S *gr = g + row * n, *xr = x + row * n;
    S *out = dx + row * n;
    double sg = 0, sgx = 0;
    for (long long j = lane; j < n; j += G) {
        T gv = row_get(gr, j);
        if (w) gv *= row_get(w, j);
        sg += (double)gv;
        sgx += (double)(gv * (row_get(xr, j) - m) * r);
    }
    T mg = (T)(group_sum<G>(sg, sm) / (double)n);
    T mgx = (T)(group_sum<G>(sgx, sm) / (double)n);
    for (long long j = lane; j < n; j += G) {
        T gv = row_get(gr, j);
        if (w) gv *= row_get(w, j);
        row_put(out, j, r * (gv - mg - (row_get(xr, j) - m) * r * mgx));
    }
}

// The register-row kernels (float32, F16 and BF16 rows of up to G·C·4 elements, C chunk
// slots a lane; common.cuh's reg_row: 16-bit rows kept as their bits): layer_norm_k's and
// layer_norm_dx_k's math on a row read once (twice for dx: g and x), the lanes' sums
// over row_load's order. w and b are read in the same chunks, and the results are
// stored two chunks at a time (pair_store) as they are done.
//
// The forward's row is a layer_norm_row: reg_row<S, C>, or for BF16 rows of a warp
// reg_row_each (common.cuh: fewer registers, the same values).
template <typename S, int G, int C> struct layer_norm_row {
    using type = reg_row<S, C>;
};
template <> struct layer_norm_row<bf16_t, 32, ROW_CHUNKS> {
    using type = reg_row_each;
};

template <typename S, int G, bool V16, int C = ROW_CHUNKS>
__device__ __forceinline__ void layer_norm_regs_k(S *y, float *mean, float *rstd, const S *x, const S *w, const S *b, long long rows, long long n, float eps) {
    __shared__ float sm[BLOCK / 32];
    long long row = group_row<G>();
    int lane = group_lane<G>();
    if (row >= rows) return;
    typename layer_norm_row<S, G, C>::type v;
    v.template load<G, V16>(x + row * n, n, lane);
    float s = 0;
#pragma unroll
    for (int k = 0; k < 4 * C; k++) s += v.at(k); // past n: +0
    float m = group_sum<G>(s, sm) / (float)n;
    float ss = 0;
#pragma unroll
    for (int k = 0; k < 4 * C; k++) {
        if (!row_in<G, V16>(k, n, lane)) break;
        float d = v.at(k) - m;
        ss += d * d;
    }
    ss = group_sum<G>(ss, sm);
    float r = (float)(1.0 / sqrt((double)ss / (double)n + (double)eps));
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = r;
    }
#pragma unroll
    for (int i = 0; i < C; i += 2) {
        float o[8], t[4];
#pragma unroll
        for (int h = 0; h < 8; h += 4) {
            long long j = chunk_at<G>(lane, i + h / 4);
#pragma unroll
            for (int k = 0; k < 4; k++) o[h + k] = (v.at(4 * i + h + k) - m) * r;
            if (w) {
                chunk_load<V16>(t, w, j, n, 0);
#pragma unroll
                for (int k = 0; k < 4; k++) o[h + k] *= t[k];
            }
            if (b) {
                chunk_load<V16>(t, b, j, n, 0);
#pragma unroll
                for (int k = 0; k < 4; k++) o[h + k] += t[k];
            }
        }
        pair_store<G, V16>(y + row * n, o, i, n, lane);
    }
}

// layer_norm_dx_regs_k: ĝ = g·w is computed where it is used, twice (the same bits).
template <typename S, int G, bool V16, int C = ROW_CHUNKS>
__device__ __forceinline__ void layer_norm_dx_regs_k(S *dx, const S *g, const S *x, const float *mean, const float *rstd, const S *w, long long rows, long long n) {
    __shared__ double sm[BLOCK / 32];
    long long row = group_row<G>();
    int lane = group_lane<G>();
    if (row >= rows) return;
    float m = mean[row], r = rstd[row];
    reg_row<S, C> gv, xv;
    gv.template load<G, V16>(g + row * n, n, lane);
    xv.template load<G, V16>(x + row * n, n, lane);
    // ghat is ĝ at element k of the lane's row, t holding w's chunk k/4.
    auto ghat = [&](int k, const float *t) { return w ? gv.at(k) * t[k % 4] : gv.at(k); };
    double sg = 0, sgx = 0;
    float t[4];
#pragma unroll
    for (int k = 0; k < 4 * C; k++) {
        if (!row_in<G, V16>(k, n, lane)) break;
        if (w && k % 4 == 0) chunk_load<V16>(t, w, chunk_at<G>(lane, k / 4), n, 0);
        float gk = ghat(k, t);
        sg += (double)gk;
        sgx += (double)(gk * (xv.at(k) - m) * r);
    }
    float mg = (float)(group_sum<G>(sg, sm) / (double)n);
    float mgx = (float)(group_sum<G>(sgx, sm) / (double)n);
#pragma unroll
    for (int i = 0; i < C; i += 2) {
        float o[8];
#pragma unroll
        for (int k = 4 * i; k < 4 * i + 8; k++) {
            if (w && k % 4 == 0) chunk_load<V16>(t, w, chunk_at<G>(lane, k / 4), n, 0);
            o[k - 4 * i] = r * (ghat(k, t) - mg - (xv.at(k) - m) * r * mgx);
        }
        pair_store<G, V16>(dx + row * n, o, i, n, lane);
    }
}

#define LAYER_NORM_REGS_KERNELS(S, SN, G, C, GN, V16, VN)                                                                                               \
    KERNEL layer_norm_regs_##GN##_##SN##VN(S *y, float *mean, float *rstd, const S *x, const S *w, const S *b, long long rows, long long n, float eps) {          \
        layer_norm_regs_k<S, G, V16, C>(y, mean, rstd, x, w, b, rows, n, eps);                                                                                  \
    }                                                                                                                                                           \
    KERNEL layer_norm_dx_regs_##GN##_##SN##VN(S *dx, const S *g, const S *x, const float *mean, const float *rstd, const S *w, long long rows, long long n) {     \
        layer_norm_dx_regs_k<S, G, V16, C>(dx, g, x, mean, rstd, w, rows, n);                                                                                   \
    }

REGS_FORMS(LAYER_NORM_REGS_KERNELS, float, f32)
REGS16_FORMS(LAYER_NORM_REGS_KERNELS, f16_t, f16)
REGS16_FORMS(LAYER_NORM_REGS_KERNELS, bf16_t, bf16)

// layer_norm_dwdb_k: thread t sums column t % n over the rows of piece t / n (rows
// piece·c up to piece·(c+1)) in order, into dw and db (either may be null) or, with
// several pieces, into the partials part[(c·n + j)·2 + {0, 1}].
template <typename S, typename T = typename row_compute<S>::type>
__device__ __forceinline__ void layer_norm_dwdb_k(T *dw, T *db, const S *g, const S *x, const T *mean, const T *rstd, long long rows, long long n, long long piece, long long pieces, double *part) {
    GRID_STRIDE(long long, t, n * pieces) {
        long long j = t % n, c = t / n;
        long long lo = c * piece, hi = min(lo + piece, rows);
        double sw = 0, sb = 0;
        for (long long i = lo; i < hi; i++) {
            T gv = row_get(g, i * n + j);
            sw += (double)(gv * (row_get(x, i * n + j) - mean[i]) * rstd[i]);
            sb += (double)gv;
        }
        if (pieces == 1) {
            if (dw) dw[j] = (T)sw;
            if (db) db[j] = (T)sb;
        } else {
            part[(c * n + j) * 2] = sw;
            part[(c * n + j) * 2 + 1] = sb;
        }
    }
}

template <typename T>
__device__ __forceinline__ void layer_norm_dwdb_finish_k(T *dw, T *db, long long n, long long pieces, const double *part) {
    GRID_STRIDE(long long, j, n) {
        double sw = 0, sb = 0;
        for (long long c = 0; c < pieces; c++) {
            sw += part[(c * n + j) * 2];
            sb += part[(c * n + j) * 2 + 1];
        }
        if (dw) dw[j] = (T)sw;
        if (db) db[j] = (T)sb;
    }
}

// A warp reads its row from memory only in float64: float32 rows that short are the
// register-row kernels'.
#define LAYER_NORM_WARP_KERNELS(T, TN)                                                                                                                \
    KERNEL layer_norm_warp_##TN(T *y, T *mean, T *rstd, const T *x, const T *w, const T *b, long long rows, long long n, T eps) {                     \
        layer_norm_k<T, 32>(y, mean, rstd, x, w, b, rows, n, eps);                                                                                    \
    }                                                                                                                                                 \
    KERNEL layer_norm_dx_warp_##TN(T *dx, const T *g, const T *x, const T *mean, const T *rstd, const T *w, long long rows, long long n) {           \
        layer_norm_dx_k<T, 32>(dx, g, x, mean, rstd, w, rows, n);                                                                                     \
    }

// The kernels reading rows from memory, for rows stored as S (compute type T); the
// finish combines partials, which depend on T only.
#define LAYER_NORM_KERNELS(S, T, SN)                                                                                                                  \
    KERNEL layer_norm_block_##SN(S *y, T *mean, T *rstd, const S *x, const S *w, const S *b, long long rows, long long n, T eps) {                   \
        layer_norm_k<S, BLOCK>(y, mean, rstd, x, w, b, rows, n, eps);                                                                                 \
    }                                                                                                                                                 \
    KERNEL layer_norm_dx_block_##SN(S *dx, const S *g, const S *x, const T *mean, const T *rstd, const S *w, long long rows, long long n) {          \
        layer_norm_dx_k<S, BLOCK>(dx, g, x, mean, rstd, w, rows, n);                                                                                  \
    }                                                                                                                                                 \
    KERNEL layer_norm_dwdb_##SN(T *dw, T *db, const S *g, const S *x, const T *mean, const T *rstd, long long rows, long long n, long long piece,     \
                                long long pieces, double *part) {                                                                                     \
        layer_norm_dwdb_k<S>(dw, db, g, x, mean, rstd, rows, n, piece, pieces, part);                                                                 \
    }

#define LAYER_NORM_FINISH_KERNELS(T, TN)                                                                                                              \
    KERNEL layer_norm_dwdb_finish_##TN(T *dw, T *db, long long n, long long pieces, const double *part) {                                            \
        layer_norm_dwdb_finish_k<T>(dw, db, n, pieces, part);                                                                                         \
    }

LAYER_NORM_KERNELS(float, float, f32)
LAYER_NORM_KERNELS(double, double, f64)
LAYER_NORM_KERNELS(f16_t, float, f16)
LAYER_NORM_KERNELS(bf16_t, float, bf16)
LAYER_NORM_FINISH_KERNELS(float, f32)
LAYER_NORM_FINISH_KERNELS(double, f64)
LAYER_NORM_WARP_KERNELS(double, f64)
