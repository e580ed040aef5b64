// gkcopy.cu: a microbenchmark of sublet's transposed copy (issue 18): Copy of a
// transposed view made dense (m.T().Contiguous(), cmd/sublet-bench's transpose case)
// in F32, F16 and BF16, beside a device-to-device cudaMemcpy of the same bytes.
//
// It includes the real kernel sources of kernels/cuda/src and launches them as
// kernels/cuda's copy.go does (grid min(tiles, 32 per SM), BLOCK threads): "branch" is
// copy_transpose_words where copy.go picks it (16-byte words: a block loads its next
// tile before storing the current one, and a warp stores rows 4 at a time in every
// type), "branch-gen" the same from the committed kernels/cuda/gen/copy.fatbin (nvcc
// 11.8's SASS, what the library embeds), "main" a copy of main's copy_transpose_words
// (no prefetch; 16-bit rows 8 at a time) launched as main's copy.go launches it, and
// candidates: main's kernel with 16-bit rows 4 at a time (the last session's 16-bit
// winner, without the prefetch), the branch's kernel on a grid of one wave (the blocks
// an SM holds at once, times the SMs), and "regs": a transpose without shared memory,
// where each thread loads V words of V adjacent columns (V = 16/element bytes),
// transposes the V×V block in registers (byte permutes for 16 bits, register renaming
// for 32) and stores V words of V output rows; LR lanes of a warp run along a column
// (LR·16 bytes a load) and 32/LR along a row (512/LR bytes a store), once with loads
// and stores marked evict-first; and, for 16 bits, "pairs": the branch's tiles through
// shared memory held in the output's layout as 32-bit pairs of columns, gathered as
// 16-byte words (10 shared-memory instructions for 2 words, not 32). Every variant's
// output is compared with main's bit for bit, and main's with a transpose on the host.
// Times: cudaEvents around each launch, L2 flushed before each, 3 warm-ups, median of
// 21; % is of a cudaMemcpy device to device moving the same bytes (read + write), timed
// the same way. The backward pass makes transposes dense where a matrix was multiplied
// as its transpose through MatMul (w.T(), attention's k.T()): the gradient arrives as a
// transposed view, which AccumulateGrad's Clone copies; the training cases' weight
// shapes (1024², 784×256, 256², 10×256 and their transposes) are timed for main and
// branch. (nn.Linear's backward reads its transposes in place: no copy.) Odd shapes (partial tiles, offsets, alignments the
// word tiles refuse, grids of several rounds) are checked for correctness only.
//
// Build and run from the repository root (GPU machine):
//   nvcc -O3 -fmad=false -std=c++17 -arch=sm_90 -Xptxas -v -o /tmp/gkcopy scripts/gpu/mb/gkcopy.cu \
//     -L/usr/local/cuda/lib64/stubs -lcuda 2>/tmp/gkcopy.ptxas && /tmp/gkcopy
#include "../../../kernels/cuda/src/copy.cu"

#include <cuda.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
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

// main_copy_transpose_words<8> is main's copy_transpose_words; <4> stores 16-bit rows
// 4 at a time (the last session's 16-bit winner, 82.7% of a copy).
template <int RL16>
__global__ void __launch_bounds__(BLOCK) main_copy_transpose_words(Walk w) {
    __shared__ uint4 smem[TWORDS_COLS * (128 + 4) / 16];
    if (elem_size(w.dtype[0]) == 2) main_words_k<unsigned short, TWORDS_COLS, RL16>(w, (unsigned char *)smem);
    else main_words_k<unsigned int, TWORDS_COLS, 4>(w, (unsigned char *)smem);
}

// ---- candidate: the transpose in registers ------------------------------------------------

// transpose_regs transposes a V×V block of elements E held as V words: in[j] is V
// consecutive elements of source column j, out[i] V consecutive elements of output row
// i. 32-bit: out[i][m] = in[m][i]. 16-bit: out[i]'s 32-bit word m is element i of in[2m]
// and of in[2m+1], one byte permute.
template <typename E>
__device__ __forceinline__ void transpose_regs(const uint4 *in, uint4 *out) {
    constexpr int V = 16 / sizeof(E);
#pragma unroll
    for (int i = 0; i < V; i++) {
        unsigned *o = (unsigned *)&out[i];
#pragma unroll
        for (int m = 0; m < 4; m++) {
            if constexpr (sizeof(E) == 4) {
                o[m] = ((const unsigned *)&in[m])[i];
            } else {
                unsigned a = ((const unsigned *)&in[2 * m])[i / 2], b = ((const unsigned *)&in[2 * m + 1])[i / 2];
                o[m] = __byte_perm(a, b, i % 2 ? 0x7632 : 0x5410);
            }
        }
    }
}

// regs<E, LR>: a block's 8 warps cover 128 bytes along r (8/LR warps of LR lanes, each
// lane V elements) and the rest along c; each thread loads V words (columns c..c+V-1,
// elements r..r+V-1), transposes them and stores V words (rows r..r+V-1, columns
// c..c+V-1). Grid-striding over tiles of BR×BC. CS: loads and stores marked to be
// evicted first (__ldcs, __stcs: each byte is touched once).
template <typename E, int LR, bool CS = false>
__global__ void __launch_bounds__(BLOCK) regs(Walk w) {
    constexpr int V = 16 / sizeof(E), LC = 32 / LR, WRW = 8 / LR, WCW = BLOCK / 32 / WRW;
    constexpr int BR = WRW * LR * V, BC = WCW * LC * V;
    long long R = w.shape[0], C = w.shape[1], sd = w.stride[0][0], ss = w.stride[1][1];
    const E *src = (const E *)w.base[1];
    E *dst = (E *)w.base[0];
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    int rOff = (warp % WRW * LR + lane % LR) * V, cOff = (warp / WRW * LC + lane / LR) * V;
    unsigned tilesR = (unsigned)((R + BR - 1) / BR), tiles = tilesR * (unsigned)((C + BC - 1) / BC);
    for (unsigned t = blockIdx.x; t < tiles; t += gridDim.x) {
        long long r = (long long)(t % tilesR) * BR + rOff, c = (long long)(t / tilesR) * BC + cOff;
        if (r >= R || c >= C) continue; // R and C are whole words: a word is all in or all out
        uint4 in[V], out[V];
#pragma unroll
        for (int j = 0; j < V; j++) {
            const uint4 *p = (const uint4 *)(src + (c + j) * ss + r);
            in[j] = CS ? __ldcs(p) : *p;
        }
        transpose_regs<E>(in, out);
#pragma unroll
        for (int i = 0; i < V; i++) {
            uint4 *p = (uint4 *)(dst + (r + i) * sd + c);
            if (CS) __stcs(p, out[i]);
            else *p = out[i];
        }
    }
}

// pairs: 16-bit tiles of 64×64 through shared memory held transposed (the output's
// layout) in 32-bit pairs of adjacent columns: a thread loads two words of columns
// 2q and 2q+1 (the same 8 elements r), packs element j of both into one 32-bit word
// (a byte permute) and stores 8 of them, then gathers an output word with one 16-byte
// load from shared memory: 10 shared-memory instructions for 2 words where the
// branch's element-wise scatter and gather take 32. The pair index is XORed with
// 4·((r/8)%8) so that both the stores (8 rows r apart by 8, 4 pairs) and the 16-byte
// loads (8 lanes a row) spread over the banks. A block loads its next tile before
// storing the current one, as the branch does.
__global__ void __launch_bounds__(BLOCK) pairs(Walk w) {
    constexpr int TR = 64, TC = 64;
    __shared__ uint4 smem[TR * TC / 8];
    unsigned(*tile)[TC / 2] = (unsigned(*)[TC / 2])smem;
    long long R = w.shape[0], C = w.shape[1], sd = w.stride[0][0], ss = w.stride[1][1];
    const unsigned short *src = (const unsigned short *)w.base[1];
    unsigned short *dst = (unsigned short *)w.base[0];
    unsigned tilesR = (unsigned)((R + TR - 1) / TR), tiles = tilesR * (unsigned)((C + TC - 1) / TC);
    int rw = threadIdx.x % 8, q = threadIdx.x / 8; // the loads: elements 8rw.., columns 2q, 2q+1
    uint4 a, b;
    auto load = [&](unsigned t) {
        long long r0 = (long long)(t % tilesR) * TR, c0 = (long long)(t / tilesR) * TC;
        a = b = make_uint4(0, 0, 0, 0);
        if (t < tiles && r0 + rw * 8 < R && c0 + 2 * q < C) {
            a = *(const uint4 *)(src + (c0 + 2 * q) * ss + r0 + rw * 8);
            b = *(const uint4 *)(src + (c0 + 2 * q + 1) * ss + r0 + rw * 8);
        }
    };
    load(blockIdx.x);
    for (unsigned t = blockIdx.x; t < tiles; t += gridDim.x) {
        long long r0 = (long long)(t % tilesR) * TR, c0 = (long long)(t / tilesR) * TC;
        const unsigned *pa = (const unsigned *)&a, *pb = (const unsigned *)&b;
#pragma unroll
        for (int j = 0; j < 8; j++) tile[rw * 8 + j][q ^ (rw << 2)] = __byte_perm(pa[j / 2], pb[j / 2], j % 2 ? 0x7632 : 0x5410);
        __syncthreads();
        load(t + gridDim.x);
#pragma unroll
        for (int i = 0; i < 2; i++) {
            int k = threadIdx.x + i * BLOCK, g = k % 8, r = k / 8;
            uint4 o = *(const uint4 *)&tile[r][4 * (g ^ (r / 8 % 8))];
            if (r0 + r < R && c0 + 8 * g < C) *(uint4 *)(dst + (r0 + r) * sd + c0 + 8 * g) = o;
        }
        __syncthreads();
    }
}

template <typename E, int LR>
static long long regsTileR() { return 8 / LR * LR * (16 / sizeof(E)); }
template <typename E, int LR>
static long long regsTileC() { return (BLOCK / 32 / (8 / LR)) * (32 / LR) * (16 / sizeof(E)); }

// ---- timing --------------------------------------------------------------------------

static int sms;
static cudaEvent_t ev0, ev1;
static void *flushBuf;
static const size_t FLUSH = 256 << 20;

static float timeUs(const std::function<void()> &launch) {
    std::vector<float> t;
    for (int i = 0; i < 24; i++) {
        CK(cudaMemsetAsync(flushBuf, i, FLUSH));
        CK(cudaEventRecord(ev0));
        launch();
        CK(cudaEventRecord(ev1));
        CK(cudaEventSynchronize(ev1));
        CK(cudaGetLastError());
        float ms;
        CK(cudaEventElapsedTime(&ms, ev0, ev1));
        if (i >= 3) t.push_back(ms * 1000);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

// ---- the committed fatbin, launched through the driver ---------------------------------

static CUfunction genFn(const char *name) {
    static CUmodule mod;
    static bool tried;
    if (!tried) {
        tried = true;
        FILE *fp = fopen("kernels/cuda/gen/copy.fatbin", "rb");
        if (!fp) return nullptr;
        std::vector<char> b;
        char tmp[1 << 16];
        size_t n;
        while ((n = fread(tmp, 1, sizeof tmp, fp)) > 0) b.insert(b.end(), tmp, tmp + n);
        fclose(fp);
        if (cuModuleLoadData(&mod, b.data()) != CUDA_SUCCESS) mod = nullptr;
    }
    CUfunction f;
    if (!mod || cuModuleGetFunction(&f, mod, name) != CUDA_SUCCESS) return nullptr;
    return f;
}

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

// mainLaunch launches what main's copy.go launches for w; RL16 4: 16-bit rows 4 at a time.
static void mainLaunch(Walk w, bool rl4 = false) {
    unsigned grid = gridTiles(w, 128 / esize(w.dtype[0]), TWORDS_COLS, 32 * sms);
    if (!wordsOK(w)) copy_transpose<<<gridTiles(w, TILE, TILE, 32 * sms), BLOCK>>>(w);
    else if (rl4) main_copy_transpose_words<4><<<grid, BLOCK>>>(w);
    else main_copy_transpose_words<8><<<grid, BLOCK>>>(w);
}

template <typename E, int LR, bool CS = false>
static void regsLaunch(Walk w) { regs<E, LR, CS><<<gridTiles(w, regsTileR<E, LR>(), regsTileC<E, LR>(), 32 * sms), BLOCK>>>(w); }

// ---- inputs and checks ------------------------------------------------------------------

static unsigned long long rng = 0x9e3779b97f4a7c15ull;
static unsigned int next32() {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (unsigned int)(rng >> 16);
}

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
    CK(cudaEventCreate(&ev0));
    CK(cudaEventCreate(&ev1));
    CK(cudaMalloc(&flushBuf, FLUSH));
    const long long MAXN = 64LL << 20;
    void *src, *dst;
    CK(cudaMalloc(&src, MAXN * 4 + 256));
    CK(cudaMalloc(&dst, MAXN * 4 + 256));
    CUfunction genWords = genFn("copy_transpose_words"), genScalar = genFn("copy_transpose");
    if (!genWords || !genScalar) printf("# kernels/cuda/gen/copy.fatbin not loaded: no branch-gen rows\n");

    // The source matrices m = [rows, cols]; Copy(dense, m.T()): R = cols, C = rows.
    // Timed: ops_compare's [65536, 1024], [8192, 8192] (64M elements) and [4096, 4096]
    // with the candidates; the training cases' weight shapes for main and branch.
    struct Shape {
        long long rows, cols;
        bool candidates;
    } shapes[] = {{65536, 1024, true}, {8192, 8192, true}, {4096, 4096, true}, {1024, 1024, false}, {784, 256, false},
                  {256, 784, false}, {256, 256, false}, {10, 256, false}, {256, 10, false}};
    int perSM;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perSM, copy_transpose_words, BLOCK, 0));
    unsigned wave = (unsigned)(perSM * sms);
    printf("# copy_transpose_words: %d blocks an SM at once (one wave: %u blocks)\n", perSM, wave);
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
            if (!s.candidates) continue;
            run("branch, one wave", [&] { copy_transpose_words<<<std::min(gridTiles(w, 128 / e, TWORDS_COLS, 32 * sms), wave), BLOCK>>>(w); });
            if (e == 2) {
                run("main RL=4 (no prefetch)", [&] { mainLaunch(w, true); });
                run("regs LR=2", [&] { regsLaunch<unsigned short, 2>(w); });
                run("regs LR=4", [&] { regsLaunch<unsigned short, 4>(w); });
                run("regs LR=8", [&] { regsLaunch<unsigned short, 8>(w); });
                run("regs LR=4, evict-first", [&] { regsLaunch<unsigned short, 4, true>(w); });
                run("pairs", [&] { pairs<<<gridTiles(w, 64, 64, 32 * sms), BLOCK>>>(w); });
            } else {
                run("regs LR=2", [&] { regsLaunch<unsigned int, 2>(w); });
                run("regs LR=4", [&] { regsLaunch<unsigned int, 4>(w); });
                run("regs LR=8", [&] { regsLaunch<unsigned int, 8>(w); });
                run("regs LR=4, evict-first", [&] { regsLaunch<unsigned int, 4, true>(w); });
            }
        }
    }

    // Odd shapes, correctness only: what copy.go launches (branch), the committed
    // fatbin's kernel and the regs candidates against a host transpose; offsets in
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
            if (wordsOK(w) && e == 2) {
                impls.push_back({"regs LR=2", [&] { regsLaunch<unsigned short, 2>(w); }});
                impls.push_back({"regs LR=4", [&] { regsLaunch<unsigned short, 4>(w); }});
                impls.push_back({"regs LR=8", [&] { regsLaunch<unsigned short, 8>(w); }});
                impls.push_back({"pairs", [&] { pairs<<<gridTiles(w, 64, 64, 32 * sms), BLOCK>>>(w); }});
            } else if (wordsOK(w)) {
                impls.push_back({"regs LR=2", [&] { regsLaunch<unsigned int, 2>(w); }});
                impls.push_back({"regs LR=4", [&] { regsLaunch<unsigned int, 4>(w); }});
                impls.push_back({"regs LR=8", [&] { regsLaunch<unsigned int, 8>(w); }});
            }
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
