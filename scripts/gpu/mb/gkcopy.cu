// gkcopy.cu: a microbenchmark of sublet's transposed copy (issue 18): Copy of a
// transposed view made dense (m.T().Contiguous(), cmd/sublet-bench's transpose case)
// in F32, F16 and BF16, beside a device-to-device cudaMemcpy of the same bytes.
//
// It includes the real kernel sources of kernels/cuda/src and launches them as
// kernels/cuda's copy.go does (grid min(tiles, 32 per SM), BLOCK threads): "branch" is
// kernels/cuda's copy_transpose_words (branch copy2's, in the library since the H100
// run of 2026-12-06 19:46 UTC) where copy.go picks it (16-byte words; F32: transpose_words_k,
// a block loading its next tile before it stores the current one, rows stored 4 at a
// time; 16 bits: transpose_units_k, the tile held in shared memory in the output's
// layout as 32-bit units of two columns, gathered as 16-byte words), "branch-gen" the
// same from the committed kernels/cuda/gen/copy.fatbin (nvcc 11.8's SASS, what the
// library embeds; only where that file is in the tree), "main" a copy of the
// copy_transpose_words before it (no prefetch; 16-bit rows 8 at a time, gathered element by
// element) launched as main's copy.go launches it, and one candidate not measured yet:
// "units" runs transpose_units_k for F32 (one column a unit: 5 shared-memory
// instructions a word where transpose_words_k takes 8). The losers of this branch's
// first run on an H100 (transposes in registers without shared memory, evict-first
// loads and stores, a grid of one wave, 16-bit rows 4 at a time without the prefetch:
// figures in docs/benchmarks.md) are in git history (a6d40f9). Every variant's output is compared
// with main's bit for bit, and main's with a transpose on the host. Times: cudaEvents
// around each launch, L2 flushed before each, 3 warm-ups, median of 21; % is of a
// cudaMemcpy device to device moving the same bytes (read + write), timed the same way.
// The backward pass makes transposes dense where a matrix was multiplied as its
// transpose through MatMul (w.T(), attention's k.T()): the gradient arrives as a
// transposed view, which AccumulateGrad's Clone copies; the training cases' weight
// shapes (1024², 784×256, 256², 10×256 and their transposes) are timed for main and
// branch. (nn.Linear's backward reads its transposes in place: no copy.) Odd shapes
// (partial tiles, offsets, alignments the word tiles refuse, grids of several rounds)
// are checked for correctness only.
//
// Build and run from the repository root (GPU machine):
//   nvcc -O3 -fmad=false -std=c++17 -arch=sm_90 -Xptxas -v -o /tmp/gkcopy scripts/gpu/mb/gkcopy.cu \
//     -L/usr/local/cuda/lib64/stubs -lcuda 2>/tmp/gkcopy.ptxas && /tmp/gkcopy
#include "../../../kernels/cuda/src/copy.cu"

#include "harness.cuh"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

// ---- main's kernel (kernels/cuda/src/copy.cu's transpose_words_k before this branch) ----

template <typename E, int TC, int RL>
__device__ __forceinline__ void main_words_k(const Walk &w, unsigned char *smem) {
    constexpr int V = 16 / sizeof(E), TR = 128 / sizeof(E), P = TR + 4 / sizeof(E);
    constexpr int WR = TR / V, WC = TC / V, NR = TC * WR / BLOCK, NW = TR * WC / BLOCK;
    static_assert(NR * BLOCK == TC * WR && NW * BLOCK == TR * WC && BLOCK % (RL * WC) == 0, "a tile is whole rounds of the block");
    E(*tile)[P] = (E(*)[P])smem;
    long long R = w.shape[0], C = w.shape[1], sd = w.stride[0][0], ss = w.stride[1][1];
    const E *src = (const E *)w.base[1];
    E *dst = (E *)w.base[0];
    unsigned tilesR = (unsigned)((R + TR - 1) / TR), tiles = tilesR * (unsigned)((C + TC - 1) / TC);
    for (unsigned t = blockIdx.x; t < tiles; t += gridDim.x) {
        long long r0 = (long long)(t % tilesR) * TR, c0 = (long long)(t / tilesR) * TC;
        uint4 x[NR];
#pragma unroll
        for (int i = 0; i < NR; i++) {
            int k = threadIdx.x + i * BLOCK, c = k / WR, r = (k % WR) * V;
            x[i] = make_uint4(0, 0, 0, 0);
            if (r0 + r < R && c0 + c < C) x[i] = *(const uint4 *)(src + (c0 + c) * ss + r0 + r);
        }
#pragma unroll
        for (int i = 0; i < NR; i++) {
            int k = threadIdx.x + i * BLOCK, c = k / WR, r = (k % WR) * V;
            const E *e = (const E *)&x[i];
#pragma unroll
            for (int j = 0; j < V; j++) tile[c][r + j] = e[j];
        }
        __syncthreads();
#pragma unroll
        for (int i = 0; i < NW; i++) {
            int k = threadIdx.x + i * BLOCK, r = k % RL + k / (RL * WC) * RL, c = k / RL % WC * V;
            uint4 o;
            E *e = (E *)&o;
#pragma unroll
            for (int j = 0; j < V; j++) e[j] = tile[c + j][r];
            if (r0 + r < R && c0 + c < C) *(uint4 *)(dst + (r0 + r) * sd + c0 + c) = o;
        }
        __syncthreads();
    }
}

// main_copy_transpose_words is main's copy_transpose_words.
__global__ void __launch_bounds__(BLOCK) main_copy_transpose_words(Walk w) {
    __shared__ uint4 smem[TWORDS_COLS * (128 + 4) / 16];
    if (elem_size(w.dtype[0]) == 2) main_words_k<unsigned short, TWORDS_COLS, 8>(w, (unsigned char *)smem);
    else main_words_k<unsigned int, TWORDS_COLS, 4>(w, (unsigned char *)smem);
}

// ---- candidate: transpose_units_k for F32 ------------------------------------------------

__global__ void __launch_bounds__(BLOCK) units_f32(Walk w) {
    __shared__ uint4 smem[TWORDS_COLS * (128 + 4) / 16];
    transpose_units_k<unsigned int, TWORDS_COLS>(w, (unsigned char *)smem);
}

static int sms; // the card's SMs, for the grids

// ---- the committed fatbin, launched through the driver ---------------------------------

static void genLaunch(CUfunction f, unsigned grid, Walk &w) {
    void *a[] = {&w};
    if (cuLaunchKernel(f, grid, 1, 1, BLOCK, 1, 1, 0, 0, a, nullptr) != CUDA_SUCCESS) {
        fprintf(stderr, "cuLaunchKernel failed\n");
        exit(1);
    }
}

// ---- walks and launches as copy.go makes them -------------------------------------------

// transposed is the walk of Copy(dense [R, C] at dst, the transpose of a dense [C, ld]
// matrix's first R columns at src): shape [R, C], dst strides (C, 1), src (1, ld).
static Walk transposed(void *dst, const void *src, int dt, long long R, long long C, long long ld) {
    Walk w;
    memset(&w, 0, sizeof w);
    w.size = R * C, w.rank = 2, w.ops = 2;
    w.shape[0] = R, w.shape[1] = C;
    w.stride[0][0] = C, w.stride[0][1] = 1;
    w.stride[1][0] = 1, w.stride[1][1] = ld;
    w.base[0] = (unsigned long long)dst, w.base[1] = (unsigned long long)src;
    w.dtype[0] = w.dtype[1] = dt;
    return w;
}

static int esize(int dt) { return dt == DT_F32 ? 4 : 2; }
static const char *dtName(int dt) { return dt == DT_F32 ? "f32" : dt == DT_F16 ? "f16" : "bf16"; }

// wordsOK is copy.go's walk.transposeWords.
static bool wordsOK(const Walk &w) {
    int size = esize(w.dtype[0]);
    if (size != 2 && size != 4) return false;
    long long v = 16 / size;
    return w.shape[0] % v == 0 && w.shape[1] % v == 0 && w.stride[0][0] % v == 0 && w.stride[1][1] % v == 0 && ((w.base[0] | w.base[1]) % 16) == 0;
}

static unsigned gridTiles(const Walk &w, long long rows, long long cols, unsigned cap) {
    long long tiles = ((w.shape[0] + rows - 1) / rows) * ((w.shape[1] + cols - 1) / cols);
    return (unsigned)std::min(tiles, (long long)cap);
}

// branch launches what copy.go launches for w.
static void branch(Walk w) {
    if (wordsOK(w)) copy_transpose_words<<<gridTiles(w, 128 / esize(w.dtype[0]), TWORDS_COLS, 32 * sms), BLOCK>>>(w);
    else copy_transpose<<<gridTiles(w, TILE, TILE, 32 * sms), BLOCK>>>(w);
}

// mainLaunch launches what main's copy.go launches for w.
static void mainLaunch(Walk w) {
    if (wordsOK(w)) main_copy_transpose_words<<<gridTiles(w, 128 / esize(w.dtype[0]), TWORDS_COLS, 32 * sms), BLOCK>>>(w);
    else copy_transpose<<<gridTiles(w, TILE, TILE, 32 * sms), BLOCK>>>(w);
}

static void unitsLaunch(Walk w) { units_f32<<<gridTiles(w, 32, TWORDS_COLS, 32 * sms), BLOCK>>>(w); }

// ---- inputs and checks ------------------------------------------------------------------

// fillBits writes n elements of size e of arbitrary bit patterns (NaN payloads included:
// a copy moves bits).
static std::vector<unsigned char> fillBits(void *d, size_t bytes) {
    std::vector<unsigned char> h(bytes);
    for (size_t i = 0; i + 4 <= bytes; i += 4) {
        unsigned int v = next32() ^ (next32() << 16);
        memcpy(&h[i], &v, 4);
    }
    CK(cudaMemcpy(d, h.data(), bytes, cudaMemcpyHostToDevice));
    return h;
}

static std::vector<unsigned char> download(const void *d, size_t bytes) {
    std::vector<unsigned char> h(bytes);
    CK(cudaMemcpy(h.data(), d, bytes, cudaMemcpyDeviceToHost));
    return h;
}

// hostTranspose is the expected output of transposed(dst, src, dt, R, C, ld) from the
// source's bytes hs (the block at src), e bytes an element.
static std::vector<unsigned char> hostTranspose(const std::vector<unsigned char> &hs, int e, long long R, long long C, long long ld) {
    std::vector<unsigned char> out((size_t)(R * C * e));
    const long long B = 64;
    for (long long cb = 0; cb < C; cb += B)
        for (long long r = 0; r < R; r++)
            for (long long c = cb; c < std::min(C, cb + B); c++) memcpy(&out[(size_t)((r * C + c) * e)], &hs[(size_t)((r + c * ld) * e)], e);
    return out;
}

static long long differ(const std::vector<unsigned char> &a, const std::vector<unsigned char> &b) {
    if (a.size() == b.size() && memcmp(a.data(), b.data(), a.size()) == 0) return 0;
    long long n = 0;
    for (size_t i = 0; i < a.size(); i++) n += a[i] != b[i];
    return n;
}

int main() {
    CK(cudaFree(0));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    sms = prop.multiProcessorCount;
    int drv;
    CK(cudaDriverGetVersion(&drv));
    printf("# gkcopy: %s, %d SMs, L2 %d MB, driver API %d; median of 21, L2 flushed\n", prop.name, sms, prop.l2CacheSize >> 20, drv);
    printf("# family shape variant us GB/s %%copy bits\n");
    const long long MAXN = 64LL << 20;
    void *src, *dst;
    CK(cudaMalloc(&src, MAXN * 4 + 256));
    CK(cudaMalloc(&dst, MAXN * 4 + 256));
    const char *fatbin = "kernels/cuda/gen/copy.fatbin";
    CUfunction genWords = fatbinFn(fatbin, "copy_transpose_words"), genScalar = fatbinFn(fatbin, "copy_transpose");
    if (!genWords || !genScalar) printf("# kernels/cuda/gen/copy.fatbin not loaded: no branch-gen rows\n");

    // The source matrices m = [rows, cols]; Copy(dense, m.T()): R = cols, C = rows.
    // Timed: ops_compare's [65536, 1024], [8192, 8192] (64M elements) and [4096, 4096]
    // with the candidate; the training cases' weight shapes for main and branch.
    struct Shape {
        long long rows, cols;
        bool candidates;
    } shapes[] = {{65536, 1024, true}, {8192, 8192, true}, {4096, 4096, true}, {1024, 1024, false}, {784, 256, false},
                  {256, 784, false}, {256, 256, false}, {10, 256, false}, {256, 10, false}};
    for (int dt : {DT_F32, DT_F16, DT_BF16}) {
        int e = esize(dt);
        for (Shape s : shapes) {
            long long R = s.cols, C = s.rows, n = R * C;
            size_t bytes = (size_t)(n * e);
            std::vector<unsigned char> hs = fillBits(src, bytes);
            Walk w = transposed(dst, src, dt, R, C, R);
            char shape[48];
            snprintf(shape, sizeof shape, "[%lld,%lld].T", s.rows, s.cols);
            char fam[32];
            snprintf(fam, sizeof fam, "transpose-%s", dtName(dt));
            float copyUs = timeUs([&] { CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice)); });
            printf("%-15s %-20s %-28s %9.2f %8.1f %6.1f%% -\n", fam, shape, "cudaMemcpy-d2d", copyUs, 2.0 * bytes / copyUs / 1e3, 100.0);
            CK(cudaMemset(dst, 0, bytes));
            mainLaunch(w);
            CK(cudaDeviceSynchronize());
            std::vector<unsigned char> ref = download(dst, bytes);
            long long host = differ(ref, hostTranspose(hs, e, R, C, R));
            printf("# host check %s %s: main's output differs from a host transpose in %lld bytes%s\n", fam, shape, host, host ? "  <-- HARNESS OR KERNEL WRONG" : "");
            auto run = [&](const char *variant, const std::function<void()> &launch) {
                CK(cudaMemset(dst, 0, bytes));
                launch();
                CK(cudaDeviceSynchronize());
                CK(cudaGetLastError());
                long long d = differ(download(dst, bytes), ref);
                float us = timeUs(launch);
                printf("%-15s %-20s %-28s %9.2f %8.1f %6.1f%% %s\n", fam, shape, variant, us, 2.0 * bytes / us / 1e3, 100.0 * copyUs / us,
                       d ? (std::to_string(d) + " bytes differ: MISMATCH").c_str() : "bit-identical");
                fflush(stdout);
            };
            run("main", [&] { mainLaunch(w); });
            run("branch", [&] { branch(w); });
            if (genWords && wordsOK(w)) run("branch-gen", [&] { genLaunch(genWords, gridTiles(w, 128 / e, TWORDS_COLS, 32 * sms), w); });
            if (s.candidates && e == 4) run("units", [&] { unitsLaunch(w); });
        }
    }

    // Odd shapes, correctness only: what copy.go launches (branch), the committed
    // fatbin's kernel and the candidate against a host transpose; offsets in
    // elements from 16-byte aligned blocks; ld > R is a column slice of a wider source;
    // the last two have more tiles than the grid's 32 blocks an SM (blocks prefetch
    // across rounds, the last partial).
    struct Odd {
        long long R, C, ld, offD, offS;
    } odd[] = {{70, 45, 70, 0, 0},    {1032, 1000, 1032, 0, 0}, {1000, 1032, 1000, 0, 0}, {136, 72, 200, 8, 16},      {136, 72, 136, 1, 0},
               {64, 4096, 64, 0, 3},  {2, 3, 2, 0, 0},          {4096, 8, 4096, 0, 0},    {8, 4096, 8, 0, 0},           {4100, 4104, 4100, 0, 0},
               {8200, 4104, 8208, 8, 0}};
    long long oddBad = 0;
    for (int dt : {DT_F32, DT_F16}) {
        int e = esize(dt);
        for (Odd o : odd) {
            size_t sb = (size_t)((o.C * o.ld + o.offS) * e), db = (size_t)((o.R * o.C + o.offD) * e);
            std::vector<unsigned char> hs = fillBits(src, sb);
            std::vector<unsigned char> want = hostTranspose(std::vector<unsigned char>(hs.begin() + o.offS * e, hs.end()), e, o.R, o.C, o.ld);
            Walk w = transposed((char *)dst + o.offD * e, (char *)src + o.offS * e, dt, o.R, o.C, o.ld);
            std::vector<std::pair<std::string, std::function<void()>>> impls = {{"branch", [&] { branch(w); }}};
            if (genWords)
                impls.push_back({"branch-gen", [&] {
                                     if (wordsOK(w)) genLaunch(genWords, gridTiles(w, 128 / e, TWORDS_COLS, 32 * sms), w);
                                     else genLaunch(genScalar, gridTiles(w, TILE, TILE, 32 * sms), w);
                                 }});
            if (wordsOK(w) && e == 4) impls.push_back({"units", [&] { unitsLaunch(w); }});
            for (auto &impl : impls) {
                CK(cudaMemset(dst, 0, db));
                impl.second();
                CK(cudaDeviceSynchronize());
                CK(cudaGetLastError());
                std::vector<unsigned char> got = download(dst, db);
                long long d = differ(std::vector<unsigned char>(got.begin() + o.offD * e, got.end()), want);
                bool lead = std::any_of(got.begin(), got.begin() + o.offD * e, [](unsigned char b) { return b != 0; });
                oddBad += d + lead;
                printf("# odd %s R=%lld C=%lld ld=%lld offsets %lld,%lld (%s, %s): %s\n", dtName(dt), o.R, o.C, o.ld, o.offD, o.offS, impl.first.c_str(),
                       wordsOK(w) ? "words" : "elements", d || lead ? "MISMATCH" : "bit-identical");
            }
        }
    }
    printf("# odd shapes: %s\n# done\n", oddBad ? "MISMATCHES" : "all bit-identical");
    return 0;
}
