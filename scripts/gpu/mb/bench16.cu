// bench16.cu: a microbenchmark of sublet's slow 16-bit kernel families on [4096,4096]
// operands (issue 18): casts F16/BF16 -> F32, GeluTanh forward in F16/BF16, the sum of
// all elements, column sums (over dim 0) and the row maximum with its index (over dim 1).
//
// It includes the real kernel sources of kernels/cuda/src, launches the current kernels
// as kernels/cuda launches them for contiguous operands (grid, block, variant, pieces:
// backend.go's grid, launchWalk, runReduction), and, where the repository's committed
// gen/*.fatbin loads, the very SASS kernels/cuda embeds ("cur-gen"), then 2-4 candidate
// variants per family. Every variant's output is compared with the current kernel's bit
// for bit; variants marked "changes bits" report the largest difference in units in the
// last place instead. Times: cudaEvents around each launch (the op's launches together),
// L2 flushed before each, 3 warm-ups, median of 21; % is of a cudaMemcpy device to device
// moving the same bytes (read + write), timed the same way.
//
// Build and run from the repository root (GPU machine; the stubs folder only lets the
// linker find libcuda.so where the driver installed libcuda.so.1 alone):
//   nvcc -O3 -fmad=false -std=c++17 -arch=sm_90 -Xptxas -v -o /tmp/bench16 scripts/gpu/mb/bench16.cu \
//     -L/usr/local/cuda/lib64/stubs -lcuda 2>/tmp/bench16.ptxas && /tmp/bench16
// (.gpu/mb16/bench16.cu, git-ignored, is the same file; either includes ../kernels.)
#if __has_include("../../kernels/cuda/src/common.cuh")
#include "../../kernels/cuda/src/copy.cu"
#include "../../kernels/cuda/src/elementwise.cu"
#include "../../kernels/cuda/src/reduce.cu"
#else
#include "../../../kernels/cuda/src/copy.cu"
#include "../../../kernels/cuda/src/elementwise.cu"
#include "../../../kernels/cuda/src/reduce.cu"
#endif

#include <cuda.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#define CK(x)                                                                              \
    do {                                                                                   \
        cudaError_t e_ = (x);                                                              \
        if (e_ != cudaSuccess) {                                                           \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

static const int ROWS = 4096, COLS = 4096;
static const long long N = (long long)ROWS * COLS;

// ---- 16-bit element helpers ---------------------------------------------------------

// cvt16 converts a stored 16-bit element of DT to float exactly (as vtype<DT>::get).
template <int DT> __device__ __forceinline__ float cvt16(unsigned short h) {
    return DT == DT_F16 ? f16_to_f32(h) : bf16_to_f32(h);
}

// cvt16d converts it to double exactly in one conversion (F16: cvt.f64.f16; BF16: the
// shift to float is exact, then one F2F), where the kernels go F16 -> float -> double.
template <int DT> __device__ __forceinline__ double cvt16d(unsigned short h) {
    if (DT == DT_F16) {
        double d;
        asm("cvt.f64.f16 %0, %1;" : "=d"(d) : "h"(h));
        return d;
    }
    return (double)bf16_to_f32(h);
}

// ---- elementwise rounds --------------------------------------------------------------

// map_rounds is the loop of the elementwise variants over n items (words) of input: U a
// thread per round, a block apart (coalesced), all U loaded before any is stored, the
// grid striding; store(i, x) writes item i's outputs from its input word x.
template <int U, typename W, typename S>
__device__ __forceinline__ void map_rounds(const W *__restrict__ src, int n, S store) {
    for (int base = blockIdx.x * (BLOCK * U); base < n; base += gridDim.x * (BLOCK * U)) {
        W x[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            int i = base + u * BLOCK + threadIdx.x;
            if (i < n) x[u] = src[i];
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            int i = base + u * BLOCK + threadIdx.x;
            if (i < n) store(i, x[u]);
        }
    }
}

// ---- casts F16/BF16 -> F32 ----------------------------------------------------------

// cast_words: input word i (8 elements) to output words 2i, 2i+1, as copy_vec<2,4>; the
// types fixed at compile time (no runtime switch over dtypes, so no other path's
// registers).
template <int DS, int U>
__global__ void __launch_bounds__(BLOCK) cast_words(const uint4 *__restrict__ src, uint4 *__restrict__ dst, int nw) {
    map_rounds<U>(src, nw, [&](int i, const uint4 &x) {
        uint4 o[2];
#pragma unroll
        for (int e = 0; e < 8; e++) vtype<DT_F32>::set<float>(o[e / 4], e % 4, vtype<DS>::template get<float>(x, e));
        dst[2 * i] = o[0];
        dst[2 * i + 1] = o[1];
    });
}

// cast_half: 8-byte loads (4 elements) and 16-byte stores, so that every load and every
// store instruction of a warp covers one contiguous span (cast_words' stores leave gaps
// of 16 bytes that the second store fills).
template <int DS, int U>
__global__ void __launch_bounds__(BLOCK) cast_half(const uint2 *__restrict__ src, float4 *__restrict__ dst, int n4) {
    map_rounds<U>(src, n4, [&](int i, const uint2 &x) {
        const unsigned short *h = (const unsigned short *)&x;
        dst[i] = make_float4(cvt16<DS>(h[0]), cvt16<DS>(h[1]), cvt16<DS>(h[2]), cvt16<DS>(h[3]));
    });
}

// ---- GeluTanh forward in F16/BF16 ---------------------------------------------------

// gelu_words: the GeluTanh loop compiled for that op alone (no switch over ops), U words
// a thread per round. PACK: the float results rounded in pairs by one instruction
// (cvt.rn.f16x2.f32 / cvt.rn.bf16x2.f32: the same round to nearest even; a NaN comes out
// canonical, which is what f32_to_bf16 makes of the canonical NaN the arithmetic gives).
// FAST: __expf and __fdividef (changes bits).
template <int DT, int U, bool PACK, bool FAST>
__global__ void __launch_bounds__(BLOCK) gelu_words(const uint4 *__restrict__ src, uint4 *__restrict__ dst, int nw) {
    using V = vtype<DT>;
    map_rounds<U>(src, nw, [&](int i, const uint4 &x) {
        float r[8];
#pragma unroll
        for (int e = 0; e < 8; e++) {
            float v = V::template get<float>(x, e);
            if (FAST) r[e] = __fdividef(v, 1.0f + __expf(gelu_minus_2u<float>(v)));
            else r[e] = unary_fn<float>(OP_GELU_TANH, v);
        }
        uint4 o;
        if (PACK) {
            unsigned int *w = (unsigned int *)&o;
#pragma unroll
            for (int p = 0; p < 4; p++) {
                if (DT == DT_F16) {
                    __half2 h = __floats2half2_rn(r[2 * p], r[2 * p + 1]);
                    w[p] = *(unsigned int *)&h;
                } else {
                    __nv_bfloat162 h = __floats2bfloat162_rn(r[2 * p], r[2 * p + 1]);
                    w[p] = *(unsigned int *)&h;
                }
            }
        } else {
#pragma unroll
            for (int e = 0; e < 8; e++) V::template set<float>(o, e, r[e]);
        }
        dst[i] = o;
    });
}

// ---- the sum of all elements ----------------------------------------------------------

// sum_piece is reduce_block_k's dense sum (fold_words over aligned whole words, then
// group_sum) for block piece c: the same additions in the same order, U words in flight
// instead of UNROLL, each element converted to double in one instruction.
template <int DS, int U>
__device__ __forceinline__ double sum_piece(const Reduction &r, long long lo, long long hi) {
    const uint4 *w = (const uint4 *)(r.src + (unsigned long long)lo * 2);
    long long words = (hi - lo) / 8;
    double d[8];
#pragma unroll
    for (int e = 0; e < 8; e++) d[e] = 0;
    long long i = threadIdx.x;
    for (; i + (U - 1) * BLOCK < words; i += U * BLOCK) {
        uint4 x[U];
#pragma unroll
        for (int u = 0; u < U; u++) x[u] = w[i + u * BLOCK];
#pragma unroll
        for (int u = 0; u < U; u++) {
            const unsigned short *h = (const unsigned short *)&x[u];
#pragma unroll
            for (int e = 0; e < 8; e++) d[e] += cvt16d<DS>(h[e]);
        }
    }
    for (; i < words; i += BLOCK) {
        uint4 x = w[i];
        const unsigned short *h = (const unsigned short *)&x;
#pragma unroll
        for (int e = 0; e < 8; e++) d[e] += cvt16d<DS>(h[e]);
    }
    double s = 0;
#pragma unroll
    for (int e = 0; e < 8; e++) s += d[e];
    __shared__ double sums[BLOCK / 32];
    return group_sum<BLOCK>(s, sums);
}

// sum_all: block c sums piece c into part[c]; with ONEPASS the last block to finish (a
// ticket from *count, which it resets) combines the partials as reduce_finish_block_k
// does (thread j pieces j, j+BLOCK, ... in order, then the same tree) and writes the
// output, which saves the second launch.
template <int DS, int U, bool ONEPASS>
__global__ void __launch_bounds__(BLOCK) sum_all(Reduction r, Acc *part, unsigned int *count) {
    __shared__ Acc tree[BLOCK];
    __shared__ bool last;
    for (long long c = blockIdx.x; c < r.pieces; c += gridDim.x) {
        long long lo = c * r.piece, hi = min(lo + r.piece, r.nRed);
        double v = sum_piece<DS, U>(r, lo, hi);
        if (threadIdx.x == 0) {
            Acc a = acc_zero();
            a.sum = v;
            part[c] = a;
        }
    }
    if (!ONEPASS) return;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(count, 1u) == gridDim.x - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    Acc a = acc_zero();
    for (long long c = threadIdx.x; c < r.pieces; c += BLOCK) a.sum += __ldcg(&part[c].sum);
    tree[threadIdx.x] = a;
    __syncthreads();
    for (int s = BLOCK / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) acc_merge(tree[threadIdx.x], false, tree[threadIdx.x + s]);
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        finish_out<float>(r, RED_SUM, nullptr, 0, tree[0]);
        *count = 0;
    }
}

// ---- column sums ----------------------------------------------------------------------

// cols8: reduce_cols_k with 8 adjacent columns a thread (one 16-byte load a row, where
// the kernel loads 8 bytes of 4 columns), the same COLS_X × COLS_Y block, the same rows
// per thread (ty, ty+COLS_Y, ... of the piece, in order), the same tree over ty and the
// same pieces: the same additions. A block covers COLS_X·8 columns. With ONEPASS the last
// block of a column group (a ticket per group) adds the group's partials in piece order
// as reduce_finish_k does, which saves the second launch.
template <int DS, int U, bool ONEPASS>
__global__ void __launch_bounds__(BLOCK) cols8(Reduction r, Acc *part, unsigned int *count) {
    constexpr int CV = 8, CB = COLS_X * CV;
    __shared__ double tree[COLS_Y][CB];
    __shared__ bool last;
    int tx = threadIdx.x % COLS_X, ty = threadIdx.x / COLS_X;
    long long groups = (r.nOut + CB - 1) / CB;
    for (long long b = blockIdx.x; b < groups * r.pieces; b += gridDim.x) {
        long long g = b % groups, c = b / groups;
        long long col = (g * COLS_X + tx) * CV;
        long long lo = c * r.piece, hi = min(lo + r.piece, r.nRed);
        double s[CV];
#pragma unroll
        for (int j = 0; j < CV; j++) s[j] = 0;
        if (col < r.nOut) {
            const uint4 *p = (const uint4 *)r.src;
            long long rs = r.rstride[0];
            for (long long row = lo + ty; row < hi; row += COLS_Y * U) {
                uint4 x[U];
#pragma unroll
                for (int u = 0; u < U; u++) {
                    long long ru = row + u * COLS_Y;
                    if (ru < hi) x[u] = p[(ru * rs + col) / CV];
                }
#pragma unroll
                for (int u = 0; u < U; u++) {
                    if (row + u * COLS_Y < hi) {
                        const unsigned short *h = (const unsigned short *)&x[u];
#pragma unroll
                        for (int j = 0; j < CV; j++) s[j] += (double)cvt16<DS>(h[j]);
                    }
                }
            }
        }
#pragma unroll
        for (int j = 0; j < CV; j++) tree[ty][tx * CV + j] = s[j];
        __syncthreads();
        for (int h = COLS_Y / 2; h > 0; h >>= 1) {
            if (ty < h) {
#pragma unroll
                for (int j = 0; j < CV; j++) tree[ty][tx * CV + j] += tree[ty + h][tx * CV + j];
            }
            __syncthreads();
        }
        if (ty == 0 && col < r.nOut) {
#pragma unroll
            for (int j = 0; j < CV; j++) {
                Acc a = acc_zero();
                a.sum = tree[0][tx * CV + j];
                part[c * r.nOut + col + j] = a;
            }
        }
        __syncthreads();
        if (!ONEPASS) continue;
        __threadfence();
        __syncthreads();
        if (threadIdx.x == 0) last = atomicAdd(&count[g], 1u) == (unsigned)r.pieces - 1;
        __syncthreads();
        if (last) {
            __threadfence();
            long long o = g * CB + threadIdx.x; // BLOCK == CB: a thread per column
            if (o < r.nOut) {
                Acc a = acc_zero();
                for (long long k = 0; k < r.pieces; k++) a.sum += __ldcg(&part[k * r.nOut + o].sum);
                finish_out<float>(r, RED_SUM, nullptr, o, a);
            }
            if (threadIdx.x == 0) count[g] = 0;
        }
    }
}

// ---- the row maximum and its index ------------------------------------------------------

// see_max is fold_words' see: (v at pos) replaces (m at at) when none is kept yet, when v
// is larger, or when v is the first NaN.
__device__ __forceinline__ void see_max(float v, int pos, float &m, int &at) {
    if (at < 0 || v > m || (v != v && m == m)) m = v, at = pos;
}

// word_max2 is the largest element of a word of 8 F16 or BF16 (NaN if any is) by packed
// max instructions, 4 for 8 elements.
template <int DT> __device__ __forceinline__ float word_max2(const uint4 &x) {
    if (DT == DT_F16) {
        const __half2 *h = (const __half2 *)&x;
        __half2 a = __hmax2_nan(__hmax2_nan(h[0], h[1]), __hmax2_nan(h[2], h[3]));
        return fmaxf(__low2float(a), __high2float(a)) + (__hisnan(a.x) || __hisnan(a.y) ? __int_as_float(0x7fffffff) : 0.0f);
    }
    const __nv_bfloat162 *h = (const __nv_bfloat162 *)&x;
    __nv_bfloat162 a = __hmax2_nan(__hmax2_nan(h[0], h[1]), __hmax2_nan(h[2], h[3]));
    return fmaxf(__low2float(a), __high2float(a)) + (__hisnan(a.x) || __hisnan(a.y) ? __int_as_float(0x7fffffff) : 0.0f);
}

// rowmax: reduce_warp_k's maximum (a warp per row, lane j its words j, j+32, ... of a
// dense aligned row) with positions as ints within the row and U words in flight. SKIP:
// a word whose packed maximum would not replace the kept one (not larger, no first NaN)
// is passed over, else its elements are seen in order, so the kept (value, position) is
// the same as seeing every element in order; warp_acc and finish_out as the kernel.
template <int DS, int U, bool SKIP>
__global__ void __launch_bounds__(BLOCK) rowmax(Reduction r, long long *idx) {
    using V = vtype<DS>;
    int lane = threadIdx.x & 31;
    long long warps = (long long)gridDim.x * (BLOCK / 32);
    int words = (int)(r.nRed / 8);
    for (long long o = (long long)blockIdx.x * (BLOCK / 32) + threadIdx.x / 32; o < r.nOut; o += warps) {
        const uint4 *w = (const uint4 *)(r.src + (unsigned long long)(o * r.kstride[1][0]) * 2);
        float m = NEG_INF;
        int at = -1;
        auto word = [&](const uint4 &x, int i) {
            if (SKIP) {
                float wm = word_max2<DS>(x);
                if (!(at < 0 || wm > m || (wm != wm && m == m))) return;
            }
#pragma unroll
            for (int e = 0; e < 8; e++) see_max(V::template get<float>(x, e), i * 8 + e, m, at);
        };
        int i = lane;
        for (; i + (U - 1) * 32 < words; i += U * 32) {
            uint4 x[U];
#pragma unroll
            for (int u = 0; u < U; u++) x[u] = w[i + u * 32];
#pragma unroll
            for (int u = 0; u < U; u++) word(x[u], i + u * 32);
        }
        for (; i < words; i += 32) word(w[i], i);
        Acc a = acc_zero();
        if (at >= 0) a.max = m, a.arg = at;
        a = warp_acc(a, true);
        if (lane == 0) finish_out<float>(r, RED_MAX, idx, o, a);
    }
}

// ---- the harness --------------------------------------------------------------------

static int sms;
static cudaEvent_t ev0, ev1;
static void *flushBuf;
static const size_t FLUSH = 256u << 20; // > L2 (50 MB on H100)

// gridFor is backend.go's grid: a block per 256 items, at most 32 per SM.
static unsigned gridFor(long long n) { return (unsigned)std::max(1LL, std::min((n + BLOCK - 1) / BLOCK, 32LL * sms)); }

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
    printf("%-10s %-34s %9.2f us %8.1f GB/s  (memcpy of %zu MB read + written)\n", "reference", "cudaMemcpy D2D", us, bytes / us / 1e3, bytes >> 20);
    return memo[bytes] = bytes / us / 1e3;
}

static std::vector<unsigned char> fetch(const void *d, size_t bytes) {
    std::vector<unsigned char> h(bytes);
    CK(cudaMemcpy(h.data(), d, bytes, cudaMemcpyDeviceToHost));
    return h;
}

// ord16 and ord32 map float bits to integers whose difference counts ulps.
static long long ord16(unsigned short h) { return (h & 0x8000) ? -(long long)(h & 0x7fff) : (long long)h; }
static long long ord32(unsigned int u) { return (u & 0x80000000u) ? -(long long)(u & 0x7fffffffu) : (long long)u; }

// Family is one kernel family's baseline output and the bytes its op moves.
struct Family {
    const char *name;
    size_t bytes;                      // read + written
    std::vector<void *> outs;          // device outputs compared (the op's results)
    std::vector<size_t> outBytes;
    int elem;                          // element size of outs[0] for ulps: 2, 4, or 0 (compare only)
    int dt16;                          // outs[0]'s type when elem is 2 (to tell NaN payloads apart)
    std::vector<std::vector<unsigned char>> ref; // cur's outputs
};

static void clearOuts(Family &f) {
    for (size_t k = 0; k < f.outs.size(); k++) CK(cudaMemset(f.outs[k], 0xcd, f.outBytes[k]));
}

// run times one variant, then checks its outputs against the baseline's (the first run
// of a family is its baseline); changes says the variant may change bits (ulps shown).
static void run(Family &f, const char *variant, const char *regsNote, bool changes, const std::function<void()> &launch) {
    clearOuts(f);
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
        long long diffs = 0, maxUlp = 0, nanPay = 0;
        auto isNaN16 = [&](unsigned short h) { return f.dt16 == DT_F16 ? (h & 0x7c00) == 0x7c00 && (h & 0x3ff) : (h & 0x7f80) == 0x7f80 && (h & 0x7f); };
        for (size_t k = 0; k < got.size(); k++) {
            if (got[k] == f.ref[k]) continue;
            eq = false;
            if (k == 0 && f.elem == 2) {
                const unsigned short *a = (const unsigned short *)got[0].data(), *b = (const unsigned short *)f.ref[0].data();
                for (size_t i = 0; i < got[0].size() / 2; i++)
                    if (a[i] != b[i] && isNaN16(a[i]) && isNaN16(b[i])) nanPay++;
                    else if (a[i] != b[i]) diffs++, maxUlp = std::max(maxUlp, std::llabs(ord16(a[i]) - ord16(b[i])));
            } else if (k == 0 && f.elem == 4) {
                const unsigned int *a = (const unsigned int *)got[0].data(), *b = (const unsigned int *)f.ref[0].data();
                for (size_t i = 0; i < got[0].size() / 4; i++)
                    if (a[i] != b[i]) diffs++, maxUlp = std::max(maxUlp, std::llabs(ord32(a[i]) - ord32(b[i])));
            } else {
                for (size_t i = 0; i < got[k].size(); i++) diffs += got[k][i] != f.ref[k][i];
            }
        }
        char buf[160];
        if (eq) snprintf(buf, sizeof buf, "yes");
        else if (diffs == 0 && nanPay > 0) snprintf(buf, sizeof buf, "yes but NaN payloads: %lld NaNs differ", nanPay);
        else snprintf(buf, sizeof buf, "NO: %lld differ, max %lld ulp (+%lld NaN payloads)%s", diffs, maxUlp, nanPay, changes ? " (changes bits by design)" : " (MISMATCH: a bug)");
        same = buf;
    }
    float us = timeUs(launch);
    double gbs = f.bytes / us / 1e3;
    printf("%-10s %-34s %9.2f us %8.1f GB/s %6.1f%%  bit-identical: %s  [%s]\n", f.name, variant, us, gbs, 100 * gbs / copyGBs(f.bytes), same.c_str(), regsNote);
    fflush(stdout);
}

// ---- the committed fatbins (kernels/cuda/gen), launched through the driver ----------

static CUfunction genFn(const char *family, const char *name) {
    static std::map<std::string, CUmodule> mods;
    if (!mods.count(family)) {
        std::string path = std::string("kernels/cuda/gen/") + family + ".fatbin";
        FILE *fp = fopen(path.c_str(), "rb");
        if (!fp) return nullptr;
        std::vector<char> b;
        char tmp[1 << 16];
        size_t n;
        while ((n = fread(tmp, 1, sizeof tmp, fp)) > 0) b.insert(b.end(), tmp, tmp + n);
        fclose(fp);
        CUmodule m;
        if (cuModuleLoadData(&m, b.data()) != CUDA_SUCCESS) return nullptr;
        mods[family] = m;
    }
    CUfunction f;
    if (cuModuleGetFunction(&f, mods[family], name) != CUDA_SUCCESS) return nullptr;
    return f;
}

static void genLaunch(CUfunction f, unsigned grid, void **args) {
    if (cuLaunchKernel(f, grid, 1, 1, BLOCK, 1, 1, 0, 0, args, nullptr) != CUDA_SUCCESS) {
        fprintf(stderr, "cuLaunchKernel failed\n");
        exit(1);
    }
}

// ---- inputs ---------------------------------------------------------------------------

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

// fill16 writes N elements of dt: kind 0 any bit pattern (NaN, Inf, subnormals), 1
// uniform in [-6, 6] with one in 64 an arbitrary pattern, 2 uniform in [-1, 1], 3
// uniform in [-1, 1] with ties of the row's maximum, and NaN in every 7th row.
static std::vector<unsigned short> fill16(void *d, int dt, int kind) {
    std::vector<unsigned short> h(N);
    for (long long i = 0; i < N; i++) {
        switch (kind) {
        case 0: h[i] = (unsigned short)next32(); break;
        case 1: h[i] = (next32() % 64 == 0) ? (unsigned short)next32() : toBits(dt, uniform(-6, 6)); break;
        default: h[i] = toBits(dt, uniform(-1, 1));
        }
    }
    if (kind == 3) {
        for (int r = 0; r < ROWS; r++) {
            unsigned short *row = &h[(size_t)r * COLS];
            row[next32() % COLS] = toBits(dt, 2.0f);
            row[next32() % COLS] = toBits(dt, 2.0f); // ties: the first wins
            if (r % 7 == 0) row[next32() % COLS] = dt == DT_F16 ? 0x7e00 : 0x7fc0;
            if (r % 11 == 0) row[next32() % COLS] = 0xffff; // a negative NaN
        }
    }
    CK(cudaMemcpy(d, h.data(), N * 2, cudaMemcpyHostToDevice));
    return h;
}

// host16 is a stored 16-bit element of dt as float (exact).
static float host16(int dt, unsigned short h) {
    if (dt == DT_F16) return __half2float(*(__half *)&h);
    unsigned int u = (unsigned int)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

// hostCheck prints how the baseline's output agrees with a host computation: a check of
// the harness (operands, Reduction fields), not of the kernels' summation order.
static void hostCheck(const char *fam, const char *what, long long bad, double worst) {
    printf("# host check %-9s %s: %lld wrong, worst relative difference %.3g%s\n", fam, what, bad, worst, bad ? "  <-- HARNESS OR KERNEL WRONG" : "");
}

static float asF32(const std::vector<unsigned char> &b, size_t i) {
    float f;
    memcpy(&f, b.data() + 4 * i, 4);
    return f;
}

static Walk walk2(void *dst, int dd, void *src, int ds) {
    Walk w;
    memset(&w, 0, sizeof w);
    w.size = N, w.rank = 1, w.ops = 2;
    w.shape[0] = N;
    w.stride[0][0] = w.stride[1][0] = 1;
    w.base[0] = (unsigned long long)dst, w.base[1] = (unsigned long long)src;
    w.dtype[0] = dd, w.dtype[1] = ds;
    return w;
}

static Reduction blank() {
    Reduction r;
    memset(&r, 0, sizeof r);
    r.krank = r.rrank = 1;
    return r;
}

static const char *dtName(int dt) { return dt == DT_F16 ? "f16" : "bf16"; }

int main() {
    CK(cudaFree(0));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    sms = prop.multiProcessorCount;
    int drv;
    CK(cudaDriverGetVersion(&drv));
    printf("# bench16: %s, %d SMs, L2 %d MB, driver API %d; [%d,%d] operands; median of 21, L2 flushed\n", prop.name, sms, prop.l2CacheSize >> 20, drv, ROWS, COLS);
    CK(cudaEventCreate(&ev0));
    CK(cudaEventCreate(&ev1));
    CK(cudaMalloc(&flushBuf, FLUSH));
    void *in16, *out16, *out32, *partBuf, *idxBuf, *cnt;
    CK(cudaMalloc(&in16, N * 2));
    CK(cudaMalloc(&out16, N * 2));
    CK(cudaMalloc(&out32, N * 4));
    CK(cudaMalloc(&partBuf, 4 << 20)); // kernels/cuda's scratch
    CK(cudaMalloc(&idxBuf, ROWS * 8));
    CK(cudaMalloc(&cnt, 4096 * 4));
    CK(cudaMemset(cnt, 0, 4096 * 4));
    Acc *part = (Acc *)partBuf;
    unsigned int *count = (unsigned int *)cnt;
    long long *idx = (long long *)idxBuf;
    const unsigned gridWalk = gridFor((N + UNROLL - 1) / UNROLL); // launchWalk, rank 1
    const int nw = (int)(N / 8);
    const unsigned wave = sms * (2048 / BLOCK); // every SM full once

    for (int ds : {DT_F16, DT_BF16}) {
        // Casts: Copy(F32 dst, 16-bit src): copy_f32_i32 (copy_vec<2,4>).
        char name[32];
        snprintf(name, sizeof name, "cast-%s", dtName(ds));
        Family f{name, (size_t)N * 6, {out32}, {(size_t)N * 4}, 4, 0, {}};
        std::vector<unsigned short> h = fill16(in16, ds, 0);
        Walk w = walk2(out32, DT_F32, in16, ds);
        run(f, "cur copy_f32_i32", "src", false, [&] { copy_f32_i32<<<gridWalk, BLOCK>>>(w); });
        {
            long long bad = 0;
            for (long long i = 0; i < N; i++) {
                float want = host16(ds, h[i]), got = asF32(f.ref[0], i);
                if (!(want == got || (want != want && got != got)) || (want == 0 && std::signbit(want) != std::signbit(got))) bad++;
            }
            hostCheck(name, "exact conversion (NaN as NaN)", bad, 0);
        }
        if (CUfunction g = genFn("copy", "copy_f32_i32")) {
            void *a[] = {&w};
            run(f, "cur-gen (committed fatbin)", "gen", false, [&] { genLaunch(g, gridWalk, a); });
        }
        const uint4 *s4 = (const uint4 *)in16;
        uint4 *d4 = (uint4 *)out32;
        if (ds == DT_F16) {
            run(f, "words U=1 grid=32/SM", "cast_words<2,1>", false, [&] { cast_words<DT_F16, 1><<<gridWalk, BLOCK>>>(s4, d4, nw); });
            run(f, "words U=2 grid=32/SM", "cast_words<2,2>", false, [&] { cast_words<DT_F16, 2><<<gridWalk, BLOCK>>>(s4, d4, nw); });
            run(f, "words U=4 grid=8/SM", "cast_words<2,4>", false, [&] { cast_words<DT_F16, 4><<<wave, BLOCK>>>(s4, d4, nw); });
            run(f, "half U=4 grid=32/SM", "cast_half<2,4>", false, [&] { cast_half<DT_F16, 4><<<gridWalk, BLOCK>>>((const uint2 *)in16, (float4 *)out32, (int)(N / 4)); });
            run(f, "half U=8 grid=8/SM", "cast_half<2,8>", false, [&] { cast_half<DT_F16, 8><<<wave, BLOCK>>>((const uint2 *)in16, (float4 *)out32, (int)(N / 4)); });
        } else {
            run(f, "words U=1 grid=32/SM", "cast_words<3,1>", false, [&] { cast_words<DT_BF16, 1><<<gridWalk, BLOCK>>>(s4, d4, nw); });
            run(f, "words U=2 grid=32/SM", "cast_words<3,2>", false, [&] { cast_words<DT_BF16, 2><<<gridWalk, BLOCK>>>(s4, d4, nw); });
            run(f, "words U=4 grid=8/SM", "cast_words<3,4>", false, [&] { cast_words<DT_BF16, 4><<<wave, BLOCK>>>(s4, d4, nw); });
            run(f, "half U=4 grid=32/SM", "cast_half<3,4>", false, [&] { cast_half<DT_BF16, 4><<<gridWalk, BLOCK>>>((const uint2 *)in16, (float4 *)out32, (int)(N / 4)); });
            run(f, "half U=8 grid=8/SM", "cast_half<3,8>", false, [&] { cast_half<DT_BF16, 8><<<wave, BLOCK>>>((const uint2 *)in16, (float4 *)out32, (int)(N / 4)); });
        }
    }

    for (int dt : {DT_F16, DT_BF16}) {
        // GeluTanh: Unary(GeluTanh, dst, x), both dt: unary_f32_i32 (map_vec<2, dt>).
        char name[32];
        snprintf(name, sizeof name, "gelu-%s", dtName(dt));
        Family f{name, (size_t)N * 4, {out16}, {(size_t)N * 2}, 2, dt, {}};
        std::vector<unsigned short> h = fill16(in16, dt, 1);
        Walk w = walk2(out16, dt, in16, dt);
        int op = OP_GELU_TANH;
        run(f, "cur unary_f32_i32", "src", false, [&] { unary_f32_i32<<<gridWalk, BLOCK>>>(w, op); });
        {
            long long bad = 0;
            double worst = 0, tolRel = dt == DT_F16 ? 1.0 / 512 : 1.0 / 64; // kernelstest's within()
            const unsigned short *o = (const unsigned short *)f.ref[0].data();
            for (long long i = 0; i < N; i++) {
                double x = host16(dt, h[i]), got = host16(dt, o[i]);
                double want = x / (1 + std::exp(-2 * SQRT_2_OVER_PI * (x + GELU_COEF * x * x * x)));
                if (want != want || std::isinf(want)) {
                    if (!(got != got || got == want)) bad++;
                    continue;
                }
                double d = std::fabs(got - want) / std::max(std::fabs(want), 1.0);
                worst = std::max(worst, d);
                if (d > tolRel) bad++;
            }
            hostCheck(name, "GeluTanh within kernelstest's tolerance", bad, worst);
        }
        if (CUfunction g = genFn("elementwise", "unary_f32_i32")) {
            void *a[] = {&w, &op};
            run(f, "cur-gen (committed fatbin)", "gen", false, [&] { genLaunch(g, gridWalk, a); });
        }
        const uint4 *s4 = (const uint4 *)in16;
        uint4 *d4 = (uint4 *)out16;
        if (dt == DT_F16) {
            run(f, "gelu only U=1", "gelu_words<2,1,0,0>", false, [&] { gelu_words<DT_F16, 1, false, false><<<gridWalk, BLOCK>>>(s4, d4, nw); });
            run(f, "gelu only U=2", "gelu_words<2,2,0,0>", false, [&] { gelu_words<DT_F16, 2, false, false><<<gridWalk, BLOCK>>>(s4, d4, nw); });
            run(f, "gelu only U=2 packed cvt", "gelu_words<2,2,1,0>", false, [&] { gelu_words<DT_F16, 2, true, false><<<gridWalk, BLOCK>>>(s4, d4, nw); });
            run(f, "gelu only U=4 packed grid=8/SM", "gelu_words<2,4,1,0>", false, [&] { gelu_words<DT_F16, 4, true, false><<<wave, BLOCK>>>(s4, d4, nw); });
            run(f, "FAST __expf/__fdividef U=2 pk", "gelu_words<2,2,1,1>", true, [&] { gelu_words<DT_F16, 2, true, true><<<gridWalk, BLOCK>>>(s4, d4, nw); });
        } else {
            run(f, "gelu only U=1", "gelu_words<3,1,0,0>", false, [&] { gelu_words<DT_BF16, 1, false, false><<<gridWalk, BLOCK>>>(s4, d4, nw); });
            run(f, "gelu only U=2", "gelu_words<3,2,0,0>", false, [&] { gelu_words<DT_BF16, 2, false, false><<<gridWalk, BLOCK>>>(s4, d4, nw); });
            run(f, "gelu only U=2 packed cvt", "gelu_words<3,2,1,0>", false, [&] { gelu_words<DT_BF16, 2, true, false><<<gridWalk, BLOCK>>>(s4, d4, nw); });
            run(f, "gelu only U=4 packed grid=8/SM", "gelu_words<3,4,1,0>", false, [&] { gelu_words<DT_BF16, 4, true, false><<<wave, BLOCK>>>(s4, d4, nw); });
            run(f, "FAST __expf/__fdividef U=2 pk", "gelu_words<3,2,1,1>", true, [&] { gelu_words<DT_BF16, 2, true, true><<<gridWalk, BLOCK>>>(s4, d4, nw); });
        }
    }

    for (int ds : {DT_F16, DT_BF16}) {
        // Sum of everything into an F32 scalar: reduce_block_f32 over pieceCount(N, 1,
        // blockPiece) = 512 pieces of 32768, then reduce_finish_block_f32 (512 > 64).
        char name[32];
        snprintf(name, sizeof name, "sum-%s", dtName(ds));
        Family f{name, (size_t)N * 2, {out32}, {4}, 4, 0, {}};
        std::vector<unsigned short> h = fill16(in16, ds, 2);
        Reduction r = blank();
        r.nOut = 1, r.nRed = N;
        r.kshape[0] = 1, r.rshape[0] = N, r.rstride[0] = 1;
        r.dst = (unsigned long long)out32, r.src = (unsigned long long)in16, r.dtd = DT_F32, r.dts = ds;
        r.pieces = std::min((N + 32767) / 32768, (long long)((4 << 20) / sizeof(Acc)));
        r.piece = (N + r.pieces - 1) / r.pieces;
        int mode = RED_SUM;
        long long *noIdx = nullptr;
        unsigned g1 = (unsigned)r.pieces;
        run(f, "cur reduce_block+finish_block", "src", false, [&] {
            reduce_block_f32<<<g1, BLOCK>>>(r, mode, noIdx, part);
            reduce_finish_block_f32<<<1, BLOCK>>>(r, mode, noIdx, part);
        });
        {
            double want = 0, mag = 0;
            for (long long i = 0; i < N; i++) want += host16(ds, h[i]), mag += std::fabs(host16(ds, h[i]));
            double d = std::fabs(asF32(f.ref[0], 0) - want) / mag;
            hostCheck(name, "sum against a host sum (relative to the sum of magnitudes)", d > 1e-7, d);
        }
        CUfunction gb = genFn("reduce", "reduce_block_f32"), gf = genFn("reduce", "reduce_finish_block_f32");
        if (gb && gf) {
            void *a[] = {&r, &mode, &noIdx, &part};
            run(f, "cur-gen (committed fatbin)", "gen", false, [&] { genLaunch(gb, g1, a), genLaunch(gf, 1, a); });
        }
        Reduction r2 = r; // 2048 pieces of 8192: another order
        r2.pieces = 2048, r2.piece = N / 2048;
        if (ds == DT_F16) {
            run(f, "U=8 cvt.f64.f16 + finish_block", "sum_all<2,8,0>", false, [&] {
                sum_all<DT_F16, 8, false><<<g1, BLOCK>>>(r, part, count);
                reduce_finish_block_f32<<<1, BLOCK>>>(r, mode, noIdx, part);
            });
            run(f, "U=8 cvt.f64.f16 one pass", "sum_all<2,8,1>", false, [&] { sum_all<DT_F16, 8, true><<<g1, BLOCK>>>(r, part, count); });
            run(f, "U=4 cvt.f64.f16 one pass", "sum_all<2,4,1>", false, [&] { sum_all<DT_F16, 4, true><<<g1, BLOCK>>>(r, part, count); });
            run(f, "2048 pieces U=4 one pass", "sum_all<2,4,1>", true, [&] { sum_all<DT_F16, 4, true><<<2048, BLOCK>>>(r2, part, count); });
        } else {
            run(f, "U=8 + finish_block", "sum_all<3,8,0>", false, [&] {
                sum_all<DT_BF16, 8, false><<<g1, BLOCK>>>(r, part, count);
                reduce_finish_block_f32<<<1, BLOCK>>>(r, mode, noIdx, part);
            });
            run(f, "U=8 one pass", "sum_all<3,8,1>", false, [&] { sum_all<DT_BF16, 8, true><<<g1, BLOCK>>>(r, part, count); });
            run(f, "U=4 one pass", "sum_all<3,4,1>", false, [&] { sum_all<DT_BF16, 4, true><<<g1, BLOCK>>>(r, part, count); });
            run(f, "2048 pieces U=4 one pass", "sum_all<3,4,1>", true, [&] { sum_all<DT_BF16, 4, true><<<2048, BLOCK>>>(r2, part, count); });
        }
    }

    for (int ds : {DT_F16, DT_BF16}) {
        // Column sums [4096,4096] -> [4096] F32: reduce_cols_f32 over 32 column groups ×
        // colPieces = 32 pieces of 128 rows, then reduce_finish_f32 (32 <= 64 pieces).
        char name[32];
        snprintf(name, sizeof name, "cols-%s", dtName(ds));
        Family f{name, (size_t)N * 2, {out32}, {(size_t)COLS * 4}, 4, 0, {}};
        std::vector<unsigned short> h = fill16(in16, ds, 2);
        Reduction r = blank();
        r.nOut = COLS, r.nRed = ROWS;
        r.kshape[0] = COLS, r.kstride[0][0] = 1, r.kstride[1][0] = 1;
        r.rshape[0] = ROWS, r.rstride[0] = COLS;
        r.dst = (unsigned long long)out32, r.src = (unsigned long long)in16, r.dtd = DT_F32, r.dts = ds;
        long long groups = (COLS + COLS_X * COLS_V - 1) / (COLS_X * COLS_V);
        long long want = std::max(1LL, std::min((1024 + groups - 1) / groups, (long long)ROWS / (4 * COLS_Y * COLS_U)));
        long long per = (ROWS + want - 1) / want;
        r.pieces = std::max(1LL, std::min((ROWS + per - 1) / per, (long long)((4 << 20) / sizeof(Acc)) / COLS));
        r.piece = (ROWS + r.pieces - 1) / r.pieces;
        int mode = RED_SUM;
        long long *noIdx = nullptr;
        unsigned g1 = (unsigned)(groups * r.pieces), gfin = gridFor(COLS);
        printf("# cols: %lld groups x %lld pieces of %lld rows\n", groups, r.pieces, r.piece);
        run(f, "cur reduce_cols+finish", "src", false, [&] {
            reduce_cols_f32<<<g1, BLOCK>>>(r, mode, noIdx, part);
            reduce_finish_f32<<<gfin, BLOCK>>>(r, mode, noIdx, part);
        });
        {
            std::vector<double> want(COLS, 0), mag(COLS, 0);
            for (long long i = 0; i < N; i++) want[i % COLS] += host16(ds, h[i]), mag[i % COLS] += std::fabs(host16(ds, h[i]));
            long long bad = 0;
            double worst = 0;
            for (int c = 0; c < COLS; c++) {
                double d = std::fabs(asF32(f.ref[0], c) - want[c]) / mag[c];
                worst = std::max(worst, d);
                bad += d > 1e-7;
            }
            hostCheck(name, "column sums against host sums (relative to magnitudes)", bad, worst);
        }
        CUfunction gc = genFn("reduce", "reduce_cols_f32"), gf = genFn("reduce", "reduce_finish_f32");
        if (gc && gf) {
            void *a[] = {&r, &mode, &noIdx, &part};
            run(f, "cur-gen (committed fatbin)", "gen", false, [&] { genLaunch(gc, g1, a), genLaunch(gf, gfin, a); });
        }
        unsigned g8 = (unsigned)((COLS / (COLS_X * 8)) * r.pieces);
        Reduction r2 = r; // 8 pieces of 512 rows: another order
        r2.pieces = 8, r2.piece = ROWS / 8;
        unsigned g8b = (unsigned)((COLS / (COLS_X * 8)) * r2.pieces);
        if (ds == DT_F16) {
            run(f, "8 cols/thread U=8 + finish", "cols8<2,8,0>", false, [&] {
                cols8<DT_F16, 8, false><<<g8, BLOCK>>>(r, part, count);
                reduce_finish_f32<<<gfin, BLOCK>>>(r, mode, noIdx, part);
            });
            run(f, "8 cols/thread U=8 one pass", "cols8<2,8,1>", false, [&] { cols8<DT_F16, 8, true><<<g8, BLOCK>>>(r, part, count); });
            run(f, "8 cols/thread U=16 one pass", "cols8<2,16,1>", false, [&] { cols8<DT_F16, 16, true><<<g8, BLOCK>>>(r, part, count); });
            run(f, "8 pieces of 512 U=8 one pass", "cols8<2,8,1>", true, [&] { cols8<DT_F16, 8, true><<<g8b, BLOCK>>>(r2, part, count); });
        } else {
            run(f, "8 cols/thread U=8 + finish", "cols8<3,8,0>", false, [&] {
                cols8<DT_BF16, 8, false><<<g8, BLOCK>>>(r, part, count);
                reduce_finish_f32<<<gfin, BLOCK>>>(r, mode, noIdx, part);
            });
            run(f, "8 cols/thread U=8 one pass", "cols8<3,8,1>", false, [&] { cols8<DT_BF16, 8, true><<<g8, BLOCK>>>(r, part, count); });
            run(f, "8 cols/thread U=16 one pass", "cols8<3,16,1>", false, [&] { cols8<DT_BF16, 16, true><<<g8, BLOCK>>>(r, part, count); });
            run(f, "8 pieces of 512 U=8 one pass", "cols8<3,8,1>", true, [&] { cols8<DT_BF16, 8, true><<<g8b, BLOCK>>>(r2, part, count); });
        }
    }

    for (int ds : {DT_F16, DT_BF16}) {
        // Max over rows: [4096,4096] -> values [4096] (same type) and indices [4096]:
        // reduce_warp_f32, a warp per row, grid(nOut·32).
        char name[32];
        snprintf(name, sizeof name, "max-%s", dtName(ds));
        Family f{name, (size_t)N * 2, {out16, idxBuf}, {(size_t)ROWS * 2, (size_t)ROWS * 8}, 2, ds, {}};
        std::vector<unsigned short> h = fill16(in16, ds, 3);
        Reduction r = blank();
        r.nOut = ROWS, r.nRed = COLS;
        r.kshape[0] = ROWS, r.kstride[0][0] = 1, r.kstride[1][0] = COLS;
        r.rshape[0] = COLS, r.rstride[0] = 1;
        r.dst = (unsigned long long)out16, r.src = (unsigned long long)in16, r.dtd = ds, r.dts = ds;
        r.piece = COLS, r.pieces = 1;
        int mode = RED_MAX;
        unsigned g1 = gridFor((long long)ROWS * 32);
        run(f, "cur reduce_warp", "src", false, [&] { reduce_warp_f32<<<g1, BLOCK>>>(r, mode, idx, part); });
        {
            long long bad = 0;
            const unsigned short *v = (const unsigned short *)f.ref[0].data();
            const long long *ix = (const long long *)f.ref[1].data();
            for (int row = 0; row < ROWS; row++) {
                long long at = 0; // the first NaN, else the first of the largest
                for (long long c = 1; c < COLS; c++) {
                    float x = host16(ds, h[row * (long long)COLS + c]), m = host16(ds, h[row * (long long)COLS + at]);
                    if (m != m) break;
                    if (x > m || x != x) at = c;
                }
                float want = host16(ds, h[row * (long long)COLS + at]), got = host16(ds, v[row]);
                if (ix[row] != at || !(want == got || (want != want && got != got))) bad++;
            }
            hostCheck(name, "first NaN / first maximum and its index", bad, 0);
        }
        if (CUfunction g = genFn("reduce", "reduce_warp_f32")) {
            void *a[] = {&r, &mode, &idx, &part};
            run(f, "cur-gen (committed fatbin)", "gen", false, [&] { genLaunch(g, g1, a); });
        }
        if (ds == DT_F16) {
            run(f, "int positions U=4", "rowmax<2,4,0>", false, [&] { rowmax<DT_F16, 4, false><<<g1, BLOCK>>>(r, idx); });
            run(f, "packed max skip U=4", "rowmax<2,4,1>", false, [&] { rowmax<DT_F16, 4, true><<<g1, BLOCK>>>(r, idx); });
            run(f, "packed max skip U=8", "rowmax<2,8,1>", false, [&] { rowmax<DT_F16, 8, true><<<g1, BLOCK>>>(r, idx); });
        } else {
            run(f, "int positions U=4", "rowmax<3,4,0>", false, [&] { rowmax<DT_BF16, 4, false><<<g1, BLOCK>>>(r, idx); });
            run(f, "packed max skip U=4", "rowmax<3,4,1>", false, [&] { rowmax<DT_BF16, 4, true><<<g1, BLOCK>>>(r, idx); });
            run(f, "packed max skip U=8", "rowmax<3,8,1>", false, [&] { rowmax<DT_BF16, 8, true><<<g1, BLOCK>>>(r, idx); });
        }
    }
    printf("# done\n");
    return 0;
}
