// harness.cuh: what the microbenchmarks of scripts/gpu/mb share: CK (a runtime call
// that fails ends the program, naming it), next32 (their inputs' xorshift generator) and
// fatbinFn (a kernel of a committed kernels/cuda/gen fatbin: nvcc 11.8's SASS, what the
// library embeds, timed beside the same source built by the harness's nvcc). Paths are
// relative to the repository root, where the harnesses run.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
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
