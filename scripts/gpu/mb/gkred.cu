// gkred.cu: a microbenchmark of sublet's CUDA reductions still below 90% of a copy on
// the H100 (issue 18; docs/benchmarks.md, "Reductions over 16-byte words" and branch
// red2's section): column sums (Sum(0), the bias gradient: sum_cols) in F32, F16 and
// BF16, and the row maximum with its position (Max(1): max_rows) in F16 and BF16, on
// the ops_compare matrix [65536, 1024] (cmd/sublet-bench/ops_gpu.go: 64M elements) and
// on [4096, 4096].
//
// Variants: "main" is main's reduce.cu (gkred_main.cuh, a copy in a namespace of its
// own), "branch" the real kernels/cuda/src/reduce.cu, both launched as kernels/cuda's
// reduce.go launches them (grid, block, pieces, tickets); the others are the branch's
// templates with other parameters ("X=": column sums in blocks of X words × 256/X rows),
// "ceiling-linear" is no reduction at all but a kernel that only loads the same bytes
// (xor into a register, stored if impossible) in a plain grid-stride read with 8 words in
// flight a thread, 4 blocks an SM, and "no-combine" the column sum with its last block's
// combination switched off (no output). Round 1 (commit 3446a3a) measured more
// candidates: the last block's partials loaded 16, 32 or 64 at a time, 396 and 528
// blocks, 4 or 16 rows in flight, and the column kernel's read pattern alone. Each line:
//   family shape variant µs GB/s %copy bits|maxulp=N  rel=R
// GB/s counts the input's bytes read once (the outputs are 1/1024 of them); %copy is of
// a device-to-device cudaMemcpy moving the same bytes in all (half read, half written),
// timed the same way; the "reference" lines also give the memcpy of 512 MB, the copy
// ops_compare divides by (copy-f32-64M). bits: the same bits as main; maxulp: the
// largest difference from main's float32 outputs in units in the last place; rel: the
// largest |output - float64 host sum| over the sum of magnitudes (conformance allows
// 1e-6); maxima: "bits" or the number of rows whose value or position differs. Times:
// cudaEvents around each launch, L2 flushed before each, 3 warm-ups, median of 21.
//
// kernels/cuda embeds SASS that nvcc compiles from compute_80 PTX (scripts/gpu/
// gen_kernels.sh), so __CUDA_ARCH__ is 800 in the kernels it runs even on an sm_90 card;
// build the harness the same way, and once for sm_90 to see what changes:
//   nvcc -O3 -fmad=false -std=c++17 -gencode arch=compute_80,code=sm_90 -o /tmp/gkred80 \
//     scripts/gpu/mb/gkred.cu -L/usr/local/cuda/lib64/stubs -lcuda && /tmp/gkred80
//   nvcc -O3 -fmad=false -std=c++17 -arch=sm_90 -o /tmp/gkred90 scripts/gpu/mb/gkred.cu \
//     -L/usr/local/cuda/lib64/stubs -lcuda && /tmp/gkred90
// (GKRED_MAIN_GEN=file: main's kernels/cuda/gen/reduce.fatbin, for the main-gen lines.)
#include "../../../kernels/cuda/src/common.cuh"
#include <cuda_bf16.h>
namespace branch {
#include "../../../kernels/cuda/src/reduce.cu"
} // namespace branch

namespace mainsrc {
#undef KERNEL
#define KERNEL static __global__ void __launch_bounds__(BLOCK)
#include "gkred_main.cuh"
} // namespace mainsrc
using namespace branch;

#include <cuda.h>

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

// cand_cols is sum_cols_k with blocks of X words × BLOCK/X rows (the branch: CW_X = 32):
// a narrower block makes more column groups, fewer pieces, and so fewer partials for
// each group's last block to read (66 pieces × 256 columns × 8 bytes = 135 KB for F16
// at [65536, 1024] with X = 32; 17 × 64 × 8 = 8.7 KB with X = 8).
template <int DT, int X>
__global__ void __launch_bounds__(BLOCK) cand_cols(Reduction r, int mode, double *part, unsigned int *tickets, int classes) {
    sum_cols_k<DT, DT != DT_F32, X>(r, mode, part, tickets, classes);
}

// cand_max is max_rows_k with U words a round, and with SPLIT a loop of its own for the
// search of a NaN (the lane's choice made once a round) instead of a select per element.
template <int DT, int U, bool SPLIT>
__global__ void __launch_bounds__(BLOCK) cand_max(Reduction r, long long *idx) { max_rows_k<DT, U, SPLIT>(r, idx); }

// ceiling_linear loads n words, U in flight a thread, grid-striding.
template <int U>
__global__ void __launch_bounds__(BLOCK) ceiling_linear(const uint4 *w, long long n, unsigned int *sink) {
    uint4 acc = make_uint4(0, 0, 0, 0);
    long long G = (long long)gridDim.x * BLOCK;
    for (long long i = (long long)blockIdx.x * BLOCK + threadIdx.x; i < n; i += U * G) {
        uint4 x[U];
#pragma unroll
        for (int u = 0; u < U; u++) x[u] = i + u * G < n ? w[i + u * G] : make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int u = 0; u < U; u++) acc.x ^= x[u].x, acc.y ^= x[u].y, acc.z ^= x[u].z, acc.w ^= x[u].w;
    }
    if ((acc.x ^ acc.y ^ acc.z ^ acc.w) == 0x9e3779b9u) *sink = acc.x;
}

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
    printf("reference %zuMB cudaMemcpy-D2D %.2f us %.1f GB/s\n", bytes >> 20, us, bytes / us / 1e3);
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

static void report(const Family &f, const char *variant, float us, const char *same, const char *rel) {
    double gbs = f.bytes / us / 1e3;
    printf("%s %s %s %.2f %.1f %.1f%% %s%s\n", f.name.c_str(), f.shape.c_str(), variant, us, gbs, 100 * gbs / copyGBs(f.bytes), same, rel);
    fflush(stdout);
}

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
        snprintf(rel, sizeof rel, " rel=%.2e%s", worst, worst > 1e-6 ? " OVER-TOLERANCE" : "");
    }
    report(f, variant, timeUs(launch), same, rel);
}

// ceiling times a kernel that computes nothing the family checks.
static void ceiling(const Family &f, const char *variant, const std::function<void()> &launch) {
    launch();
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    report(f, variant, timeUs(launch), "-", "");
}

// ---- fatbins, launched through the driver ---------------------------------------------------
//
// "branch-gen" launches the very SASS kernels/cuda embeds (kernels/cuda/gen/reduce.fatbin,
// nvcc 11.8 from compute_80 PTX), "main-gen" main's (the file $GKRED_MAIN_GEN names, if
// any): what ops_compare runs, where this program's own kernels come from the card's nvcc.

static CUfunction genFn(const char *path, const char *name) {
    static std::map<std::string, CUmodule> mods;
    if (!path) return nullptr;
    if (!mods.count(path)) {
        FILE *fp = fopen(path, "rb");
        if (!fp) return nullptr;
        std::vector<char> b;
        char tmp[1 << 16];
        size_t n;
        while ((n = fread(tmp, 1, sizeof tmp, fp)) > 0) b.insert(b.end(), tmp, tmp + n);
        fclose(fp);
        CUmodule m;
        if (cuModuleLoadData(&m, b.data()) != CUDA_SUCCESS) return nullptr;
        mods[path] = m;
    }
    CUfunction f;
    if (cuModuleGetFunction(&f, mods[path], name) != CUDA_SUCCESS) return nullptr;
    return f;
}

template <typename... A> static void genLaunch(CUfunction f, unsigned grid, A... a) {
    void *args[] = {(void *)&a...};
    if (cuLaunchKernel(f, grid, 1, 1, BLOCK, 1, 1, 0, 0, args, nullptr) != CUDA_SUCCESS) {
        fprintf(stderr, "cuLaunchKernel failed\n");
        exit(1);
    }
}

static const char *const branchGen = "kernels/cuda/gen/reduce.fatbin";
static const char *mainGen() { return getenv("GKRED_MAIN_GEN"); }

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
// the row's maximum, a NaN in every 7th row, a negative NaN in every 11th and zeros of
// both signs in every 13th, and in every 17th row all elements -0 or +0 (a maximum
// of zeros of both signs). It returns the values as double.
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
            if (r % 13 == 0) row[next32() % cols] = 0x8000, row[next32() % cols] = 0;
            if (r % 17 == 0)
                for (long long c = 0; c < cols; c++) row[c] = (next32() & 1) ? 0x8000 : 0;
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

// pick returns the F32, F16 or BF16 one of three.
static const void *pick(int dt, const void *f32, const void *f16, const void *bf16) { return dt == DT_F32 ? f32 : dt == DT_F16 ? f16 : bf16; }
#define BY_DT(dt, K) pick(dt, K<DT_F32>(), K<DT_F16>(), K<DT_BF16>())

template <int DT> static const void *kMain() { return pick(DT, (const void *)mainsrc::sum_cols_f32, (const void *)mainsrc::sum_cols_f16, (const void *)mainsrc::sum_cols_bf16); }
template <int DT> static const void *kBranch() { return pick(DT, (const void *)sum_cols_f32, (const void *)sum_cols_f16, (const void *)sum_cols_bf16); }
template <int DT> static const void *kX16() { return (const void *)cand_cols<DT, 16>; }
template <int DT> static const void *kX8() { return (const void *)cand_cols<DT, 8>; }
template <int DT> static const void *kX4() { return (const void *)cand_cols<DT, 4>; }

int main() {
    CK(cudaFree(0));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    sms = prop.multiProcessorCount;
    int drv;
    CK(cudaDriverGetVersion(&drv));
#if defined(__CUDACC_VER_MAJOR__)
    printf("# gkred: %s, %d SMs, L2 %d MB, driver API %d, nvcc %d.%d; median of 21, L2 flushed\n", prop.name, sms, prop.l2CacheSize >> 20, drv, __CUDACC_VER_MAJOR__, __CUDACC_VER_MINOR__);
#endif
    {
        cudaFuncAttributes a;
        const void *ks[] = {(const void *)mainsrc::sum_cols_f16, (const void *)sum_cols_f16, (const void *)sum_cols_bf16, (const void *)cand_cols<DT_F16, 8>, (const void *)mainsrc::max_rows_bf16, (const void *)max_rows_bf16};
        const char *ns[] = {"main sum_cols_f16", "branch sum_cols_f16", "branch sum_cols_bf16", "X=8 sum_cols_f16", "main max_rows_bf16", "branch max_rows_bf16"};
        for (int i = 0; i < 6; i++) {
            CK(cudaFuncGetAttributes(&a, ks[i]));
            printf("# %s: %d registers, PTX %d, SASS %d\n", ns[i], a.numRegs, a.ptxVersion, a.binaryVersion);
        }
    }
    CK(cudaEventCreate(&ev0));
    CK(cudaEventCreate(&ev1));
    CK(cudaMalloc(&flushBuf, FLUSH));
    copyGBs(512u << 20);
    const long long NMAX = 64LL << 20;
    void *in, *out32, *out16, *scratch, *idxBuf, *sink;
    CK(cudaMalloc(&in, NMAX * 4));
    CK(cudaMalloc(&out32, 65536 * 4));
    CK(cudaMalloc(&out16, 65536 * 2));
    CK(cudaMalloc(&idxBuf, 65536 * 8));
    CK(cudaMalloc(&sink, 16));
    CK(cudaMalloc(&scratch, (4 << 20) + 256)); // kernels/cuda's scratch and its tickets
    CK(cudaMemset(scratch, 0, (4 << 20) + 256));
    double *partD = (double *)scratch;
    unsigned int *tickets = (unsigned int *)((char *)scratch + (4 << 20)), *deadTickets;
    CK(cudaMalloc(&deadTickets, 256));
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
            // shaped cuts r as reduce.go's colWordPieces does for bw blocks wanted (264)
            // over column groups of x words.
            auto shaped = [&](long long x, long long bw, Reduction &rb, int &classes, char *v, size_t nv, const char *name) {
                long long groups = (C + x * V - 1) / (x * V);
                classes = (int)std::min(groups, 64LL);
                rb = r;
                long long want = std::max(1LL, std::min((bw + groups - 1) / groups, R / (2 * CW_Y * CW_U)));
                pieceCount(R, C, (R + want - 1) / want, rb);
                snprintf(v, nv, "%s-%lldx%lld", name, groups, rb.pieces);
                return (unsigned)(groups * rb.pieces);
            };
            auto cols = [&](const char *name, long long x, long long bw, const void *k) {
                Reduction rb;
                int classes;
                char v[96];
                unsigned g = shaped(x, bw, rb, classes, v, sizeof v, name);
                run(f, v, [&] { launch(k, g, rb, mode, rb.pieces > 1 ? partD : (double *)nullptr, tickets, classes); });
            };
            // noCombine is cols with tickets no block can complete (0x40404040 + k never
            // equals shared · pieces - 1): every block reads, adds, writes its partials,
            // fences and takes a ticket, and none combines; no output.
            auto noCombine = [&](const char *name, long long x, const void *k) {
                Reduction rb;
                int classes;
                char v[96];
                unsigned g = shaped(x, 264, rb, classes, v, sizeof v, name);
                CK(cudaMemset(deadTickets, 0x40, 256));
                ceiling(f, v, [&] { launch(k, g, rb, mode, rb.pieces > 1 ? partD : (double *)nullptr, deadTickets, classes); });
            };
            cols("main", CW_X, 264, BY_DT(dt, kMain));
            cols("branch", CW_X, 264, BY_DT(dt, kBranch));
            std::string kname = std::string("sum_cols_") + dtName(dt);
            for (const char *gen : {mainGen(), branchGen}) {
                if (CUfunction k = genFn(gen, kname.c_str())) {
                    Reduction rb;
                    int classes;
                    char v[96];
                    unsigned g = shaped(CW_X, 264, rb, classes, v, sizeof v, gen == branchGen ? "branch-gen" : "main-gen");
                    run(f, v, [&] { genLaunch(k, g, rb, mode, rb.pieces > 1 ? partD : (double *)nullptr, tickets, classes); });
                }
            }
            cols("X=16", 16, 264, BY_DT(dt, kX16));
            cols("X=8", 8, 264, BY_DT(dt, kX8));
            cols("X=4", 4, 264, BY_DT(dt, kX4));
            cols("X=8,256blocks", 8, 256, BY_DT(dt, kX8));
            cols("X=8,384blocks", 8, 384, BY_DT(dt, kX8));
            noCombine("no-combine", CW_X, BY_DT(dt, kBranch));
            noCombine("no-combine,X=8", 8, BY_DT(dt, kX8));
            long long words = N * es / 16;
            ceiling(f, "ceiling-linear", [&] { launch((const void *)ceiling_linear<8>, 4 * sms, (const uint4 *)in, words, (unsigned int *)sink); });
        }

        // ---- the row maximum and its position, Max(1) into the input's type ----
        for (int dt : {DT_F16, DT_BF16}) {
            bool f16 = dt == DT_F16;
            fill(in, dt, R, C, true);
            Family f{std::string("max-rows-") + dtName(dt), shape, (size_t)(N * 2), {out16, idxBuf}, {(size_t)R * 2, (size_t)R * 8}, true, {}, {}, {}};
            Reduction r = blank();
            r.nOut = R, r.nRed = C;
            r.kshape[0] = R, r.kstride[0][0] = 1, r.kstride[1][0] = C;
            r.rshape[0] = C, r.rstride[0] = 1;
            r.dst = (unsigned long long)out16, r.src = (unsigned long long)in, r.dtd = dt, r.dts = dt;
            r.piece = C, r.pieces = 1;
            unsigned g = gridFor(R * 32);
            run(f, "main", [&] { launch(f16 ? (const void *)mainsrc::max_rows_f16 : (const void *)mainsrc::max_rows_bf16, g, r, idx); });
            run(f, f16 ? "branch(U=4,no-split)" : "branch(U=4,split)", [&] { launch(f16 ? (const void *)max_rows_f16 : (const void *)max_rows_bf16, g, r, idx); });
            for (const char *gen : {mainGen(), branchGen}) {
                if (CUfunction k = genFn(gen, f16 ? "max_rows_f16" : "max_rows_bf16")) run(f, gen == branchGen ? "branch-gen" : "main-gen", [&] { genLaunch(k, g, r, idx); });
            }
            run(f, f16 ? "split" : "no-split", [&] { launch(f16 ? (const void *)cand_max<DT_F16, UNROLL, true> : (const void *)cand_max<DT_BF16, UNROLL, false>, g, r, idx); });
            ceiling(f, "ceiling-linear", [&] { launch((const void *)ceiling_linear<4>, 4 * sms, (const uint4 *)in, N * 2 / 16, (unsigned int *)sink); });
        }
    }
    printf("# done\n");
    return 0;
}
