// gkrows.cu: a microbenchmark of sublet's row kernels on the H100 (issue 18, branch
// rows16): the cross-entropy forward (F32, F16, BF16), softmax and log-softmax, layer
// norm forward and dx and (rows of 4096) softmax's backward in F16 and BF16, over
// ops_compare's matrix ([65536, 1024]: 64M elements, cmd/sublet-bench's ops cases) and
// [4096, 4096].
//
// Variants of each family: "main" (main's kernel at 833f112, copied here under an m_
// name where this branch changed it, or the included kernel where the code is main's,
// launched as main's Go code launches it: the baseline, whose outputs the others are
// compared with), "branch" (the kernel this branch launches, from kernels/cuda/src, as
// kernels/cuda launches it: grid, block, form) and candidates ("cand-..."). Every
// variant's outputs are compared with main's bit for bit ("bits"), else the largest
// difference in units in the last place and how many differ ("maxulp=N,differ=M", with
// ",by-design" where the variant changes bits on purpose, ",MISMATCH" where it must
// not); each family with a float64 host reference adds its error against it. Times:
// cudaEvents around the launch, L2 flushed before each, 3 warm-ups, median of 21; % is
// of a cudaMemcpy device to device moving the same bytes (read + write), timed the same
// way. Counted bytes: cross-entropy forward reads the logits once; softmax and layer
// norm read x and write y; layer norm's dx reads g and x and writes dx; softmax's
// backward reads g and y and writes dx (per-row and per-column operands not counted).
//
// One line per variant: family shape variant µs GB/s %copy bits|maxulp [host check].
// Build and run from the repository root (GPU machine), under a minute:
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

// ---- main's kernels (833f112), m_ names ------------------------------------------------

// main's row_load of a 16-bit row: row_load_bits' chunks converted after the exchange
// (this branch converts each chunk pair as it arrives again: commit 48926ab).
template <int G, bool V16, typename S> __device__ __forceinline__ void m_row_load(float *v, const S *r, long long n, int lane, float fill) {
    uint2 raw[ROW_CHUNKS];
    row_load_bits<G, V16>(raw, r, n, lane);
#pragma unroll
    for (int i = 0; i < ROW_CHUNKS; i++) {
        unpack4<S>(v + 4 * i, raw[i]);
#pragma unroll
        for (int k = 0; k < 4; k++)
            if (chunk_at<G>(lane, i) + k >= n) v[4 * i + k] = fill;
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
    m_row_load<G, true>(v, x + row * n, n, lane, NEG_INF);
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
    row_store<G, true>(dst + row * n, v, n, lane);
}

template <typename S, int G>
__global__ void __launch_bounds__(BLOCK) m_softmax_backward_regs(S *dx, const S *g, const S *y, long long outer, long long n, int log) {
    __shared__ double sm[BLOCK / 32];
    long long row = group_row<G>();
    int lane = group_lane<G>();
    if (row >= outer) return;
    float gv[4 * ROW_CHUNKS], yv[4 * ROW_CHUNKS];
    m_row_load<G, true>(gv, g + row * n, n, lane, 0);
    m_row_load<G, true>(yv, y + row * n, n, lane, 0);
    double dot = 0;
#pragma unroll
    for (int k = 0; k < 4 * ROW_CHUNKS; k++) {
        if (!row_in<G, true>(k, n, lane)) break;
        dot += log ? (double)gv[k] : (double)gv[k] * (double)yv[k];
    }
    float d = (float)group_sum<G>(dot, sm);
#pragma unroll
    for (int k = 0; k < 4 * ROW_CHUNKS; k++) gv[k] = log ? gv[k] - c_exp(yv[k]) * d : yv[k] * (gv[k] - d);
    row_store<G, true>(dx + row * n, gv, n, lane);
}

// main's cross-entropy register-row forward: expf a term, each converted to double and
// summed in double.
template <typename S, int G>
__global__ void __launch_bounds__(BLOCK) m_cross_entropy_regs(unsigned long long loss, int dtl, float *lse, const S *logits, const long long *labels, long long n,
                                                             long long c, long long ignore, double *part, unsigned int *ticket, ErrorFlag *flag, unsigned int seq) {
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
            double s = 0;
#pragma unroll
            for (int k = 0; k < 4 * ROW_CHUNKS; k++) {
                if (!row_in<G, true>(k, c, lane)) break;
                s += (double)c_exp(v.at(k) - mx);
            }
            return s;
        });
    });
}

// ---- candidates ------------------------------------------------------------------------

// c_ce_pmax: the branch's forward (16-bit rows) with the row's maximum taken two
// elements an instruction on its bits (max.NaN.{f16,bf16}x2, no conversions), the
// two halves then compared as floats: the same maximum, so the same bits but for the
// sign of a zero maximum, which no sum can tell.
template <typename S> __device__ __forceinline__ unsigned int c_max2(unsigned int a, unsigned int b) {
    unsigned int r;
    if constexpr (std::is_same<S, f16_t>::value) asm("max.NaN.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    else asm("max.NaN.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    return r;
}
template <typename S, int G>
__global__ void __launch_bounds__(BLOCK) c_ce_pmax(unsigned long long loss, int dtl, float *lse, const S *logits, const long long *labels, long long n, long long c,
                                                  long long ignore, double *part, unsigned int *ticket, ErrorFlag *flag, unsigned int seq) {
    if constexpr (sizeof(S) == 2) { // launched for 16-bit rows only
    __shared__ float smx[BLOCK / 32];
    cross_entropy_k<S, G>(loss, dtl, lse, logits, labels, n, c, ignore, part, ticket, flag, seq, [&](const S *xr, int lane, double *sm) {
        reg_row<S> v;
        v.template load<G, true>(xr, c, lane);
        unsigned int ninf = std::is_same<S, f16_t>::value ? 0xfc00fc00u : 0xff80ff80u, m2 = ninf;
#pragma unroll
        for (int i = 0; i < ROW_CHUNKS; i++) {
            if (!row_in<G, true>(4 * i, c, lane)) break;
            m2 = c_max2<S>(m2, c_max2<S>(v.bits[i].x, v.bits[i].y));
        }
        float mx = max_nan(from_bits<S>((unsigned short)(m2 & 0xffffu)), from_bits<S>((unsigned short)(m2 >> 16)));
        mx = group_max<G>(mx, smx);
        return lse_of<G>(mx, sm, [&] {
            float s = 0;
#pragma unroll
            for (int k = 0; k < 4 * ROW_CHUNKS; k++) {
                if (!row_in<G, true>(k, c, lane)) break;
                s += lse_term(v.at(k) - mx);
            }
            return (double)s;
        });
    });
    }
}

// vol_row is reg_row for 16-bit rows with each conversion an asm volatile, so that
// ptxas converts at each use instead of keeping the floats live (registers): BF16 layer
// norm's forward over rows of 1024 took 73 registers (three blocks an SM), F16's 54.
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

// c_layer_norm_vol: layer_norm_regs_k (V16, 8 slots) with its row in a vol_row: the
// same bits.
template <typename S, int G>
__global__ void __launch_bounds__(BLOCK) c_layer_norm_vol(S *y, float *mean, float *rstd, const S *x, const S *w, const S *b, long long rows, long long n, float eps) {
    __shared__ double sm[BLOCK / 32];
    long long row = group_row<G>();
    int lane = group_lane<G>();
    if (row >= rows) return;
    vol_row<S> v;
    v.template load<G, true>(x + row * n, n, lane);
    double s = 0;
#pragma unroll
    for (int k = 0; k < 4 * ROW_CHUNKS; k++) s += (double)v.at(k);
    double mu = group_sum<G>(s, sm) / (double)n;
    double ss = 0;
#pragma unroll
    for (int k = 0; k < 4 * ROW_CHUNKS; k++) {
        if (!row_in<G, true>(k, n, lane)) break;
        double d = (double)v.at(k) - mu;
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
    for (int i = 0; i < ROW_CHUNKS; i += 2) {
        float o[8], t[4];
#pragma unroll
        for (int h = 0; h < 8; h += 4) {
            long long j = chunk_at<G>(lane, i + h / 4);
#pragma unroll
            for (int k = 0; k < 4; k++) o[h + k] = (v.at(4 * i + h + k) - m) * r;
            if (w) {
                chunk_load<true>(t, w, j, n, 0);
#pragma unroll
                for (int k = 0; k < 4; k++) o[h + k] *= t[k];
            }
            if (b) {
                chunk_load<true>(t, b, j, n, 0);
#pragma unroll
                for (int k = 0; k < 4; k++) o[h + k] += t[k];
            }
        }
        pair_store<G, true>(y + row * n, o, i, n, lane);
    }
}

// ---- the harness ----------------------------------------------------------------------

static int sms;
static cudaEvent_t ev0, ev1;
static void *flushBuf;
static const size_t FLUSH = 256u << 20; // > L2 (50 MB on H100)

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
    printf("copy %zuMB cudaMemcpy %.2f %.1f 100.0 - (memcpy D2D, MB read + written)\n", bytes >> 20, us, bytes / us / 1e3);
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
        else snprintf(buf, sizeof buf, "maxulp=%lld,differ=%lld,%s", maxUlp, diffs, changes ? "by-design" : "MISMATCH");
        same = buf;
    }
    float us = timeUs(launch);
    double gbs = f.bytes / us / 1e3;
    std::string h = f.host ? f.host(got) : "";
    double pct = 100 * gbs / copyGBs(f.bytes);
    printf("%s %s %s %.2f %.1f %.1f %s %s\n", f.name.c_str(), f.shape.c_str(), variant, us, gbs, pct, same.c_str(), h.c_str());
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
    printf("# gkrows (rows16): %s, %d SMs; columns: family shape variant us GB/s %%copy bits|maxulp [host check]\n", prop.name, sms);
    CK(cudaEventCreate(&ev0));
    CK(cudaEventCreate(&ev1));
    CK(cudaMalloc(&flushBuf, FLUSH));
    const long long MAXN = 64LL << 20;
    makeNormals(MAXN);
    void *xBuf, *yBuf, *gBuf, *wBuf, *bBuf, *lseBuf, *meanBuf, *rstdBuf, *lossBuf, *labBuf, *partBuf;
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
            unsigned ceGrid = std::min(rg, 2048u); // loss.go: ceMaxBlocks
            // Host: lse of every row and the loss over all rows, in float64.
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
                double worst = 0, worstAbs = 0;
                for (long long i = 0; i < rows; i++) {
                    double d = std::fabs(((const float *)o[0].data())[i] - hl[i]);
                    worst = std::max(worst, d / std::max(1.0, std::fabs(hl[i]))), worstAbs = std::max(worstAbs, d);
                }
                double got = outAt(dt, o[1], 0);
                char b[160];
                snprintf(b, sizeof b, "host:lse_rel=%.2e,lse_abs=%.2e,loss=%.7g,want=%.7g", worst, worstAbs, got, want);
                return std::string(b);
            };
#define CE_VARIANTS(S, SN, BF)                                                                                                                       \
    {                                                                                                                                              \
        const S *p = (const S *)xBuf;                                                                                                              \
        auto args = [&](auto k, unsigned grid) { k<<<grid, BLOCK>>>(loss, dtl, lse, p, lab, rows, c, ignore, part, ticket, flag, 1); };           \
        run(ce, "main", false, [&] { warp ? args(m_cross_entropy_regs<S, 32>, ceGrid) : args(m_cross_entropy_regs<S, BLOCK>, ceGrid); });          \
        run(ce, "branch", true, [&] {                                                                                                              \
            if (warp) args(cross_entropy_regs_warp_##SN##_v16, ceGrid);                                                                            \
            else args(cross_entropy_regs_##BF##_##SN##_v16, ceGrid);                                                                               \
        });                                                                                                                                        \
        if (sizeof(S) == 2) run(ce, "cand-packed-max", true, [&] { warp ? args(c_ce_pmax<S, 32>, ceGrid) : args(c_ce_pmax<S, BLOCK>, ceGrid); }); \
    }
            // the branch's block form: block4 for 16-bit rows of 4096, block for float32
            if (dt == DT_F32) CE_VARIANTS(float, f32, block)
            else if (dt == DT_F16) CE_VARIANTS(f16_t, f16, block4)
            else CE_VARIANTS(bf16_t, bf16, block4)
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
                    snprintf(b, sizeof b, "host:rel=%.2e(%lld rows)", worst, CHECK_ROWS);
                    return std::string(b);
                };
#define SOFTMAX_VARIANTS(S, SN)                                                                                     \
    {                                                                                                               \
        S *d = (S *)yBuf;                                                                                           \
        const S *p = (const S *)xBuf;                                                                               \
        run(sf, "main", false, [&] {                                                                                \
            if (warp) m_softmax_regs<S, 32><<<rg, BLOCK>>>(d, p, rows, c, log);                                     \
            else m_softmax_regs<S, BLOCK><<<rg, BLOCK>>>(d, p, rows, c, log);                                       \
        });                                                                                                         \
        run(sf, "branch", false, [&] {                                                                              \
            if (warp) softmax_regs_warp_##SN##_v16<<<rg, BLOCK>>>(d, p, rows, c, log);                              \
            else softmax_regs_block4_##SN##_v16<<<rg, BLOCK>>>(d, p, rows, c, log);                                 \
        });                                                                                                         \
    }
                if (dt == DT_F16) SOFTMAX_VARIANTS(f16_t, f16)
                else SOFTMAX_VARIANTS(bf16_t, bf16)
            }

            // ---- softmax backward (rows of 4096 only: the block4 form): g ~ N(0,1), y = x.
            if (!warp) {
                upload(gBuf, dt, rows, c, 1, 777);
                Family sb{std::string("softmax-bwd-") + dtName(dt), shape, (size_t)N * e * 3, {yBuf}, {(size_t)N * e}, {(int)e}, {}, nullptr};
#define SOFTMAX_BWD_VARIANTS(S, SN)                                                                                               \
    {                                                                                                                             \
        S *d = (S *)yBuf;                                                                                                         \
        const S *p = (const S *)xBuf, *pg = (const S *)gBuf;                                                                      \
        run(sb, "main", false, [&] { m_softmax_backward_regs<S, BLOCK><<<rg, BLOCK>>>(d, pg, p, rows, c, 0); });                  \
        run(sb, "branch", false, [&] { softmax_backward_regs_block4_##SN##_v16<<<rg, BLOCK>>>(d, pg, p, rows, c, 0); });          \
    }
                if (dt == DT_F16) SOFTMAX_BWD_VARIANTS(f16_t, f16)
                else SOFTMAX_BWD_VARIANTS(bf16_t, bf16)
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
                    snprintf(s, sizeof s, "host:err=%.2e(%lld rows)", worst, CHECK_ROWS);
                    return std::string(s);
                };
                // main's layer norm kernels are the included block and warp forms (this
                // branch changed only their chunk slots' count into a parameter).
#define LN_VARIANTS(S, SN)                                                                                                    \
    {                                                                                                                         \
        S *d = (S *)yBuf;                                                                                                     \
        const S *p = (const S *)xBuf, *pw = (const S *)wBuf, *pb = (const S *)bBuf;                                           \
        run(ln, "main", false, [&] {                                                                                          \
            if (warp) layer_norm_regs_warp_##SN##_v16<<<rg, BLOCK>>>(d, mean, rstd, p, pw, pb, rows, c, eps);                 \
            else layer_norm_regs_block_##SN##_v16<<<rg, BLOCK>>>(d, mean, rstd, p, pw, pb, rows, c, eps);                     \
        });                                                                                                                   \
        run(ln, "branch", false, [&] {                                                                                        \
            if (warp) layer_norm_regs_warp_##SN##_v16<<<rg, BLOCK>>>(d, mean, rstd, p, pw, pb, rows, c, eps);                 \
            else layer_norm_regs_block4_##SN##_v16<<<rg, BLOCK>>>(d, mean, rstd, p, pw, pb, rows, c, eps);                    \
        });                                                                                                                   \
        if (warp) run(ln, "cand-vol-conversions", false, [&] { c_layer_norm_vol<S, 32><<<rg, BLOCK>>>(d, mean, rstd, p, pw, pb, rows, c, eps); }); \
    }
                if (dt == DT_F16) LN_VARIANTS(f16_t, f16)
                else LN_VARIANTS(bf16_t, bf16)

                // ---- layer norm dx: g ~ N(0,1), x, mean and rstd from the forward (the
                // last variant run above: the same bits), w.
                upload(gBuf, dt, rows, c, 1, 777);
                Family lb{std::string("ln-dx-") + dtName(dt), shape, (size_t)N * e * 3, {yBuf}, {(size_t)N * e}, {(int)e}, {}, nullptr};
#define LN_DX_VARIANTS(S, SN)                                                                                                 \
    {                                                                                                                         \
        S *d = (S *)yBuf;                                                                                                     \
        const S *p = (const S *)xBuf, *pg = (const S *)gBuf, *pw = (const S *)wBuf;                                           \
        run(lb, "main", false, [&] {                                                                                          \
            if (warp) layer_norm_dx_regs_warp_##SN##_v16<<<rg, BLOCK>>>(d, pg, p, mean, rstd, pw, rows, c);                   \
            else layer_norm_dx_regs_block_##SN##_v16<<<rg, BLOCK>>>(d, pg, p, mean, rstd, pw, rows, c);                       \
        });                                                                                                                   \
        if (!warp) run(lb, "branch", false, [&] { layer_norm_dx_regs_block4_##SN##_v16<<<rg, BLOCK>>>(d, pg, p, mean, rstd, pw, rows, c); }); \
    }
                if (dt == DT_F16) LN_DX_VARIANTS(f16_t, f16)
                else LN_DX_VARIANTS(bf16_t, bf16)
            }
        }
    }
    printf("# done\n");
    return 0;
}
