// gkred.cu: a microbenchmark of sublet's CUDA reduction kernels (issue 18) on the
// ops_compare shapes (cmd/sublet-bench/ops_gpu.go: the [65536, 1024] matrix m of 64M
// elements) and on [4096, 4096]: column sums (Sum(0), the bias gradient) in F32, F16
// and BF16; sums of rows (Sum(1)), the sum of all elements and the row maximum with its
// index (Max(1)) in F16 and BF16 (their F32 kernels are at 90% of a copy already).
//
// For each family it launches main's kernels as kernels/cuda launched them before
// branch gkred ("main": scripts/gpu/mb/gkred_main.cuh, main's reduce.cu, included in a
// namespace; grid, block, pieces and finishing kernel as main's reduce.go chose them),
// the branch's integrated kernels as kernels/cuda launches them now ("branch": the real
// sources of kernels/cuda/src), and candidates (the branch's templates with other
// parameters). Outputs are float32 (sums) or the input's type plus int64 positions
// (maxima), so that a changed order shows in the bits. Each line:
//   family shape variant µs GB/s %copy bits|maxulp=N  rel=R
// bits: the same bits as main; maxulp: the largest difference from main's float32
// outputs in units in the last place; rel: the largest |output - float64 host sum| over
// the sum of magnitudes of its elements (conformance allows 1e-6 for float32 outputs);
// for maxima, "bits" or the number of rows whose value or position differs. Times:
// cudaEvents around each launch (the op's launches together), L2 flushed before each,
// 3 warm-ups, median of 21; GB/s counts the input's bytes read once (the outputs are
// 1/1024 of them); %copy is of a cudaMemcpy device to device of the same bytes (read +
// written), timed the same way.
//
// Build and run from the repository root (GPU machine):
//   nvcc -O3 -fmad=false -std=c++17 -arch=sm_90 -Xptxas -v -o /tmp/gkred scripts/gpu/mb/gkred.cu \
//     -L/usr/local/cuda/lib64/stubs -lcuda 2>/tmp/gkred.ptxas && /tmp/gkred
// The branch's kernels and main's each in a namespace of their own, since their helpers
// share names and take the same (global) types; what both include comes first.
#include "../../../kernels/cuda/src/common.cuh"
#include <cuda_bf16.h>
namespace branch {
#include "../../../kernels/cuda/src/reduce.cu"
} // namespace branch

namespace mainsrc {
#undef KERNEL
#undef KERNEL_ROOM
#undef REDUCE_KERNELS
#define KERNEL static __global__ void __launch_bounds__(BLOCK)
#define KERNEL_ROOM static __global__ void __launch_bounds__(BLOCK, 4)
#include "gkred_main.cuh"
} // namespace mainsrc
using namespace branch;

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

// ---- candidates: the branch's templates with other parameters ---------------------------

template <int DT, int U, bool RUNS>
__global__ void __launch_bounds__(BLOCK) cand_cols(Reduction r, int mode, double *part, unsigned int *tickets, int classes) {
    sum_cols_k<DT, U, RUNS>(r, mode, part, tickets, classes);
}

template <int DT, int U, bool RUNS>
__global__ void __launch_bounds__(BLOCK) cand_rows(Reduction r, int mode) { sum_rows_k<DT, U, RUNS>(r, mode); }

template <int DT, int U, bool RUNS>
__global__ void __launch_bounds__(BLOCK) cand_all(Reduction r, int mode, Acc *part, unsigned int *ticket) { sum_all_k<DT, U, RUNS>(r, mode, part, ticket); }

template <int DT, int U>
__global__ void __launch_bounds__(BLOCK) cand_max(Reduction r, long long *idx) { max_rows_k<DT, U>(r, idx); }

// ---- the harness ------------------------------------------------------------------------

static int sms;
static cudaEvent_t ev0, ev1;
static void *flushBuf;
static const size_t FLUSH = 256u << 20; // > L2 (50 MB on H100)

// gridFor is backend.go's grid: a block per 256 items, at most 32 per SM.
static unsigned gridFor(long long n) { return (unsigned)std::max(1LL, std::min((n + BLOCK - 1) / BLOCK, 32LL * sms)); }

// pieceCount is reduce.go's: pieces of at most per, their Acc partials within the 4 MiB
// scratch.
static const long long maxPartials = (4 << 20) / (long long)sizeof(Acc);
static void pieceCount(long long n, long long nOut, long long per, Reduction &r) {
    r.pieces = std::max(1LL, std::min((n + per - 1) / per, maxPartials / std::max(nOut, 1LL)));
    r.piece = std::max(1LL, (n + r.pieces - 1) / r.pieces);
}

// timeUs returns the median of 21 timed runs of f (after 3 untimed), L2 flushed before each.
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

// copyGBs is the bandwidth of a device-to-device cudaMemcpy moving bytes (read + write).
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
    printf("reference  %zuMB cudaMemcpy-D2D %9.2f us %8.1f GB/s\n", bytes >> 20, us, bytes / us / 1e3);
    return memo[bytes] = bytes / us / 1e3;
}

static std::vector<unsigned char> fetch(const void *d, size_t bytes) {
    std::vector<unsigned char> h(bytes);
    CK(cudaMemcpy(h.data(), d, bytes, cudaMemcpyDeviceToHost));
    return h;
}

static long long ord32(unsigned int u) { return (u & 0x80000000u) ? -(long long)(u & 0x7fffffffu) : (long long)u; }

// Family is one op on one shape: its outputs, main's outputs (the first variant run),
// and the host's float64 sums and magnitudes (sums only).
struct Family {
    std::string name, shape;
    size_t bytes;                   // input bytes, read once
    std::vector<void *> outs;       // float32 sums; or values and int64 positions
    std::vector<size_t> outBytes;
    bool isMax;
    std::vector<double> want, mag;  // sums: the host's
    std::vector<std::vector<unsigned char>> ref;
};

static void run(Family &f, const char *variant, const std::function<void()> &launch) {
    for (size_t k = 0; k < f.outs.size(); k++) CK(cudaMemset(f.outs[k], 0xcd, f.outBytes[k]));
    launch();
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    std::vector<std::vector<unsigned char>> got;
    for (size_t k = 0; k < f.outs.size(); k++) got.push_back(fetch(f.outs[k], f.outBytes[k]));
    char same[96] = "bits";
    if (f.ref.empty()) {
        f.ref = got;
    } else if (got != f.ref) {
        if (f.isMax) {
            size_t rows = f.outBytes[1] / 8, es = f.outBytes[0] / rows, bad = 0;
            for (size_t i = 0; i < rows; i++)
                bad += memcmp(&got[0][i * es], &f.ref[0][i * es], es) != 0 || memcmp(&got[1][i * 8], &f.ref[1][i * 8], 8) != 0;
            snprintf(same, sizeof same, "DIFFER:%zu-rows", bad);
        } else {
            long long worst = 0;
            const unsigned int *a = (const unsigned int *)got[0].data(), *b = (const unsigned int *)f.ref[0].data();
            for (size_t i = 0; i < got[0].size() / 4; i++) worst = std::max(worst, std::llabs(ord32(a[i]) - ord32(b[i])));
            snprintf(same, sizeof same, "maxulp=%lld", worst);
        }
    }
    char rel[48] = "";
    if (!f.isMax) {
        double worst = 0;
        for (size_t i = 0; i < f.want.size(); i++) {
            float g;
            memcpy(&g, &got[0][4 * i], 4);
            worst = std::max(worst, std::fabs((double)g - f.want[i]) / std::max(f.mag[i], 1e-300));
        }
        snprintf(rel, sizeof rel, "  rel=%.2e%s", worst, worst > 1e-6 ? " OVER-TOLERANCE" : "");
    }
    float us = timeUs(launch);
    double gbs = f.bytes / us / 1e3;
    printf("%-13s %-10s %-34s %9.2f us %8.1f GB/s %6.1f%%  %s%s\n", f.name.c_str(), f.shape.c_str(), variant, us, gbs, 100 * gbs / copyGBs(f.bytes), same, rel);
    fflush(stdout);
}

// ---- inputs -------------------------------------------------------------------------------

static unsigned long long rng = 0x9e3779b97f4a7c15ull;
static unsigned int next32() {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (unsigned int)(rng >> 16);
}
static float uniform(float lo, float hi) { return lo + (hi - lo) * (next32() & 0xffffff) / 16777216.0f; }
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
    if (dt == DT_F16) return __half2float(*(__half *)&h);
    unsigned int u = (unsigned int)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

// fill writes rows × cols elements of dt, uniform in [-1, 1); with maxRows, two ties of
// the row's maximum, a NaN in every 7th row and a negative NaN in every 11th. It returns
// the values as double.
static std::vector<double> fill(void *d, int dt, long long rows, long long cols, bool maxRows) {
    long long n = rows * cols;
    std::vector<double> v(n);
    if (dt == DT_F32) {
        std::vector<float> h(n);
        for (long long i = 0; i < n; i++) h[i] = uniform(-1, 1), v[i] = h[i];
        CK(cudaMemcpy(d, h.data(), n * 4, cudaMemcpyHostToDevice));
        return v;
    }
    std::vector<unsigned short> h(n);
    for (long long i = 0; i < n; i++) h[i] = toBits(dt, uniform(-1, 1));
    if (maxRows) {
        for (long long r = 0; r < rows; r++) {
            unsigned short *row = &h[r * cols];
            row[next32() % cols] = toBits(dt, 2.0f);
            row[next32() % cols] = toBits(dt, 2.0f);
            if (r % 7 == 0) row[next32() % cols] = dt == DT_F16 ? 0x7e00 : 0x7fc0;
            if (r % 11 == 0) row[next32() % cols] = 0xffff;
            if (r % 13 == 0) row[next32() % cols] = 0x8000, row[next32() % cols] = 0; // zeros of both signs
        }
    }
    for (long long i = 0; i < n; i++) v[i] = host16(dt, h[i]);
    CK(cudaMemcpy(d, h.data(), n * 2, cudaMemcpyHostToDevice));
    return v;
}

static Reduction blank() {
    Reduction r;
    memset(&r, 0, sizeof r);
    r.krank = r.rrank = 1;
    return r;
}

static const char *dtName(int dt) { return dt == DT_F32 ? "f32" : dt == DT_F16 ? "f16" : "bf16"; }

// launch runs kernel fn with grid blocks of BLOCK threads on the default stream.
template <typename... A> static void launch(const void *fn, unsigned grid, A... a) {
    void *args[] = {(void *)&a...};
    CK(cudaLaunchKernel(fn, dim3(grid), dim3(BLOCK), args, 0, 0));
}

// by16 picks the F16 or the BF16 instantiation of a kernel for dt.
static const void *by16(int dt, const void *f16, const void *bf16) { return dt == DT_F16 ? f16 : bf16; }

int main() {
    CK(cudaFree(0));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    sms = prop.multiProcessorCount;
    int drv;
    CK(cudaDriverGetVersion(&drv));
    printf("# gkred: %s, %d SMs, L2 %d MB, driver API %d; median of 21, L2 flushed\n", prop.name, sms, prop.l2CacheSize >> 20, drv);
    CK(cudaEventCreate(&ev0));
    CK(cudaEventCreate(&ev1));
    CK(cudaMalloc(&flushBuf, FLUSH));
    const long long NMAX = 64LL << 20;
    void *in, *out32, *out16, *scratch, *idxBuf;
    CK(cudaMalloc(&in, NMAX * 4));
    CK(cudaMalloc(&out32, 65536 * 4));
    CK(cudaMalloc(&out16, 65536 * 2));
    CK(cudaMalloc(&idxBuf, 65536 * 8));
    CK(cudaMalloc(&scratch, (4 << 20) + 256)); // kernels/cuda's scratch and its tickets
    CK(cudaMemset(scratch, 0, (4 << 20) + 256));
    Acc *part = (Acc *)scratch;
    double *partD = (double *)scratch;
    unsigned int *tickets = (unsigned int *)((char *)scratch + (4 << 20));
    long long *noIdx = nullptr;
    long long *idx = (long long *)idxBuf;
    int mode = RED_SUM;

    const long long shapes[2][2] = {{65536, 1024}, {4096, 4096}};
    for (auto &sh : shapes) {
        const long long R = sh[0], C = sh[1], N = R * C;
        char shape[32];
        snprintf(shape, sizeof shape, "%lldx%lld", R, C);

        // ---- column sums, Sum(0) into F32 ----
        for (int dt : {DT_F32, DT_F16, DT_BF16}) {
            int es = dt == DT_F32 ? 4 : 2, V = 16 / es;
            std::vector<double> x = fill(in, dt, R, C, false);
            Family f{std::string("sum-cols-") + dtName(dt), shape, (size_t)(N * es), {out32}, {(size_t)C * 4}, false, {}, {}, {}};
            f.want.assign(C, 0), f.mag.assign(C, 0);
            for (long long i = 0; i < N; i++) f.want[i % C] += x[i], f.mag[i % C] += std::fabs(x[i]);
            Reduction r = blank();
            r.nOut = C, r.nRed = R;
            r.kshape[0] = C, r.kstride[0][0] = 1, r.kstride[1][0] = 1;
            r.rshape[0] = R, r.rstride[0] = C;
            r.dst = (unsigned long long)out32, r.src = (unsigned long long)in, r.dtd = DT_F32, r.dts = dt;
            // main: reduce_cols (colPieces: 1024 blocks wanted, 128 rows at least), then
            // reduce_finish_block (more than 64 pieces) or reduce_finish.
            Reduction rm = r;
            long long gm = (C + COLS_X * COLS_V - 1) / (COLS_X * COLS_V);
            long long wantm = std::max(1LL, std::min((1024 + gm - 1) / gm, R / (4 * COLS_Y * COLS_U)));
            pieceCount(R, C, (R + wantm - 1) / wantm, rm);
            unsigned g1 = (unsigned)(gm * rm.pieces);
            char v[96];
            snprintf(v, sizeof v, "main reduce_cols+finish %lldx%lld", gm, rm.pieces);
            run(f, v, [&] {
                launch((const void *)mainsrc::reduce_cols_f32, g1, rm, mode, noIdx, part);
                if (rm.pieces > FINISH_BLOCK_PIECES) launch((const void *)mainsrc::reduce_finish_block_f32, (unsigned)C, rm, mode, noIdx, part);
                else if (rm.pieces > 1) launch((const void *)mainsrc::reduce_finish_f32, gridFor(C), rm, mode, noIdx, part);
            });
            // sum_cols wanting bw blocks (the branch: reduce.go's colsWordBlocks, 264).
            auto cols = [&](const char *name, long long bw, const void *k) {
                Reduction rb = r;
                long long groups = (C + CW_X * V - 1) / (CW_X * V);
                long long want = std::max(1LL, std::min((bw + groups - 1) / groups, R / (2 * CW_Y * CW_U)));
                pieceCount(R, C, (R + want - 1) / want, rb);
                int classes = (int)std::min(groups, 64LL);
                unsigned g = (unsigned)(groups * rb.pieces);
                snprintf(v, sizeof v, "%s %lldx%lld", name, groups, rb.pieces);
                run(f, v, [&] { launch(k, g, rb, mode, rb.pieces > 1 ? partD : (double *)nullptr, tickets, classes); });
            };
            if (dt == DT_F32) {
                cols("branch sum_cols_f32", 264, (const void *)sum_cols_f32);
                cols("U=8 runs", 264, (const void *)cand_cols<DT_F32, 8, true>);
                cols("U=4", 264, (const void *)cand_cols<DT_F32, 4, false>);
                cols("U=16", 264, (const void *)cand_cols<DT_F32, 16, false>);
                cols("U=8 528 blocks", 528, (const void *)cand_cols<DT_F32, 8, false>);
                cols("U=8 132 blocks", 132, (const void *)cand_cols<DT_F32, 8, false>);
                cols("U=8 1056 blocks", 1056, (const void *)cand_cols<DT_F32, 8, false>);
            } else if (dt == DT_F16) {
                cols("branch sum_cols_f16", 264, (const void *)sum_cols_f16);
                cols("U=8 double", 264, (const void *)cand_cols<DT_F16, 8, false>);
                cols("U=4 runs", 264, (const void *)cand_cols<DT_F16, 4, true>);
                cols("U=16 runs", 264, (const void *)cand_cols<DT_F16, 16, true>);
                cols("U=8 runs 528 blocks", 528, (const void *)cand_cols<DT_F16, 8, true>);
                cols("U=8 runs 132 blocks", 132, (const void *)cand_cols<DT_F16, 8, true>);
                cols("U=8 runs 1056 blocks", 1056, (const void *)cand_cols<DT_F16, 8, true>);
            } else {
                cols("branch sum_cols_bf16", 264, (const void *)sum_cols_bf16);
                cols("U=8 double", 264, (const void *)cand_cols<DT_BF16, 8, false>);
                cols("U=4 runs", 264, (const void *)cand_cols<DT_BF16, 4, true>);
                cols("U=16 runs", 264, (const void *)cand_cols<DT_BF16, 16, true>);
                cols("U=8 runs 528 blocks", 528, (const void *)cand_cols<DT_BF16, 8, true>);
                cols("U=8 runs 132 blocks", 132, (const void *)cand_cols<DT_BF16, 8, true>);
                cols("U=8 runs 1056 blocks", 1056, (const void *)cand_cols<DT_BF16, 8, true>);
            }
        }

        for (int dt : {DT_F16, DT_BF16}) {
            std::vector<double> x = fill(in, dt, R, C, false);
            bool f16 = dt == DT_F16;

            // ---- sums of rows, Sum(1) into F32: a warp a row ----
            {
                Family f{std::string("sum-rows-") + dtName(dt), shape, (size_t)(N * 2), {out32}, {(size_t)R * 4}, false, {}, {}, {}};
                f.want.assign(R, 0), f.mag.assign(R, 0);
                for (long long i = 0; i < N; i++) f.want[i / C] += x[i], f.mag[i / C] += std::fabs(x[i]);
                Reduction r = blank();
                r.nOut = R, r.nRed = C;
                r.kshape[0] = R, r.kstride[0][0] = 1, r.kstride[1][0] = C;
                r.rshape[0] = C, r.rstride[0] = 1;
                r.dst = (unsigned long long)out32, r.src = (unsigned long long)in, r.dtd = DT_F32, r.dts = dt;
                r.piece = C, r.pieces = 1;
                unsigned g = gridFor(R * 32), full = (unsigned)((R + 7) / 8);
                run(f, "main reduce_warp", [&] { launch((const void *)mainsrc::reduce_warp_f32, g, r, mode, noIdx, part); });
                run(f, "branch sum_rows (U=4 runs)", [&] { launch(by16(dt, (const void *)sum_rows_f16, (const void *)sum_rows_bf16), g, r, mode); });
                run(f, "U=4 double (main's order)", [&] { launch(f16 ? (const void *)cand_rows<DT_F16, 4, false> : (const void *)cand_rows<DT_BF16, 4, false>, g, r, mode); });
                run(f, "U=2 runs", [&] { launch(f16 ? (const void *)cand_rows<DT_F16, 2, true> : (const void *)cand_rows<DT_BF16, 2, true>, g, r, mode); });
                run(f, "U=4 runs a warp a row (no stride)", [&] { launch(by16(dt, (const void *)sum_rows_f16, (const void *)sum_rows_bf16), full, r, mode); });
            }

            // ---- the sum of all, Sum() into F32: a block a piece of 32768, one launch ----
            {
                Family f{std::string("sum-all-") + dtName(dt), shape, (size_t)(N * 2), {out32}, {4}, false, {}, {}, {}};
                f.want.assign(1, 0), f.mag.assign(1, 0);
                for (long long i = 0; i < N; i++) f.want[0] += x[i], f.mag[0] += std::fabs(x[i]);
                Reduction r = blank();
                r.nOut = 1, r.nRed = N;
                r.kshape[0] = 1, r.rshape[0] = N, r.rstride[0] = 1;
                r.dst = (unsigned long long)out32, r.src = (unsigned long long)in, r.dtd = DT_F32, r.dts = dt;
                pieceCount(N, 1, 32768, r);
                Reduction r2 = r; // pieces of 65536: another order
                pieceCount(N, 1, 65536, r2);
                unsigned g = (unsigned)r.pieces, g2 = (unsigned)r2.pieces;
                run(f, "main sum_all", [&] { launch(by16(dt, (const void *)mainsrc::sum_all_f16, (const void *)mainsrc::sum_all_bf16), g, r, mode, part, tickets); });
                run(f, "branch sum_all (U=8 runs)", [&] { launch(by16(dt, (const void *)sum_all_f16, (const void *)sum_all_bf16), g, r, mode, part, tickets); });
                run(f, "U=8 double (main's order)", [&] { launch(f16 ? (const void *)cand_all<DT_F16, 8, false> : (const void *)cand_all<DT_BF16, 8, false>, g, r, mode, part, tickets); });
                run(f, "U=4 runs", [&] { launch(f16 ? (const void *)cand_all<DT_F16, 4, true> : (const void *)cand_all<DT_BF16, 4, true>, g, r, mode, part, tickets); });
                run(f, "U=16 runs", [&] { launch(f16 ? (const void *)cand_all<DT_F16, 16, true> : (const void *)cand_all<DT_BF16, 16, true>, g, r, mode, part, tickets); });
                run(f, "U=8 runs pieces of 65536", [&] { launch(by16(dt, (const void *)sum_all_f16, (const void *)sum_all_bf16), g2, r2, mode, part, tickets); });
            }

            // ---- the row maximum and its position, Max(1) into the input's type ----
            {
                fill(in, dt, R, C, true);
                Family f{std::string("max-rows-") + dtName(dt), shape, (size_t)(N * 2), {out16, idxBuf}, {(size_t)R * 2, (size_t)R * 8}, true, {}, {}, {}};
                Reduction r = blank();
                r.nOut = R, r.nRed = C;
                r.kshape[0] = R, r.kstride[0][0] = 1, r.kstride[1][0] = C;
                r.rshape[0] = C, r.rstride[0] = 1;
                r.dst = (unsigned long long)out16, r.src = (unsigned long long)in, r.dtd = dt, r.dts = dt;
                r.piece = C, r.pieces = 1;
                unsigned g = gridFor(R * 32), full = (unsigned)((R + 7) / 8);
                run(f, "main max_rows", [&] { launch(by16(dt, (const void *)mainsrc::max_rows_f16, (const void *)mainsrc::max_rows_bf16), g, r, idx); });
                run(f, "branch max_rows (packed, U=4)", [&] { launch(by16(dt, (const void *)max_rows_f16, (const void *)max_rows_bf16), g, r, idx); });
                run(f, "packed U=2", [&] { launch(f16 ? (const void *)cand_max<DT_F16, 2> : (const void *)cand_max<DT_BF16, 2>, g, r, idx); });
                run(f, "packed U=8", [&] { launch(f16 ? (const void *)cand_max<DT_F16, 8> : (const void *)cand_max<DT_BF16, 8>, g, r, idx); });
                run(f, "packed U=4 a warp a row (no stride)", [&] { launch(by16(dt, (const void *)max_rows_f16, (const void *)max_rows_bf16), full, r, idx); });
                run(f, "main max_rows a warp a row", [&] { launch(by16(dt, (const void *)mainsrc::max_rows_f16, (const void *)mainsrc::max_rows_bf16), full, r, idx); });
            }
        }
    }
    printf("# done\n");
    return 0;
}
