// gkpdl.cu: what programmatic dependent launch (PDL, sm_90 on) would save between
// kernels/cuda's launches (issue 18). A kernel of a stream starts once the one before it
// has ended and its writes are visible: between two column sums that gap was 3.1 µs on
// an H200, against 35 µs of reading (docs/benchmarks.md, "Column sums' timeline and the
// 16-bit cross-entropy on an H200"), and a training step launches hundreds of kernels.
// With PDL (cudaLaunchKernelEx with cudaLaunchAttributeProgrammaticStreamSerialization)
// a kernel may be scheduled while the one before it still runs; it must then wait
// (griddepcontrol.wait: the kernels before it have ended, their writes visible) before
// it reads or writes what they touch, and a kernel may let its dependents be scheduled
// before it ends (griddepcontrol.launch_dependents; otherwise when it ends).
//
// The probe times chains of dependent launches on one stream, each reading what the
// previous one wrote, µs a launch (cudaEvents around 200 launches after 20 untimed, the
// median of 5 such runs):
//   tiny:   one block of BLOCK threads adds 1 to BLOCK floats in place (a small op, as a
//           tiny model's step or a replayed CUDA graph runs hundreds: the gap is all)
//   add-N:  y = x + 1 over N floats (1M, 16M, 64M), the two buffers swapped at every
//           launch, on a grid of the card's SMs times the blocks an SM holds, grid-stride
// each in three modes: plain (<<<>>>: what kernels/cuda does now), pdl-end (PDL; each
// kernel waits at its start, its dependents scheduled when it ends) and pdl-early (PDL;
// each kernel also lets its dependents be scheduled as soon as it starts: they wait in
// the SM slots its own blocks leave). Every chain's result is checked: each element grew
// by the number of launches (exact in float at these counts). A mode whose µs a launch
// is below plain's by about the gap says PDL hides it; kernels/cuda would then launch
// through cuLaunchKernelEx and start each kernel with the wait (sm_90 code in its
// fatbins, which hold compute_80 PTX today).
//
// Run on the GPU machine from the repository root (under a minute):
//   /usr/local/cuda/bin/nvcc -O3 -std=c++17 -gencode arch=compute_90,code=sm_90 \
//     -o /tmp/gkpdl scripts/gpu/mb/gkpdl.cu && /tmp/gkpdl
#include "../../../kernels/cuda/src/common.cuh"

#include "harness.cuh"

enum { PLAIN, PDL_END, PDL_EARLY };
static const char *modeName[] = {"plain", "pdl-end", "pdl-early"};

template <int MODE> __device__ __forceinline__ void enter() {
    if (MODE != PLAIN) asm volatile("griddepcontrol.wait;" ::: "memory");
    if (MODE == PDL_EARLY) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

template <int MODE> __global__ void add_one(float *y, const float *x, long long n) {
    enter<MODE>();
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) y[i] = x[i] + 1.0f;
}

// launch runs k on grid × BLOCK threads on stream s, through cudaLaunchKernelEx with the
// PDL attribute unless mode is PLAIN.
template <typename... Args> static void launch(int mode, void (*k)(Args...), int grid, cudaStream_t s, Args... args) {
    if (mode == PLAIN) {
        k<<<grid, BLOCK, 0, s>>>(args...);
        CK(cudaGetLastError());
        return;
    }
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(grid), cfg.blockDim = dim3(BLOCK), cfg.stream = s, cfg.attrs = at, cfg.numAttrs = 1;
    CK(cudaLaunchKernelEx(&cfg, k, args...));
}

// chain times LAUNCHES dependent launches of add_one<MODE> over n floats (in place when
// inPlace) and checks the result; it returns µs a launch.
template <int MODE> static float chain(long long n, int grid, bool inPlace, float *a, float *b, cudaStream_t s) {
    const int WARM = 20, LAUNCHES = 200, RUNS = 5;
    static cudaEvent_t ev0, ev1;
    if (!ev0) {
        CK(cudaEventCreate(&ev0));
        CK(cudaEventCreate(&ev1));
    }
    CK(cudaMemsetAsync(a, 0, n * sizeof(float), s));
    int done = 0;
    auto step = [&] {
        float *x = a, *y = a; // in place; else a to b, then b to a, ...
        if (!inPlace) x = done % 2 ? b : a, y = done % 2 ? a : b;
        launch(MODE, add_one<MODE>, grid, s, y, (const float *)x, n);
        done++;
    };
    for (int i = 0; i < WARM; i++) step();
    std::vector<float> t;
    for (int r = 0; r < RUNS; r++) {
        CK(cudaEventRecord(ev0, s));
        for (int i = 0; i < LAUNCHES; i++) step();
        CK(cudaEventRecord(ev1, s));
        CK(cudaEventSynchronize(ev1));
        float ms;
        CK(cudaEventElapsedTime(&ms, ev0, ev1));
        t.push_back(ms * 1000 / LAUNCHES);
    }
    std::vector<float> h(n);
    CK(cudaMemcpy(h.data(), inPlace || done % 2 == 0 ? a : b, n * sizeof(float), cudaMemcpyDeviceToHost)); // the last y
    for (long long i = 0; i < n; i++)
        if (h[i] != (float)done) {
            printf("%s: element %lld is %g after %d launches: WRONG\n", modeName[MODE], i, h[i], done);
            exit(1);
        }
    std::sort(t.begin(), t.end());
    return t[RUNS / 2];
}

template <int MODE> static int gridFor(int sms) {
    int b = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, add_one<MODE>, BLOCK, 0));
    return sms * b;
}

int main() {
    cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, 0));
    printf("%s, %d SMs, compute %d.%d\n", p.name, p.multiProcessorCount, p.major, p.minor);
    if (p.major < 9) {
        printf("PDL needs compute capability 9.0 or later\n");
        return 1;
    }
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    const long long MAX = 64ll << 20;
    float *a, *b;
    CK(cudaMalloc(&a, MAX * sizeof(float)));
    CK(cudaMalloc(&b, MAX * sizeof(float)));
    printf("%-10s %-10s %10s %10s %12s\n", "chain", "mode", "grid", "µs/launch", "GB/s");
    struct Case {
        const char *name;
        long long n;
        bool tiny;
    } cases[] = {{"tiny", BLOCK, true}, {"add-1M", 1ll << 20, false}, {"add-16M", 16ll << 20, false}, {"add-64M", 64ll << 20, false}};
    for (const Case &c : cases) {
        float us[3];
        int grids[3] = {c.tiny ? 1 : gridFor<PLAIN>(p.multiProcessorCount), c.tiny ? 1 : gridFor<PDL_END>(p.multiProcessorCount),
                        c.tiny ? 1 : gridFor<PDL_EARLY>(p.multiProcessorCount)};
        us[PLAIN] = chain<PLAIN>(c.n, grids[PLAIN], c.tiny, a, b, s);
        us[PDL_END] = chain<PDL_END>(c.n, grids[PDL_END], c.tiny, a, b, s);
        us[PDL_EARLY] = chain<PDL_EARLY>(c.n, grids[PDL_EARLY], c.tiny, a, b, s);
        for (int m = 0; m < 3; m++) {
            double gbs = c.tiny ? 0 : 8.0 * c.n / (us[m] * 1e3);
            printf("%-10s %-10s %10d %10.2f %12.1f\n", c.name, modeName[m], grids[m], us[m], gbs);
        }
    }
    return 0;
}
