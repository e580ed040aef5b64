// harness.cuh: what the microbenchmarks of scripts/gpu/mb share: CK (a runtime call
// that fails ends the program, naming it), next32 (their inputs' xorshift generator),
// timeUs (a launch's time with the L2 flushed) and fatbinFn (a kernel of a committed
// kernels/cuda/gen fatbin: nvcc 11.8's SASS, what the library embeds, timed beside the
// same source built by the harness's nvcc), resources (a kernel's registers and blocks
// an SM), and toBits / host16 (a float rounded to F16 or BF16 bits, and back). Paths are
// relative to the repository root, where the harnesses run. A harness includes it after
// the kernels/cuda sources it measures: it uses their common.cuh's BLOCK and DT_F16.
#pragma once

#include <cuda.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <algorithm>
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

static unsigned long long rng = 0x9e3779b97f4a7c15ull;
static unsigned int next32() {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (unsigned int)(rng >> 16);
}

// fatbinFn is kernel name of the fatbin at path (loaded once a path into the current
// context), or nullptr when the file or the kernel is missing or does not load.
static CUfunction fatbinFn(const char *path, const char *name) {
    static std::map<std::string, CUmodule> mods;
    if (!mods.count(path)) {
        CUmodule mod = nullptr;
        if (FILE *fp = fopen(path, "rb")) {
            std::vector<char> b;
            char tmp[1 << 16];
            size_t n;
            while ((n = fread(tmp, 1, sizeof tmp, fp)) > 0) b.insert(b.end(), tmp, tmp + n);
            fclose(fp);
            if (cuModuleLoadData(&mod, b.data()) != CUDA_SUCCESS) mod = nullptr;
        }
        mods[path] = mod;
    }
    CUfunction f;
    if (!mods[path] || cuModuleGetFunction(&f, mods[path], name) != CUDA_SUCCESS) return nullptr;
    return f;
}

// timeUs is the median, in µs, of 21 runs of launch timed by cudaEvents, each after a
// 256 MB memset that leaves none of its inputs in the L2 (50 MB on an H100), the 3
// before them untimed warm-ups.
static float timeUs(const std::function<void()> &launch) {
    static const size_t FLUSH = 256u << 20;
    static void *flush;
    static cudaEvent_t ev0, ev1;
    if (!flush) {
        CK(cudaMalloc(&flush, FLUSH));
        CK(cudaEventCreate(&ev0));
        CK(cudaEventCreate(&ev1));
    }
    std::vector<float> t;
    for (int i = 0; i < 24; i++) {
        CK(cudaMemsetAsync(flush, i, FLUSH));
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

// resources says a kernel's registers and how many of its blocks of BLOCK threads an SM
// holds ("" for no kernel).
static std::string resources(const void *fn) {
    if (!fn) return "";
    cudaFuncAttributes a;
    int b = 0;
    CK(cudaFuncGetAttributes(&a, fn));
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, fn, BLOCK, 0));
    char s[64];
    snprintf(s, sizeof s, "regs=%d,blocks/SM=%d", a.numRegs, b);
    return s;
}

// toBits is f rounded to nearest even as F16 (dt DT_F16) or BF16 (else) bits; host16
// is the float value of such bits.
static unsigned short toBits(int dt, float f) {
    if (dt == DT_F16) {
        __half h = __float2half_rn(f);
        unsigned short u;
        memcpy(&u, &h, 2);
        return u;
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
