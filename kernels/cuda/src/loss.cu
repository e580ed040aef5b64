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

// cross_entropy_finish is cross_entropy_k's end, from lane 0's sum and count of its
// rows: the block's part, the ticket, and in the last block the mean and the count.
template <typename T>
__device__ __forceinline__ void cross_entropy_finish(double sum, double count, double *sm, unsigned long long loss, int dtl, T *lse, long long n, double *part,
                                                     unsigned int *ticket) {
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

// cross_entropy_k is the whole forward in one launch. Groups of G threads take the
// rows group_row, + gridDim.x·BLOCK/G, ...: each writes lse[row] = log Σ exp(row)
// (stably; row_lse, below, computes it) and reports a bad label. Each block then
// writes its part, the sum of lse - logit[label] over its rows whose label is in range
// and the count of its rows whose label is not ignore (in double, a fixed tree), into
// part[2·block], and takes a ticket; the last block to take one sums the parts in
// block order (a fixed tree), writes the mean, rounded to T then to the loss's type
// dtl, into the loss and the count, rounded to T, into lse[n] (CrossEntropyBackward's
// divisor), and sets the ticket back to 0 for the next launch (a CUDA graph replays
// it). The grid depends on n and c only, so the bits do too.
template <typename S, int G, typename T, typename F>
__device__ __forceinline__ void cross_entropy_k(unsigned long long loss, int dtl, T *lse, const S *logits, const long long *labels, long long n, long long c,
                                                long long ignore, double *part, unsigned int *ticket, ErrorFlag *flag, unsigned int seq, F row_lse) {
    __shared__ double sm[BLOCK / 32];
    int lane = group_lane<G>();
    double sum = 0, count = 0; // lane 0's rows
    for (long long row = group_row<G>(); row < n; row += (long long)gridDim.x * (BLOCK / G)) { // G = BLOCK: the block's one row
        long long l = labels[row];
        if (lane == 0 && l != ignore && !label_ok(l, c)) report(flag, seq, ERR_CROSS_ENTROPY, row, l, c);
        const S *xr = logits + row * c;
        T v = row_lse(xr, lane, sm);
        if (lane != 0) continue;
        lse[row] = v;
        if (l == ignore) continue;
        count += 1;
        if (label_ok(l, c)) sum += (double)v - (double)row_get(xr, l);
    }
    cross_entropy_finish(sum, count, sm, loss, dtl, lse, n, part, ticket);
}

// lse_of is a row's log-sum-exp from its maximum mx over the group and its lanes' sums
// of exp(x - mx): all -Inf, or a +Inf, gives mx (the sum is exp(mx)).
template <int G, typename T, typename F>
__device__ __forceinline__ T lse_of(T mx, double *sm, F lane_sum) {
    if (isinf(mx)) return mx;
    return mx + (T)::log(group_sum<G>(lane_sum(), sm));
}

// cross_entropy_rows_k reads each row from memory, twice: lane j its elements j, j+G, ...
template <typename S, int G>
__device__ __forceinline__ void cross_entropy_rows_k(unsigned long long loss, int dtl, typename row_compute<S>::type *lse, const S *logits,
                                                     const long long *labels, long long n, long long c, long long ignore, double *part,
                                                     unsigned int *ticket, ErrorFlag *flag, unsigned int seq) {
    typedef typename row_compute<S>::type T;
    __shared__ T smx[BLOCK / 32];
    cross_entropy_k<S, G>(loss, dtl, lse, logits, labels, n, c, ignore, part, ticket, flag, seq, [&](const S *xr, int lane, double *sm) {
        T mx = NEG_INF;
        for (long long j = lane; j < c; j += G) mx = fmax_nan(mx, row_get(xr, j));
        mx = group_max<G>(mx, smx);
        return lse_of<G>(mx, sm, [&] {
            double s = 0;
            for (long long j = lane; j < c; j += G) s += (double)c_exp(row_get(xr, j) - mx);
            return s;
        });
    });
}

// max_nan is fmax_nan in one instruction (max.NaN, sm_80 on): a NaN operand gives NaN;
// of +0 and -0 it gives +0 where fmax_nan gives its first operand, which no log-sum-exp
// can tell apart.
__device__ __forceinline__ float max_nan(float a, float b) {
    float r;
    asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
}

// max2_nan is max_nan of two pairs of 16-bit elements of S (their bits, the lower
// first), a pair an instruction (max.NaN.{f16,bf16}x2): the maximum of a 16-bit row
// without converting it; neg_inf2 is the pair -Inf, -Inf.
template <typename S> __device__ __forceinline__ unsigned int max2_nan(unsigned int a, unsigned int b);
template <> __device__ __forceinline__ unsigned int max2_nan<f16_t>(unsigned int a, unsigned int b) {
    unsigned int r;
    asm("max.NaN.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    return r;
}
template <> __device__ __forceinline__ unsigned int max2_nan<bf16_t>(unsigned int a, unsigned int b) {
    unsigned int r;
    asm("max.NaN.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    return r;
}
template <typename S> __device__ __forceinline__ unsigned int neg_inf2();
template <> __device__ __forceinline__ unsigned int neg_inf2<f16_t>() { return 0xfc00fc00u; }
template <> __device__ __forceinline__ unsigned int neg_inf2<bf16_t>() { return 0xff80ff80u; }

// row_max is the largest element of a lane's register row v (positions below n), NaN
// if one is. A 16-bit row whose chunks are whole (V16) takes it on its bits, a pair an
// instruction: the maximum is exact in either form, so the same but for the sign of a
// zero maximum, which no log-sum-exp can tell (x - ±0 and ±0 + log(sum) are the same).
template <int G, bool V16, int C, typename S> __device__ __forceinline__ float row_max(const reg_row<S, C> &v, long long n, int lane) {
    if constexpr (V16 && sizeof(S) == 2) {
        unsigned int m = neg_inf2<S>();
#pragma unroll
        for (int i = 0; i < C; i++) {
            if (!row_in<G, V16>(4 * i, n, lane)) break;
            m = max2_nan<S>(m, max2_nan<S>(v.bits[i].x, v.bits[i].y));
        }
        return max_nan(from_bits<S>((unsigned short)(m & 0xffffu)), from_bits<S>((unsigned short)(m >> 16)));
    } else {
        float mx = NEG_INF;
#pragma unroll
        for (int k = 0; k < 4 * C; k++) {
            if (!row_in<G, V16>(k, n, lane)) break;
            mx = max_nan(mx, v.at(k));
        }
        return mx;
    }
}

// lse_term is exp(d), d = x - max (at most 0, or NaN), a term of a row's log-sum-exp:
// 2^(d·log2 e) by the SFU's ex2.approx.ftz in one instruction, where expf takes about
// eight, which kept the 16-bit register-row forward at half the rate of a copy. Its
// relative error is about 2⁻²² (and d·log2 e's rounding, |d|·2⁻²⁴), far inside the
// conformance's lse tolerance; a term below 2⁻¹²⁶ flushes to 0, which a sum of at
// least 1 (the maximum's term) cannot tell. -Inf gives +0, NaN NaN.
__device__ __forceinline__ float lse_term(float d) {
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(d * 1.4426950408889634f));
    return r;
}

// cross_entropy_regs_k keeps each row in registers (float32, F16 and BF16 rows of up to
// G·C·4 elements, C chunk slots a lane: common.cuh's reg_row): read once, 16 bytes a
// load with V16; the maximum is row_max's. Each lane sums its terms (lse_term) in float, in row_load's order, at
// most 4·C of them, each at most 1, and the group sums the lanes' sums in double: a
// conversion to double a lane, not an element. The lse is deterministic and within
// the tolerance of the float64 formula, but not its bits nor those of the kernels
// reading rows from memory (cross_entropy_rows_k); a 16-bit row still gives the bits of
// its float32 copy.
template <typename S, int G, bool V16, int C = ROW_CHUNKS>
__device__ __forceinline__ void cross_entropy_regs_k(unsigned long long loss, int dtl, float *lse, const S *logits, const long long *labels, long long n,
                                                     long long c, long long ignore, double *part, unsigned int *ticket, ErrorFlag *flag, unsigned int seq) {
    __shared__ float smx[BLOCK / 32];
    cross_entropy_k<S, G>(loss, dtl, lse, logits, labels, n, c, ignore, part, ticket, flag, seq, [&](const S *xr, int lane, double *sm) {
        reg_row<S, C> v;
        v.template load<G, V16>(xr, c, lane);
        float mx = group_max<G>(row_max<G, V16>(v, c, lane), smx);
        return lse_of<G>(mx, sm, [&] {
            float s = 0;
#pragma unroll
            for (int k = 0; k < 4 * C; k++) {
                if (!row_in<G, V16>(k, c, lane)) break;
                s += lse_term(v.at(k) - mx);
            }
            return (double)s;
        });
    });
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

// word_get converts the E = 16/sizeof(S) elements of S in a 16-byte word to the compute
// type T; word_put rounds E of them back into a word (16-bit: pack4's bits).
template <typename S, typename T> __device__ __forceinline__ void word_get(T *v, const uint4 &x) {
    if constexpr (sizeof(S) == 2) {
        unpack4<S>(v, make_uint2(x.x, x.y));
        unpack4<S>(v + 4, make_uint2(x.z, x.w));
    } else if constexpr (sizeof(S) == 4) {
        v[0] = __uint_as_float(x.x), v[1] = __uint_as_float(x.y), v[2] = __uint_as_float(x.z), v[3] = __uint_as_float(x.w);
    } else {
        v[0] = __hiloint2double((int)x.y, (int)x.x), v[1] = __hiloint2double((int)x.w, (int)x.z);
    }
}
template <typename S, typename T> __device__ __forceinline__ uint4 word_put(const T *v) {
    if constexpr (sizeof(S) == 2) {
        uint2 lo = pack4<S>(v), hi = pack4<S>(v + 4);
        return make_uint4(lo.x, lo.y, hi.x, hi.y);
    } else if constexpr (sizeof(S) == 4) {
        return make_uint4(__float_as_uint(v[0]), __float_as_uint(v[1]), __float_as_uint(v[2]), __float_as_uint(v[3]));
    } else {
        return make_uint4((unsigned)__double2loint(v[0]), (unsigned)__double2hiint(v[0]), (unsigned)__double2loint(v[1]), (unsigned)__double2hiint(v[1]));
    }
}

// cross_entropy_backward_words_k is cross_entropy_backward_k over 16-byte words of E =
// 16/sizeof(S) elements, U words a thread per round (common.cuh's map_words), each
// word within one row: the host checked that c is a multiple of E, that dl and logits
// are on 16 bytes and that the words plus one round of the grid fit an int. The same
// math per element, so the same bits; every load and store moves 16 bytes, and a
// word's row, label and lse are looked up once.
template <typename S, int U = CE_U>
__device__ __forceinline__ void cross_entropy_backward_words_k(S *dl, const S *logits, const typename row_compute<S>::type *lse, const long long *labels,
                                                               int n, int c, long long ignore, unsigned long long g, int dtg, ErrorFlag *flag,
                                                               unsigned int seq) {
    typedef typename row_compute<S>::type T;
    constexpr int E = 16 / sizeof(S);
    T scale = ld<T>(g, dtg, 0, 0) / lse[n];
    int cw = c / E; // words a row
    uint4 *out = (uint4 *)dl;
    map_words<U>((const uint4 *)logits, n * cw, [&](int w, const uint4 &x) {
        int i = w / cw, j = (w - i * cw) * E;
        long long l = labels[i];
        T v[E];
        if (l == ignore || !label_ok(l, c)) {
            if (l != ignore && j == 0) report(flag, seq, ERR_CROSS_ENTROPY_BACKWARD, i, l, c);
#pragma unroll
            for (int k = 0; k < E; k++) v[k] = 0;
        } else {
            T m = lse[i];
            word_get<S>(v, x);
#pragma unroll
            for (int k = 0; k < E; k++) {
                v[k] = c_exp(v[k] - m) * scale;
                if (j + k == l) v[k] -= scale;
            }
        }
        out[w] = word_put<S>(v);
    });
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
    }                                                                                                                                                 \
    KERNEL cross_entropy_backward_words_##SN(S *dl, const S *logits, const T *lse, const long long *labels, int n, int c, long long ignore,          \
                                             unsigned long long g, int dtg, ErrorFlag *flag, unsigned int seq) {                                      \
        cross_entropy_backward_words_k<S>(dl, logits, lse, labels, n, c, ignore, g, dtg, flag, seq);                                                  \
    }

CROSS_ENTROPY_KERNELS(float, f32, float)
CROSS_ENTROPY_KERNELS(double, f64, double)
CROSS_ENTROPY_KERNELS(f16_t, f16, float)
CROSS_ENTROPY_KERNELS(bf16_t, bf16, float)

// A warp reads its row from memory only in float64: shorter rows of the other types are
// the register-row kernels'.
KERNEL cross_entropy_rows_warp_f64(unsigned long long loss, int dtl, double *lse, const double *logits, const long long *labels, long long n, long long c,
                                   long long ignore, double *part, unsigned int *ticket, ErrorFlag *flag, unsigned int seq) {
    cross_entropy_rows_k<double, 32>(loss, dtl, lse, logits, labels, n, c, ignore, part, ticket, flag, seq);
}

#define CROSS_ENTROPY_REGS_KERNELS(S, SN, G, C, GN, V16, VN)                                                                                           \
    KERNEL cross_entropy_regs_##GN##_##SN##VN(unsigned long long loss, int dtl, float *lse, const S *logits, const long long *labels, long long n,    \
                                              long long c, long long ignore, double *part, unsigned int *ticket, ErrorFlag *flag, unsigned int seq) { \
        cross_entropy_regs_k<S, G, V16, C>(loss, dtl, lse, logits, labels, n, c, ignore, part, ticket, flag, seq);                                    \
    }

REGS_FORMS(CROSS_ENTROPY_REGS_KERNELS, float, f32)
REGS16_FORMS(CROSS_ENTROPY_REGS_KERNELS, f16_t, f16)
REGS16_FORMS(CROSS_ENTROPY_REGS_KERNELS, bf16_t, bf16)

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
