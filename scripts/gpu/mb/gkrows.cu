// gkrows.cu: a microbenchmark of sublet's row kernels on the H100 (issue 18): the
// cross-entropy forward and backward, layer norm forward and dx in F16/BF16, softmax and
// log-softmax in F16/BF16, over ops_compare's matrix ([65536, 1024]: 64M elements,
// cmd/sublet-bench's ops cases) and [4096, 4096].
//
// It includes the real kernel sources of kernels/cuda/src ("branch": the kernels this
// branch launches, as kernels/cuda launches them: grid, block, variant), keeps main's
// version of each kernel the branch changed under an m_ name ("main", launched as main's
// Go code launches it: the baseline of its family), and adds candidates. Every variant's
// outputs are compared with main's bit for bit; variants marked "changes bits" report
// the largest difference in units in the last place, and every variant of a family
// with a float64 host reference reports its error against it. Times: cudaEvents around
// the launch, L2 flushed before each, 3 warm-ups, median of 21; % is of a cudaMemcpy
// device to device moving the same bytes (read + write), timed the same way. Counted
// bytes: cross-entropy forward reads the logits once; its backward reads them and
// writes dlogits; softmax and layer norm read x and write y; layer norm's dx reads g
// and x and writes dx (per-row and per-column operands are not counted).
//
// Build and run from the repository root (GPU machine):
//   nvcc -O3 -fmad=false -std=c++17 -arch=sm_90 -Xptxas -v -o /tmp/gkrows scripts/gpu/mb/gkrows.cu \
//     2>/tmp/gkrows.ptxas && /tmp/gkrows
#include <type_traits>

#include "../../../kernels/cuda/src/layernorm.cu"
#include "../../../kernels/cuda/src/loss.cu"
#include "../../../kernels/cuda/src/softmax.cu"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#define CK(x)                                                                                   \
    do {                                                                                        \
        cudaError_t e_ = (x);                                                                   \
        if (e_ != cudaSuccess) {                                                                \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)

// ---- main's kernels (before this branch), m_ names -------------------------------------

// main's pack4: to_bits an element (BF16: the integer rounding of f32_to_bf16).
template <typename S> __device__ __forceinline__ uint2 m_pack4(const float *v) {
    return make_uint2((unsigned int)to_bits<S>(v[0]) | ((unsigned int)to_bits<S>(v[1]) << 16),
                      (unsigned int)to_bits<S>(v[2]) | ((unsigned int)to_bits<S>(v[3]) << 16));
}

// main's row_load of a 16-bit row with V16 (floats, unpacked as loaded).
template <int G, typename S> __device__ __forceinline__ void m_row_load(float *v, const S *r, long long n, int lane, float fill) {
    int odd = lane & 1;
#pragma unroll
    for (int i = 0; i < ROW_CHUNKS; i += 2) {
        long long j = chunk_at<G>(lane - odd, i + odd);
        uint4 a = j < n ? *(const uint4 *)(r + j) : make_uint4(0, 0, 0, 0);
        uint2 keep = odd ? make_uint2(a.z, a.w) : make_uint2(a.x, a.y);
        uint2 give = odd ? make_uint2(a.x, a.y) : make_uint2(a.z, a.w);
        uint2 got = make_uint2(__shfl_xor_sync(0xffffffffu, give.x, 1), __shfl_xor_sync(0xffffffffu, give.y, 1));
        unpack4<S>(v + 4 * i, odd ? got : keep);
        unpack4<S>(v + 4 * (i + 1), odd ? keep : got);
#pragma unroll
        for (int s = 0; s < 2; s++)
            if (chunk_at<G>(lane, i + s) >= n) {
#pragma unroll
                for (int k = 0; k < 4; k++) v[4 * (i + s) + k] = fill;
            }
    }
}

// main's row_store of a 16-bit row with V16 (the benchmarked rows are on 16 bytes).
template <int G, typename S> __device__ __forceinline__ void m_row_store(S *r, const float *v, long long n, int lane) {
    int odd = lane & 1;
#pragma unroll
    for (int i = 0; i < ROW_CHUNKS; i += 2) {
        uint2 lo = m_pack4<S>(v + 4 * i), hi = m_pack4<S>(v + 4 * (i + 1));
        uint2 give = odd ? lo : hi;
        uint2 got = make_uint2(__shfl_xor_sync(0xffffffffu, give.x, 1), __shfl_xor_sync(0xffffffffu, give.y, 1));
        long long j = chunk_at<G>(lane - odd, i + odd);
        uint4 a = odd ? make_uint4(got.x, got.y, hi.x, hi.y) : make_uint4(lo.x, lo.y, got.x, got.y);
        if (j < n) *(uint4 *)(r + j) = a;
    }
}

template <typename S, int G>
__global__ void __launch_bounds__(BLOCK) m_softmax_regs(S *dst, const S *x, long long outer, long long n, int log) {
    __shared__ double sm[BLOCK / 32];
    __shared__ float smx[BLOCK / 32];
    long long row = group_row<G>();
    int lane = group_lane<G>();
    if (row >= outer) return;
    float v[4 * ROW_CHUNKS];
    m_row_load<G>(v, x + row * n, n, lane, NEG_INF);
    float mx = NEG_INF;
#pragma unroll
    for (int k = 0; k < 4 * ROW_CHUNKS; k++) mx = fmax_nan(mx, v[k]);
    mx = group_max<G>(mx, smx);
    double sum = 0;
#pragma unroll
    for (int k = 0; k < 4 * ROW_CHUNKS; k++) {
        if (!row_in<G, true>(k, n, lane)) break;
        float e = c_exp(v[k] - mx);
        sum += (double)e;
        if (!log) v[k] = e;
    }
    sum = group_sum<G>(sum, sm);
    float ls = (float)::log(sum), scale = (float)(1.0 / sum);
#pragma unroll
    for (int k = 0; k < 4 * ROW_CHUNKS; k++) v[k] = log ? (v[k] - mx) - ls : v[k] * scale;
    m_row_store<G>(dst + row * n, v, n, lane);
}

template <typename S, int G>
__global__ void __launch_bounds__(BLOCK) m_layer_norm_regs(S *y, float *mean, float *rstd, const S *x, const S *w, const S *b, long long rows, long long n, float eps) {
    __shared__ double sm[BLOCK / 32];
    long long row = group_row<G>();
    int lane = group_lane<G>();
    if (row >= rows) return;
    float v[4 * ROW_CHUNKS];
    m_row_load<G>(v, x + row * n, n, lane, 0);
    double s = 0;
#pragma unroll
    for (int k = 0; k < 4 * ROW_CHUNKS; k++) s += (double)v[k];
    double mu = group_sum<G>(s, sm) / (double)n;
    double ss = 0;
#pragma unroll
    for (int k = 0; k < 4 * ROW_CHUNKS; k++) {
        if (!row_in<G, true>(k, n, lane)) break;
        double d = (double)v[k] - mu;
        ss += d * d;
    }
    ss = group_sum<G>(ss, sm);
    float r = (float)(1.0 / sqrt(ss / (double)n + (double)eps));
    float m = (float)mu;
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = r;
    }
#pragma unroll
    for (int i = 0; i < ROW_CHUNKS; i++) {
        long long j = chunk_at<G>(lane, i);
        float t[4];
#pragma unroll
        for (int k = 0; k < 4; k++) v[4 * i + k] = (v[4 * i + k] - m) * r;
        if (w) {
            chunk_load<true>(t, w, j, n, 0);
#pragma unroll
            for (int k = 0; k < 4; k++) v[4 * i + k] *= t[k];
        }
        if (b) {
            chunk_load<true>(t, b, j, n, 0);
#pragma unroll
            for (int k = 0; k < 4; k++) v[4 * i + k] += t[k];
        }
    }
    m_row_store<G>(y + row * n, v, n, lane);
}

template <typename S, int G>
__global__ void __launch_bounds__(BLOCK) m_layer_norm_dx_regs(S *dx, const S *g, const S *x, const float *mean, const float *rstd, const S *w, long long rows, long long n) {
    __shared__ double sm[BLOCK / 32];
    long long row = group_row<G>();
    int lane = group_lane<G>();
    if (row >= rows) return;
    float m = mean[row], r = rstd[row];
    float gv[4 * ROW_CHUNKS], xv[4 * ROW_CHUNKS];
    m_row_load<G>(gv, g + row * n, n, lane, 0);
    m_row_load<G>(xv, x + row * n, n, lane, 0);
    if (w) {
#pragma unroll
        for (int i = 0; i < ROW_CHUNKS; i++) {
            float t[4];
            chunk_load<true>(t, w, chunk_at<G>(lane, i), n, 0);
#pragma unroll
            for (int k = 0; k < 4; k++) gv[4 * i + k] *= t[k];
        }
    }
    double sg = 0, sgx = 0;
#pragma unroll
    for (int k = 0; k < 4 * ROW_CHUNKS; k++) {
        if (!row_in<G, true>(k, n, lane)) break;
        sg += (double)gv[k];
        sgx += (double)(gv[k] * (xv[k] - m) * r);
    }
    float mg = (float)(group_sum<G>(sg, sm) / (double)n);
    float mgx = (float)(group_sum<G>(sgx, sm) / (double)n);
#pragma unroll
    for (int k = 0; k < 4 * ROW_CHUNKS; k++) gv[k] = r * (gv[k] - mg - (xv[k] - m) * r * mgx);
    m_row_store<G>(dx + row * n, gv, n, lane);
}

// main's cross-entropy forward: lane j reads elements j, j+G, ... of its row from memory,
// once for the maximum and again for the sum.
template <typename S, int G>
__global__ void __launch_bounds__(BLOCK) m_cross_entropy_rows(unsigned long long loss, int dtl, float *lse, const S *logits, const long long *labels, long long n,
                                                             long long c, long long ignore, double *part, unsigned int *ticket, ErrorFlag *flag, unsigned int seq) {
    typedef float T;
    __shared__ double sm[BLOCK / 32];
    __shared__ T smx[BLOCK / 32];
    int lane = group_lane<G>();
    double sum = 0, count = 0;
    for (long long row = group_row<G>(); row < n; row += (long long)gridDim.x * (BLOCK / G)) {
        long long l = labels[row];
        if (lane == 0 && l != ignore && !label_ok(l, c)) report(flag, seq, ERR_CROSS_ENTROPY, row, l, c);
        const S *xr = logits + row * c;
        T mx = NEG_INF;
        for (long long j = lane; j < c; j += G) mx = fmax_nan(mx, row_get(xr, j));
        mx = group_max<G>(mx, smx);
        T v = mx;
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
        st<T>(loss, dtl, 0, (T)(sum / count));
        lse[n] = (T)count;
    }
}

// ---- candidates ------------------------------------------------------------------------

// c_ce_fsum: the branch's register-row forward with each lane's sum of exp in float
// (one conversion to double a lane, not an element): changes bits.
template <typename S, int G>
__global__ void __launch_bounds__(BLOCK) c_ce_fsum(unsigned long long loss, int dtl, float *lse, const S *logits, const long long *labels, long long n, long long c,
                                                  long long ignore, double *part, unsigned int *ticket, ErrorFlag *flag, unsigned int seq) {
    __shared__ float smx[BLOCK / 32];
    cross_entropy_k<S, G>(loss, dtl, lse, logits, labels, n, c, ignore, part, ticket, flag, seq, [&](const S *xr, int lane, double *sm) {
        reg_row<S> v;
        v.template load<G, true>(xr, c, lane);
        float mx = NEG_INF;
#pragma unroll
        for (int k = 0; k < 4 * ROW_CHUNKS; k++) {
            if (!row_in<G, true>(k, c, lane)) break;
            mx = fmax_nan(mx, v.at(k));
        }
        mx = group_max<G>(mx, smx);
        return lse_of<G>(mx, sm, [&] {
            float s = 0;
#pragma unroll
            for (int k = 0; k < 4 * ROW_CHUNKS; k++) {
                if (!row_in<G, true>(k, c, lane)) break;
                s += c_exp(v.at(k) - mx);
            }
            return (double)s;
        });
    });
}

template <typename S, int U>
__global__ void __launch_bounds__(BLOCK) c_ce_backward_words(S *dl, const S *logits, const float *lse, const long long *labels, int n, int c, long long ignore,
                                                            unsigned long long g, int dtg, ErrorFlag *flag, unsigned int seq) {
    cross_entropy_backward_words_k<S, U>(dl, logits, lse, labels, n, c, ignore, g, dtg, flag, seq);
}

// c_row_load / c_row_store: row_load and row_store (V16) with C chunk slots a lane
// instead of ROW_CHUNKS: for rows of up to G·C·4 the same chunks in the same slots, so
// the same sums and bits, in fewer registers.
template <int G, int C, typename S> __device__ __forceinline__ void c_row_load(float *v, const S *r, long long n, int lane, float fill) {
    int odd = lane & 1;
#pragma unroll
    for (int i = 0; i < C; i += 2) {
        long long j = chunk_at<G>(lane - odd, i + odd);
        uint4 a = j < n ? *(const uint4 *)(r + j) : make_uint4(0, 0, 0, 0);
        uint2 keep = odd ? make_uint2(a.z, a.w) : make_uint2(a.x, a.y);
        uint2 give = odd ? make_uint2(a.x, a.y) : make_uint2(a.z, a.w);
        uint2 got = make_uint2(__shfl_xor_sync(0xffffffffu, give.x, 1), __shfl_xor_sync(0xffffffffu, give.y, 1));
        unpack4<S>(v + 4 * i, odd ? got : keep);
        unpack4<S>(v + 4 * (i + 1), odd ? keep : got);
#pragma unroll
        for (int s = 0; s < 2; s++)
            if (chunk_at<G>(lane, i + s) >= n) {
#pragma unroll
                for (int k = 0; k < 4; k++) v[4 * (i + s) + k] = fill;
            }
    }
}
template <int G, int C, typename S> __device__ __forceinline__ void c_row_store(S *r, const float *v, long long n, int lane) {
#pragma unroll
    for (int i = 0; i < C; i += 2) pair_store<G, true>(r, v + 4 * i, i, n, lane);
}

// c_layer_norm: the branch's layer_norm_regs_k (V16) with C chunk slots (C = ROW_CHUNKS:
// the same kernel; fewer: the same bits for rows of up to G·C·4); with FSUM, each
// lane's sums of x and of (x - mean)² in float (changes bits: a probe of what the
// float64 conversions cost). Rows as floats (main's form), stored whole.
template <typename S, int G, int C, bool FSUM>
__device__ __forceinline__ void c_layer_norm_k(S *y, float *mean, float *rstd, const S *x, const S *w, const S *b, long long rows, long long n, float eps) {
    __shared__ double sm[BLOCK / 32];
    long long row = group_row<G>();
    int lane = group_lane<G>();
    if (row >= rows) return;
    float v[4 * C];
    c_row_load<G, C>(v, x + row * n, n, lane, 0);
    double mu, ss;
    if (FSUM) {
        float s = 0;
#pragma unroll
        for (int k = 0; k < 4 * C; k++) s += v[k];
        mu = group_sum<G>((double)s, sm) / (double)n;
        float fm = (float)mu, q = 0;
#pragma unroll
        for (int k = 0; k < 4 * C; k++) {
            if (!row_in<G, true>(k, n, lane)) break;
            float d = v[k] - fm;
            q += d * d;
        }
        ss = group_sum<G>((double)q, sm);
    } else {
        double s = 0;
#pragma unroll
        for (int k = 0; k < 4 * C; k++) s += (double)v[k];
        mu = group_sum<G>(s, sm) / (double)n;
        ss = 0;
#pragma unroll
        for (int k = 0; k < 4 * C; k++) {
            if (!row_in<G, true>(k, n, lane)) break;
            double d = (double)v[k] - mu;
            ss += d * d;
        }
        ss = group_sum<G>(ss, sm);
    }
    float r = (float)(1.0 / sqrt(ss / (double)n + (double)eps));
    float m = (float)mu;
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = r;
    }
#pragma unroll
    for (int i = 0; i < C; i++) {
        long long j = chunk_at<G>(lane, i);
        float t[4];
#pragma unroll
        for (int k = 0; k < 4; k++) v[4 * i + k] = (v[4 * i + k] - m) * r;
        if (w) {
            chunk_load<true>(t, w, j, n, 0);
#pragma unroll
            for (int k = 0; k < 4; k++) v[4 * i + k] *= t[k];
        }
        if (b) {
            chunk_load<true>(t, b, j, n, 0);
#pragma unroll
            for (int k = 0; k < 4; k++) v[4 * i + k] += t[k];
        }
    }
    c_row_store<G, C>(y + row * n, v, n, lane);
}
template <typename S, int G, int C, bool FSUM>
__global__ void __launch_bounds__(BLOCK) c_layer_norm(S *y, float *mean, float *rstd, const S *x, const S *w, const S *b, long long rows, long long n, float eps) {
    c_layer_norm_k<S, G, C, FSUM>(y, mean, rstd, x, w, b, rows, n, eps);
}
// vol_row is reg_row for 16-bit rows with each conversion an asm volatile, so that
// ptxas converts at each use instead of keeping the floats live (registers).
template <typename S> struct vol_row {
    uint2 bits[ROW_CHUNKS];
    template <int G, bool V16> __device__ __forceinline__ void load(const S *r, long long n, int lane) { row_load_bits<G, V16>(bits, r, n, lane); }
    __device__ __forceinline__ float at(int k) const {
        unsigned int h = k % 4 < 2 ? bits[k / 4].x : bits[k / 4].y, u;
        if constexpr (std::is_same<S, f16_t>::value) {
            unsigned short b = (unsigned short)(k % 2 ? h >> 16 : h & 0xffffu);
            float f;
            asm volatile("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(b));
            return f;
        }
        if (k % 2) asm volatile("and.b32 %0, %1, 0xffff0000;" : "=r"(u) : "r"(h));
        else asm volatile("shl.b32 %0, %1, 16;" : "=r"(u) : "r"(h));
        return __uint_as_float(u);
    }
};
template <typename S, int G>
__global__ void __launch_bounds__(BLOCK) c_layer_norm_vol(S *y, float *mean, float *rstd, const S *x, const S *w, const S *b, long long rows, long long n, float eps) {
    layer_norm_regs_k<S, G, true, vol_row<S>>(y, mean, rstd, x, w, b, rows, n, eps);
}
template <typename S, int G>
__global__ void __launch_bounds__(BLOCK) c_layer_norm_dx_vol(S *dx, const S *g, const S *x, const float *mean, const float *rstd, const S *w, long long rows, long long n) {
    layer_norm_dx_regs_k<S, G, true, vol_row<S>>(dx, g, x, mean, rstd, w, rows, n);
}

// c_layer_norm_dx_4: the branch's dx held to 64 registers (four blocks an SM).
template <typename S, int G>
__global__ void __launch_bounds__(BLOCK, 4) c_layer_norm_dx_4(S *dx, const S *g, const S *x, const float *mean, const float *rstd, const S *w, long long rows, long long n) {
    layer_norm_dx_regs_k<S, G, true, vol_row<S>>(dx, g, x, mean, rstd, w, rows, n);
}

// c_layer_norm_dx_c: the branch's dx kernel with C chunk slots (the same bits for rows
// of up to G·C·4).
template <typename S, int G, int C>
__global__ void __launch_bounds__(BLOCK) c_layer_norm_dx_c(S *dx, const S *g, const S *x, const float *mean, const float *rstd, const S *w, long long rows, long long n) {
    __shared__ double sm[BLOCK / 32];
    long long row = group_row<G>();
    int lane = group_lane<G>();
    if (row >= rows) return;
    float m = mean[row], r = rstd[row];
    float gv[4 * C], xv[4 * C];
    c_row_load<G, C>(gv, g + row * n, n, lane, 0);
    c_row_load<G, C>(xv, x + row * n, n, lane, 0);
#pragma unroll
    for (int i = 0; i < C; i++) {
        float t[4];
        chunk_load<true>(t, w, chunk_at<G>(lane, i), n, 0);
#pragma unroll
        for (int k = 0; k < 4; k++) gv[4 * i + k] *= t[k];
    }
    double sg = 0, sgx = 0;
#pragma unroll
    for (int k = 0; k < 4 * C; k++) {
        if (!row_in<G, true>(k, n, lane)) break;
        sg += (double)gv[k];
        sgx += (double)(gv[k] * (xv[k] - m) * r);
    }
    float mg = (float)(group_sum<G>(sg, sm) / (double)n);
    float mgx = (float)(group_sum<G>(sgx, sm) / (double)n);
#pragma unroll
    for (int k = 0; k < 4 * C; k++) gv[k] = r * (gv[k] - mg - (xv[k] - m) * r * mgx);
    c_row_store<G, C>(dx + row * n, gv, n, lane);
}
// c_softmax_c: the branch's softmax with C chunk slots.
template <typename S, int G, int C>
__global__ void __launch_bounds__(BLOCK) c_softmax_c(S *dst, const S *x, long long outer, long long n, int log) {
    __shared__ double sm[BLOCK / 32];
    __shared__ float smx[BLOCK / 32];
    long long row = group_row<G>();
    int lane = group_lane<G>();
    if (row >= outer) return;
    float v[4 * C];
    c_row_load<G, C>(v, x + row * n, n, lane, NEG_INF);
    float mx = NEG_INF;
#pragma unroll
    for (int k = 0; k < 4 * C; k++) mx = fmax_nan(mx, v[k]);
    mx = group_max<G>(mx, smx);
    double sum = 0;
#pragma unroll
    for (int k = 0; k < 4 * C; k++) {
        if (!row_in<G, true>(k, n, lane)) break;
        float e = c_exp(v[k] - mx);
        sum += (double)e;
        if (!log) v[k] = e;
    }
    sum = group_sum<G>(sum, sm);
    float ls = (float)::log(sum), scale = (float)(1.0 / sum);
#pragma unroll
    for (int k = 0; k < 4 * C; k++) v[k] = log ? (v[k] - mx) - ls : v[k] * scale;
    c_row_store<G, C>(dst + row * n, v, n, lane);
}

// ---- the harness ----------------------------------------------------------------------

static int sms;
static cudaEvent_t ev0, ev1;
static void *flushBuf;
static const size_t FLUSH = 256u << 20; // > L2 (50 MB on H100)

// gridFor is backend.go's grid: a block per 256 items, at most 32 per SM.
static unsigned gridFor(long long n) { return (unsigned)std::max(1LL, std::min((n + BLOCK - 1) / BLOCK, 32LL * sms)); }
// rowsGrid is backend.go's rowsGrid: BLOCK/g rows a block.
static unsigned rowsGrid(long long rows, int g) {
    long long per = BLOCK / g;
    return (unsigned)std::max(1LL, (rows + per - 1) / per);
}

static float timeUs(const std::function<void()> &f) {
    for (int k = 0; k < 3; k++) f();
    CK(cudaDeviceSynchronize());
    std::vector<float> t;
    for (int k = 0; k < 21; k++) {
        CK(cudaMemsetAsync(flushBuf, k, FLUSH));
        CK(cudaEventRecord(ev0));
        f();
        CK(cudaEventRecord(ev1));
        CK(cudaEventSynchronize(ev1));
        float ms;
        CK(cudaEventElapsedTime(&ms, ev0, ev1));
        t.push_back(ms * 1000);
    }
    CK(cudaGetLastError());
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

static double copyGBs(size_t bytes) {
    static std::map<size_t, double> memo;
    if (memo.count(bytes)) return memo[bytes];
    void *a, *b;
    CK(cudaMalloc(&a, bytes / 2));
    CK(cudaMalloc(&b, bytes / 2));
    CK(cudaMemset(a, 1, bytes / 2));
    float us = timeUs([&] { CK(cudaMemcpyAsync(b, a, bytes / 2, cudaMemcpyDeviceToDevice)); });
    CK(cudaFree(a));
    CK(cudaFree(b));
    printf("%-16s %-12s %-34s %9.2f us %8.1f GB/s  (memcpy D2D of %zu MB read + written)\n", "reference", "-", "cudaMemcpy", us, bytes / us / 1e3, bytes >> 20);
    return memo[bytes] = bytes / us / 1e3;
}

static std::vector<unsigned char> fetch(const void *d, size_t bytes) {
    std::vector<unsigned char> h(bytes);
    CK(cudaMemcpy(h.data(), d, bytes, cudaMemcpyDeviceToHost));
    return h;
}

static long long ord16(unsigned short h) { return (h & 0x8000) ? -(long long)(h & 0x7fff) : (long long)h; }
static long long ord32(unsigned int u) { return (u & 0x80000000u) ? -(long long)(u & 0x7fffffffu) : (long long)u; }

// Family is one kernel family at one shape: main's outputs (the first variant run) and
// the bytes its op moves; host, where set, is the error of a variant's outputs against
// a float64 reference on the host (a line of text).
struct Family {
    std::string name, shape;
    size_t bytes;
    std::vector<void *> outs;
    std::vector<size_t> outBytes;
    std::vector<int> elem; // element size of each output for ulps: 2, 4, or 0 (bytes compared)
    std::vector<std::vector<unsigned char>> ref;
    std::function<std::string(const std::vector<std::vector<unsigned char>> &)> host;
};

static void run(Family &f, const char *variant, bool changes, const std::function<void()> &launch) {
    for (size_t k = 0; k < f.outs.size(); k++) CK(cudaMemset(f.outs[k], 0xcd, f.outBytes[k]));
    launch();
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    std::vector<std::vector<unsigned char>> got;
    for (size_t k = 0; k < f.outs.size(); k++) got.push_back(fetch(f.outs[k], f.outBytes[k]));
    std::string same;
    if (f.ref.empty()) {
        f.ref = got;
        same = "baseline";
    } else {
        bool eq = true;
        long long diffs = 0, maxUlp = 0;
        for (size_t k = 0; k < got.size(); k++) {
            if (got[k] == f.ref[k]) continue;
            eq = false;
            if (f.elem[k] == 2) {
                const unsigned short *a = (const unsigned short *)got[k].data(), *b = (const unsigned short *)f.ref[k].data();
                for (size_t i = 0; i < got[k].size() / 2; i++)
                    if (a[i] != b[i]) diffs++, maxUlp = std::max(maxUlp, std::llabs(ord16(a[i]) - ord16(b[i])));
            } else if (f.elem[k] == 4) {
                const unsigned int *a = (const unsigned int *)got[k].data(), *b = (const unsigned int *)f.ref[k].data();
                for (size_t i = 0; i < got[k].size() / 4; i++)
                    if (a[i] != b[i]) diffs++, maxUlp = std::max(maxUlp, std::llabs(ord32(a[i]) - ord32(b[i])));
            } else {
                for (size_t i = 0; i < got[k].size(); i++) diffs += got[k][i] != f.ref[k][i];
            }
        }
        char buf[200];
        if (eq) snprintf(buf, sizeof buf, "bits");
        else snprintf(buf, sizeof buf, "maxulp %lld (%lld differ)%s", maxUlp, diffs, changes ? " changes bits by design" : " MISMATCH: a bug");
        same = buf;
    }
    float us = timeUs(launch);
    double gbs = f.bytes / us / 1e3;
    std::string h = f.host ? f.host(got) : "";
    printf("%-16s %-12s %-34s %9.2f us %8.1f GB/s %6.1f%%  %s  %s\n", f.name.c_str(), f.shape.c_str(), variant, us, gbs, 100 * gbs / copyGBs(f.bytes), same.c_str(), h.c_str());
    fflush(stdout);
}

// ---- inputs ---------------------------------------------------------------------------

static unsigned long long rng = 0x9e3779b97f4a7c15ull;
static unsigned int next32() {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (unsigned int)(rng >> 16);
}
// normals are standard normal numbers (Box-Muller), as ops_compare's Randn; inputs take
// them from an offset.
static std::vector<float> normals;
static void makeNormals(long long n) {
    normals.resize(n);
    for (long long i = 0; i + 1 < n; i += 2) {
        float u = ((next32() & 0xffffff) + 1) / 16777217.0f, v = (next32() & 0xffffff) / 16777216.0f;
        float r = sqrtf(-2 * logf(u));
        normals[i] = r * cosf(6.2831853f * v), normals[i + 1] = r * sinf(6.2831853f * v);
    }
}
static unsigned short toBits(int dt, float f) {
    if (dt == DT_F16) {
        __half h = __float2half_rn(f);
        return *(unsigned short *)&h;
    }
    unsigned int u;
    memcpy(&u, &f, 4);
    return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
static float host16(int dt, unsigned short h) {
    if (dt == DT_F16) {
        __half x;
        memcpy(&x, &h, 2);
        return __half2float(x);
    }
    unsigned int u = (unsigned int)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static const char *dtName(int dt) { return dt == DT_F32 ? "f32" : dt == DT_F16 ? "f16" : "bf16"; }

// Data holds a matrix's elements as the host sees them (float) and on the device in dt.
struct Data {
    int dt;
    long long rows, cols;
    std::vector<float> h;
    void *d;
    size_t esz() const { return dt == DT_F32 ? 4 : 2; }
    float at(long long i) const { return h[i]; }
};

static Data upload(void *d, int dt, long long rows, long long cols, float scale, long long from) {
    Data x{dt, rows, cols, std::vector<float>(rows * cols), d};
    long long n = rows * cols;
    auto gauss = [&](long long i) { return normals[(from + i) % normals.size()]; };
    if (dt == DT_F32) {
        for (long long i = 0; i < n; i++) x.h[i] = scale * gauss(i);
        CK(cudaMemcpy(d, x.h.data(), n * 4, cudaMemcpyHostToDevice));
    } else {
        std::vector<unsigned short> b(n);
        for (long long i = 0; i < n; i++) b[i] = toBits(dt, scale * gauss(i)), x.h[i] = host16(dt, b[i]);
        CK(cudaMemcpy(d, b.data(), n * 2, cudaMemcpyHostToDevice));
    }
    return x;
}

// outAt reads element i of an output of dt fetched to the host.
static double outAt(int dt, const std::vector<unsigned char> &o, long long i) {
    if (dt == DT_F32) return ((const float *)o.data())[i];
    return host16(dt, ((const unsigned short *)o.data())[i]);
}

// Rows the host references check (of every shape: enough to see any bug, quick).
static const long long CHECK_ROWS = 256;

int main() {
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("# %s, %d SMs; columns: family shape variant time GB/s %%copy bits|maxulp host-check\n", prop.name, sms);
    CK(cudaEventCreate(&ev0));
    CK(cudaEventCreate(&ev1));
    CK(cudaMalloc(&flushBuf, FLUSH));
    const long long MAXN = 64LL << 20;
    makeNormals(MAXN);
    void *xBuf, *yBuf, *gBuf, *wBuf, *bBuf, *lseBuf, *meanBuf, *rstdBuf, *lossBuf, *labBuf, *partBuf, *gradBuf;
    unsigned int *ticket;
    CK(cudaMalloc(&xBuf, MAXN * 4));
    CK(cudaMalloc(&yBuf, MAXN * 4));
    CK(cudaMalloc(&gBuf, MAXN * 4));
    CK(cudaMalloc(&wBuf, 4096 * 4));
    CK(cudaMalloc(&bBuf, 4096 * 4));
    CK(cudaMalloc(&lseBuf, (65536 + 1) * 4));
    CK(cudaMalloc(&meanBuf, 65536 * 4));
    CK(cudaMalloc(&rstdBuf, 65536 * 4));
    CK(cudaMalloc(&lossBuf, 16));
    CK(cudaMalloc(&labBuf, 65536 * 8));
    CK(cudaMalloc(&partBuf, 2 * 8192 * 8 + 4096)); // two doubles a block, 8192 blocks at most
    CK(cudaMalloc(&ticket, 4));
    CK(cudaMemset(ticket, 0, 4));
    CK(cudaMalloc(&gradBuf, 8));
    ErrorFlag *flag;
    int *lock;
    CK(cudaMalloc(&flag, sizeof(ErrorFlag)));
    CK(cudaMalloc(&lock, 4));
    CK(cudaMemset(lock, 0, 4));
    {
        ErrorFlag f{};
        f.lock = lock;
        CK(cudaMemcpy(flag, &f, sizeof f, cudaMemcpyHostToDevice));
    }
    double *part = (double *)partBuf;
    const long long ignore = -100;

    struct Shape {
        long long rows, cols;
    };
    for (Shape sh : {Shape{65536, 1024}, Shape{4096, 4096}}) {
        long long rows = sh.rows, c = sh.cols, N = rows * c;
        char shape[32];
        snprintf(shape, sizeof shape, "[%lld,%lld]", rows, c);
        bool warp = c <= 1024;
        int G = warp ? 32 : BLOCK;
        unsigned rg = rowsGrid(rows, G);
        std::vector<long long> labels(rows);
        for (long long i = 0; i < rows; i++) labels[i] = next32() % c;
        CK(cudaMemcpy(labBuf, labels.data(), rows * 8, cudaMemcpyHostToDevice));

        for (int dt : {DT_F32, DT_F16, DT_BF16}) {
            // ---- cross-entropy forward: CrossEntropy(loss of the logits' type, lse F32 [n+1]).
            Data x = upload(xBuf, dt, rows, c, 1, 0);
            size_t e = x.esz();
            unsigned long long loss = (unsigned long long)lossBuf;
            int dtl = dt;
            float *lse = (float *)lseBuf;
            const long long *lab = (const long long *)labBuf;
            unsigned ceGrid = std::min(rg, 2048u);
            // Host: lse per checked row and the loss over all rows, in float64.
            std::vector<double> hl(rows);
            double want = 0;
            for (long long i = 0; i < rows; i++) {
                double mx = -INFINITY, s = 0;
                for (long long j = 0; j < c; j++) mx = std::max(mx, (double)x.at(i * c + j));
                for (long long j = 0; j < c; j++) s += std::exp((double)x.at(i * c + j) - mx);
                hl[i] = mx + std::log(s);
                want += hl[i] - x.at(i * c + labels[i]);
            }
            want /= rows;
            Family ce{std::string("ce-fwd-") + dtName(dt), shape, (size_t)N * e, {lseBuf, lossBuf}, {(size_t)(rows + 1) * 4, e}, {4, (int)e}, {}, nullptr};
            ce.host = [&](const std::vector<std::vector<unsigned char>> &o) {
                double worst = 0;
                for (long long i = 0; i < rows; i++) worst = std::max(worst, std::fabs(((const float *)o[0].data())[i] - hl[i]) / std::max(1.0, std::fabs(hl[i])));
                double got = outAt(dt, o[1], 0);
                char b[160];
                snprintf(b, sizeof b, "host: lse max rel err %.2e, loss %.7g vs %.7g (rel %.2e)", worst, got, want, std::fabs(got - want) / std::fabs(want));
                return std::string(b);
            };
            std::function<void()> mainCE, branchCE, fsum;
            if (dt == DT_F32) {
                const float *p = (const float *)xBuf;
                mainCE = [&, p] { if (warp) m_cross_entropy_rows<float, 32><<<ceGrid, BLOCK>>>(loss, dtl, lse, p, lab, rows, c, ignore, part, ticket, flag, 1); else m_cross_entropy_rows<float, BLOCK><<<ceGrid, BLOCK>>>(loss, dtl, lse, p, lab, rows, c, ignore, part, ticket, flag, 1); };
                branchCE = [&, p] { if (warp) cross_entropy_regs_warp_f32_v16<<<ceGrid, BLOCK>>>(loss, dtl, lse, p, lab, rows, c, ignore, part, ticket, flag, 1); else cross_entropy_regs_block_f32_v16<<<ceGrid, BLOCK>>>(loss, dtl, lse, p, lab, rows, c, ignore, part, ticket, flag, 1); };
                fsum = [&, p] { if (warp) c_ce_fsum<float, 32><<<ceGrid, BLOCK>>>(loss, dtl, lse, p, lab, rows, c, ignore, part, ticket, flag, 1); else c_ce_fsum<float, BLOCK><<<ceGrid, BLOCK>>>(loss, dtl, lse, p, lab, rows, c, ignore, part, ticket, flag, 1); };
            } else if (dt == DT_F16) {
                const f16_t *p = (const f16_t *)xBuf;
                mainCE = [&, p] { if (warp) m_cross_entropy_rows<f16_t, 32><<<ceGrid, BLOCK>>>(loss, dtl, lse, p, lab, rows, c, ignore, part, ticket, flag, 1); else m_cross_entropy_rows<f16_t, BLOCK><<<ceGrid, BLOCK>>>(loss, dtl, lse, p, lab, rows, c, ignore, part, ticket, flag, 1); };
                branchCE = [&, p] { if (warp) cross_entropy_regs_warp_f16_v16<<<ceGrid, BLOCK>>>(loss, dtl, lse, p, lab, rows, c, ignore, part, ticket, flag, 1); else cross_entropy_regs_block_f16_v16<<<ceGrid, BLOCK>>>(loss, dtl, lse, p, lab, rows, c, ignore, part, ticket, flag, 1); };
                fsum = [&, p] { if (warp) c_ce_fsum<f16_t, 32><<<ceGrid, BLOCK>>>(loss, dtl, lse, p, lab, rows, c, ignore, part, ticket, flag, 1); else c_ce_fsum<f16_t, BLOCK><<<ceGrid, BLOCK>>>(loss, dtl, lse, p, lab, rows, c, ignore, part, ticket, flag, 1); };
            } else {
                const bf16_t *p = (const bf16_t *)xBuf;
                mainCE = [&, p] { if (warp) m_cross_entropy_rows<bf16_t, 32><<<ceGrid, BLOCK>>>(loss, dtl, lse, p, lab, rows, c, ignore, part, ticket, flag, 1); else m_cross_entropy_rows<bf16_t, BLOCK><<<ceGrid, BLOCK>>>(loss, dtl, lse, p, lab, rows, c, ignore, part, ticket, flag, 1); };
                branchCE = [&, p] { if (warp) cross_entropy_regs_warp_bf16_v16<<<ceGrid, BLOCK>>>(loss, dtl, lse, p, lab, rows, c, ignore, part, ticket, flag, 1); else cross_entropy_regs_block_bf16_v16<<<ceGrid, BLOCK>>>(loss, dtl, lse, p, lab, rows, c, ignore, part, ticket, flag, 1); };
                fsum = [&, p] { if (warp) c_ce_fsum<bf16_t, 32><<<ceGrid, BLOCK>>>(loss, dtl, lse, p, lab, rows, c, ignore, part, ticket, flag, 1); else c_ce_fsum<bf16_t, BLOCK><<<ceGrid, BLOCK>>>(loss, dtl, lse, p, lab, rows, c, ignore, part, ticket, flag, 1); };
            }
            run(ce, "main (rows from memory, 2 passes)", false, mainCE);
            run(ce, "branch (row in registers, v16)", true, branchCE);
            run(ce, "cand: registers + float lane sums", true, fsum);
            {
                unsigned keep = ceGrid;
                ceGrid = rg; // a block for every 8 rows (1 for 4096): the loss's sum in another order
                run(ce, "cand: branch, grid not capped at 2048", true, branchCE);
                ceGrid = keep;
            }

            // ---- cross-entropy backward: g = 1.5 (F32), lse = the forward's, count = rows.
            {
                float one5 = 1.5f;
                CK(cudaMemcpy(gradBuf, &one5, 4, cudaMemcpyHostToDevice));
                branchCE();
                CK(cudaDeviceSynchronize());
                std::vector<float> hlse(rows + 1);
                CK(cudaMemcpy(hlse.data(), lseBuf, (rows + 1) * 4, cudaMemcpyDeviceToHost));
                Family cb{std::string("ce-bwd-") + dtName(dt), shape, (size_t)N * e * 2, {yBuf}, {(size_t)N * e}, {(int)e}, {}, nullptr};
                cb.host = [&, dt](const std::vector<std::vector<unsigned char>> &o) {
                    double worst = 0, scale = 1.5 / hlse[rows];
                    for (long long i = 0; i < CHECK_ROWS; i++)
                        for (long long j = 0; j < c; j++) {
                            double w = std::exp((double)x.at(i * c + j) - hlse[i]) * scale - (j == labels[i] ? scale : 0);
                            worst = std::max(worst, std::fabs(outAt(dt, o[0], i * c + j) - w) / std::max(std::fabs(w), 1e-6));
                        }
                    char b[96];
                    snprintf(b, sizeof b, "host: max rel err %.2e (%lld rows)", worst, CHECK_ROWS);
                    return std::string(b);
                };
                unsigned long long g = (unsigned long long)gradBuf;
                int dtg = DT_F32;
                int ni = (int)rows, ci = (int)c;
                unsigned gw = gridFor(N), gu[3];
                long long words = N * e / 16;
                for (int k = 0; k < 3; k++) gu[k] = gridFor((words + (2 << k) - 1) / (2 << k));
                if (dt == DT_F32) {
                    float *d = (float *)yBuf;
                    const float *p = (const float *)xBuf;
                    run(cb, "main (thread an element)", false, [&] { cross_entropy_backward_f32_i32<<<gw, BLOCK>>>(d, p, lse, lab, ni, ci, ignore, g, dtg, flag, 1); });
                    run(cb, "branch (16-byte words, U=CE_U)", false, [&] { cross_entropy_backward_words_f32<<<gridFor((words + CE_U - 1) / CE_U), BLOCK>>>(d, p, lse, lab, ni, ci, ignore, g, dtg, flag, 1); });
                    run(cb, "cand: words U=2", false, [&] { c_ce_backward_words<float, 2><<<gu[0], BLOCK>>>(d, p, lse, lab, ni, ci, ignore, g, dtg, flag, 1); });
                    run(cb, "cand: words U=8", false, [&] { c_ce_backward_words<float, 8><<<gu[2], BLOCK>>>(d, p, lse, lab, ni, ci, ignore, g, dtg, flag, 1); });
                } else if (dt == DT_F16) {
                    f16_t *d = (f16_t *)yBuf;
                    const f16_t *p = (const f16_t *)xBuf;
                    run(cb, "main (thread an element)", false, [&] { cross_entropy_backward_f16_i32<<<gw, BLOCK>>>(d, p, lse, lab, ni, ci, ignore, g, dtg, flag, 1); });
                    run(cb, "branch (16-byte words, U=CE_U)", false, [&] { cross_entropy_backward_words_f16<<<gridFor((words + CE_U - 1) / CE_U), BLOCK>>>(d, p, lse, lab, ni, ci, ignore, g, dtg, flag, 1); });
                    run(cb, "cand: words U=2", false, [&] { c_ce_backward_words<f16_t, 2><<<gu[0], BLOCK>>>(d, p, lse, lab, ni, ci, ignore, g, dtg, flag, 1); });
                    run(cb, "cand: words U=8", false, [&] { c_ce_backward_words<f16_t, 8><<<gu[2], BLOCK>>>(d, p, lse, lab, ni, ci, ignore, g, dtg, flag, 1); });
                } else {
                    bf16_t *d = (bf16_t *)yBuf;
                    const bf16_t *p = (const bf16_t *)xBuf;
                    run(cb, "main (thread an element)", false, [&] { cross_entropy_backward_bf16_i32<<<gw, BLOCK>>>(d, p, lse, lab, ni, ci, ignore, g, dtg, flag, 1); });
                    run(cb, "branch (16-byte words, U=CE_U)", false, [&] { cross_entropy_backward_words_bf16<<<gridFor((words + CE_U - 1) / CE_U), BLOCK>>>(d, p, lse, lab, ni, ci, ignore, g, dtg, flag, 1); });
                    run(cb, "cand: words U=2", false, [&] { c_ce_backward_words<bf16_t, 2><<<gu[0], BLOCK>>>(d, p, lse, lab, ni, ci, ignore, g, dtg, flag, 1); });
                    run(cb, "cand: words U=8", false, [&] { c_ce_backward_words<bf16_t, 8><<<gu[2], BLOCK>>>(d, p, lse, lab, ni, ci, ignore, g, dtg, flag, 1); });
                }
            }
            if (dt == DT_F32) continue; // float32 softmax and layer norm are >= 90% already

            // ---- softmax and log-softmax (rows in registers, V16).
            for (int log = 0; log < 2; log++) {
                Family sf{std::string(log ? "logsoftmax-" : "softmax-") + dtName(dt), shape, (size_t)N * e * 2, {yBuf}, {(size_t)N * e}, {(int)e}, {}, nullptr};
                sf.host = [&, dt, log](const std::vector<std::vector<unsigned char>> &o) {
                    double worst = 0;
                    for (long long i = 0; i < CHECK_ROWS; i++) {
                        double l = hl[i];
                        for (long long j = 0; j < c; j++) {
                            double w = log ? x.at(i * c + j) - l : std::exp(x.at(i * c + j) - l);
                            worst = std::max(worst, std::fabs(outAt(dt, o[0], i * c + j) - w) / std::max(std::fabs(w), 1e-6));
                        }
                    }
                    char b[96];
                    snprintf(b, sizeof b, "host: max rel err %.2e (%lld rows)", worst, CHECK_ROWS);
                    return std::string(b);
                };
#define SOFTMAX_VARIANTS(S, SN)                                                                                                        \
    {                                                                                                                                  \
        S *d = (S *)yBuf;                                                                                                              \
        const S *p = (const S *)xBuf;                                                                                                  \
        run(sf, "main (to_bits stores)", false, [&] {                                                                                  \
            if (warp) m_softmax_regs<S, 32><<<rg, BLOCK>>>(d, p, rows, c, log);                                                        \
            else m_softmax_regs<S, BLOCK><<<rg, BLOCK>>>(d, p, rows, c, log);                                                          \
        });                                                                                                                            \
        run(sf, "branch (pack2 stores)", false, [&] {                                                                                  \
            if (warp) softmax_regs_warp_##SN##_v16<<<rg, BLOCK>>>(d, p, rows, c, log);                                                 \
            else softmax_regs_block_##SN##_v16<<<rg, BLOCK>>>(d, p, rows, c, log);                                                     \
        });                                                                                                                            \
        if (!warp) run(sf, "cand: 4 chunk slots (block)", false, [&] { c_softmax_c<S, BLOCK, 4><<<rg, BLOCK>>>(d, p, rows, c, log); }); \
    }
                if (dt == DT_F16) SOFTMAX_VARIANTS(f16_t, f16)
                else SOFTMAX_VARIANTS(bf16_t, bf16)
            }

            // ---- layer norm forward: weight and bias of the row's type, eps 1e-5.
            {
                Data w = upload(wBuf, dt, 1, c, 0.5f, 12345), b = upload(bBuf, dt, 1, c, 0.5f, 54321);
                float eps = 1e-5f;
                float *mean = (float *)meanBuf, *rstd = (float *)rstdBuf;
                Family ln{std::string("ln-fwd-") + dtName(dt), shape, (size_t)N * e * 2, {yBuf, meanBuf, rstdBuf}, {(size_t)N * e, (size_t)rows * 4, (size_t)rows * 4}, {(int)e, 4, 4}, {}, nullptr};
                ln.host = [&, dt](const std::vector<std::vector<unsigned char>> &o) {
                    double worst = 0;
                    for (long long i = 0; i < CHECK_ROWS; i++) {
                        double mu = 0, var = 0;
                        for (long long j = 0; j < c; j++) mu += x.at(i * c + j);
                        mu /= c;
                        for (long long j = 0; j < c; j++) var += (x.at(i * c + j) - mu) * (x.at(i * c + j) - mu);
                        double r = 1 / std::sqrt(var / c + eps);
                        for (long long j = 0; j < c; j++) {
                            double want = (x.at(i * c + j) - mu) * r * w.at(j) + b.at(j);
                            worst = std::max(worst, std::fabs(outAt(dt, o[0], i * c + j) - want) / std::max(std::fabs(want), 1.0));
                        }
                    }
                    char s[96];
                    snprintf(s, sizeof s, "host: max err %.2e (%lld rows)", worst, CHECK_ROWS);
                    return std::string(s);
                };
#define LN_VARIANTS(S, SN)                                                                                                                   \
    {                                                                                                                                        \
        S *d = (S *)yBuf;                                                                                                                    \
        const S *p = (const S *)xBuf, *pw = (const S *)wBuf, *pb = (const S *)bBuf;                                                          \
        run(ln, "main (to_bits stores)", false, [&] {                                                                                        \
            if (warp) m_layer_norm_regs<S, 32><<<rg, BLOCK>>>(d, mean, rstd, p, pw, pb, rows, c, eps);                                       \
            else m_layer_norm_regs<S, BLOCK><<<rg, BLOCK>>>(d, mean, rstd, p, pw, pb, rows, c, eps);                                         \
        });                                                                                                                                  \
        run(ln, "branch (bits in regs, pack2 pairs)", false, [&] {                                                                                        \
            if (warp) layer_norm_regs_warp_##SN##_v16<<<rg, BLOCK>>>(d, mean, rstd, p, pw, pb, rows, c, eps);                                \
            else layer_norm_regs_block_##SN##_v16<<<rg, BLOCK>>>(d, mean, rstd, p, pw, pb, rows, c, eps);                                    \
        });                                                                                                                                  \
        run(ln, "cand: conversions asm volatile", false, [&] {                                                                               \
            if (warp) c_layer_norm_vol<S, 32><<<rg, BLOCK>>>(d, mean, rstd, p, pw, pb, rows, c, eps);                                        \
            else c_layer_norm_vol<S, BLOCK><<<rg, BLOCK>>>(d, mean, rstd, p, pw, pb, rows, c, eps);                                          \
        });                                                                                                                                  \
        run(ln, "cand: float lane sums", true, [&] {                                                                                         \
            if (warp) c_layer_norm<S, 32, ROW_CHUNKS, true><<<rg, BLOCK>>>(d, mean, rstd, p, pw, pb, rows, c, eps);                   \
            else c_layer_norm<S, BLOCK, 4, true><<<rg, BLOCK>>>(d, mean, rstd, p, pw, pb, rows, c, eps);                              \
        });                                                                                                                                  \
        if (!warp) run(ln, "cand: 4 chunk slots (block)", false, [&] { c_layer_norm<S, BLOCK, 4, false><<<rg, BLOCK>>>(d, mean, rstd, p, pw, pb, rows, c, eps); }); \
    }
                if (dt == DT_F16) LN_VARIANTS(f16_t, f16)
                else LN_VARIANTS(bf16_t, bf16)
                ln.host = nullptr, ln.ref.clear();
                run(ln, "(the branch again: dx's mean and rstd)", false, [&] {
                    if (dt == DT_F16) {
                        if (warp) layer_norm_regs_warp_f16_v16<<<rg, BLOCK>>>((f16_t *)yBuf, mean, rstd, (const f16_t *)xBuf, (const f16_t *)wBuf, (const f16_t *)bBuf, rows, c, eps);
                        else layer_norm_regs_block_f16_v16<<<rg, BLOCK>>>((f16_t *)yBuf, mean, rstd, (const f16_t *)xBuf, (const f16_t *)wBuf, (const f16_t *)bBuf, rows, c, eps);
                    } else {
                        if (warp) layer_norm_regs_warp_bf16_v16<<<rg, BLOCK>>>((bf16_t *)yBuf, mean, rstd, (const bf16_t *)xBuf, (const bf16_t *)wBuf, (const bf16_t *)bBuf, rows, c, eps);
                        else layer_norm_regs_block_bf16_v16<<<rg, BLOCK>>>((bf16_t *)yBuf, mean, rstd, (const bf16_t *)xBuf, (const bf16_t *)wBuf, (const bf16_t *)bBuf, rows, c, eps);
                    }
                });

                // ---- layer norm dx: g ~ N(0,1), x, mean and rstd from the forward, w.
                upload(gBuf, dt, rows, c, 1, 777);
                Family lb{std::string("ln-dx-") + dtName(dt), shape, (size_t)N * e * 3, {yBuf}, {(size_t)N * e}, {(int)e}, {}, nullptr};
#define LN_DX_VARIANTS(S, SN)                                                                                                     \
    {                                                                                                                             \
        S *d = (S *)yBuf;                                                                                                         \
        const S *p = (const S *)xBuf, *pg = (const S *)gBuf, *pw = (const S *)wBuf;                                               \
        run(lb, "main (to_bits stores)", false, [&] {                                                                             \
            if (warp) m_layer_norm_dx_regs<S, 32><<<rg, BLOCK>>>(d, pg, p, mean, rstd, pw, rows, c);                              \
            else m_layer_norm_dx_regs<S, BLOCK><<<rg, BLOCK>>>(d, pg, p, mean, rstd, pw, rows, c);                                \
        });                                                                                                                       \
        run(lb, "branch (bits in regs, pack2 pairs)", false, [&] {                                                                             \
            if (warp) layer_norm_dx_regs_warp_##SN##_v16<<<rg, BLOCK>>>(d, pg, p, mean, rstd, pw, rows, c);                       \
            else layer_norm_dx_regs_block_##SN##_v16<<<rg, BLOCK>>>(d, pg, p, mean, rstd, pw, rows, c);                           \
        });                                                                                                                       \
        run(lb, "cand: conversions asm volatile", false, [&] {                                                                   \
            if (warp) c_layer_norm_dx_vol<S, 32><<<rg, BLOCK>>>(d, pg, p, mean, rstd, pw, rows, c);                               \
            else c_layer_norm_dx_vol<S, BLOCK><<<rg, BLOCK>>>(d, pg, p, mean, rstd, pw, rows, c);                                 \
        });                                                                                                                       \
        run(lb, "cand: volatile+bounds(256,4), 8B spill", false, [&] {                                                         \
            if (warp) c_layer_norm_dx_4<S, 32><<<rg, BLOCK>>>(d, pg, p, mean, rstd, pw, rows, c);                                 \
            else c_layer_norm_dx_4<S, BLOCK><<<rg, BLOCK>>>(d, pg, p, mean, rstd, pw, rows, c);                                   \
        });                                                                                                                       \
        if (!warp) run(lb, "cand: 4 chunk slots (block)", false, [&] { c_layer_norm_dx_c<S, BLOCK, 4><<<rg, BLOCK>>>(d, pg, p, mean, rstd, pw, rows, c); }); \
    }
                if (dt == DT_F16) LN_DX_VARIANTS(f16_t, f16)
                else LN_DX_VARIANTS(bf16_t, bf16)
            }
        }
    }
    printf("# done\n");
    return 0;
}
