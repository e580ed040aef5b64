// gkcols.cu: where the fixed cost of kernels/cuda's column sums goes (issue 18). On an
// H100 (2026-12-07, docs/benchmarks.md, "Column sums: 396 blocks rejected"), sum_cols
// reads F16 [65536, 1024] at 87.6% of a copy's rate through the library but at 99.7%
// at four times the rows: about 6.7 µs a launch do not grow with the rows (a copy's own
// fixed cost is about 2 µs). Two suspects: the end of the single wave (264 blocks, each
// a fixed slab of rows, end when the slowest does) and the last blocks' combination of
// the partials. This probe runs the library's own sum_cols_k (kernels/cuda/src/reduce.cu,
// launched as reduce.go's sumCols launches it) inside a kernel that stamps each block's
// start and end with %globaltimer and its SM, and prints the timeline.
//
// Run on the GPU machine from the repository root (under a minute):
//   /usr/local/cuda/bin/nvcc -O3 -fmad=false -std=c++17 -gencode arch=compute_80,code=sm_90 \
//     -o /tmp/gkcols scripts/gpu/mb/gkcols.cu -lcuda && /tmp/gkcols
// (compute_80 PTX, as kernels/cuda/gen's fatbins are built.)
//
// Each line: "dtype shape blocks mode µs GB/s %copy | timeline", where mode is cold (one
// launch after a 256 MB memset that leaves nothing in the L2, median of 21) or warm (20
// launches back to back, as sublet-bench's ops and a training step run them: µs per
// launch; the timeline is the last launch's). The timeline, in µs from the first block's
// start: when the last block started; when the blocks ended at the 1st, 10th, 50th, 90th
// and 99th percentile; the last end of a block that did not combine; the end of the
// combination (the latest end); and the SMs whose blocks ended last. Reading it: if the
// 99th percentile sits well before the last non-combining end, a few slow blocks hold
// the launch (the wave's end); the gap from there to the latest end is the combination.
// %globaltimer's step on the card is printed first (its updates may be coarser than a
// nanosecond).
#include "../../../kernels/cuda/src/reduce.cu"

#include <cuda.h>

#include "harness.cuh"

__device__ __forceinline__ unsigned long long globalNs() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__device__ __forceinline__ unsigned smId() {
    unsigned s;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
    return s;
}

// Stamp is one block's start and end (ns, %globaltimer) and the SM it ran on.
struct Stamp {
    unsigned long long t0, t1;
    unsigned sm, pad;
};

// timed_cols is the library's sum_cols_k between two stamps.
template <int DT, bool RUNS>
__global__ void __launch_bounds__(BLOCK) timed_cols(Reduction r, int mode, double *part, unsigned int *tickets, int classes, Stamp *st) {
    unsigned long long t0 = globalNs();
    sum_cols_k<DT, RUNS>(r, mode, part, tickets, classes);
    __syncthreads();
    if (threadIdx.x == 0) st[blockIdx.x] = Stamp{t0, globalNs(), smId(), 0};
}

// timer_step measures %globaltimer's smallest step seen by one thread.
__global__ void timer_step(unsigned long long *out) {
    unsigned long long best = ~0ull, prev = globalNs();
    for (int i = 0; i < 100000; i++) {
        unsigned long long t = globalNs();
        if (t != prev) best = min(best, t - prev), prev = t;
    }
    *out = best;
}

static const char *dtName(int dt) { return dt == DT_F32 ? "f32" : dt == DT_F16 ? "f16" : "bf16"; }

static const void *kernelFor(int dt) {
    return dt == DT_F32 ? (const void *)timed_cols<DT_F32, false>
           : dt == DT_F16 ? (const void *)timed_cols<DT_F16, true>
                          : (const void *)timed_cols<DT_BF16, true>;
}

// timeline prints the stamps of n blocks as the header above describes; classes blocks
// combine, so the n - classes earliest ends are the blocks that did not.
static void timeline(const std::vector<Stamp> &s, int classes) {
    unsigned long long base = ~0ull;
    for (auto &x : s) base = std::min(base, x.t0);
    std::vector<double> start, end;
    for (auto &x : s) start.push_back((x.t0 - base) / 1e3), end.push_back((x.t1 - base) / 1e3);
    std::vector<size_t> byEnd(s.size());
    for (size_t i = 0; i < s.size(); i++) byEnd[i] = i;
    std::sort(byEnd.begin(), byEnd.end(), [&](size_t a, size_t b) { return end[a] < end[b]; });
    std::vector<double> e(end);
    std::sort(e.begin(), e.end());
    auto pct = [&](double p) { return e[std::min(e.size() - 1, (size_t)(p / 100 * e.size()))]; };
    size_t n = e.size(), k = std::min((size_t)classes, n - 1);
    printf("| last start %.2f; ends p1 %.2f p10 %.2f p50 %.2f p90 %.2f p99 %.2f; last non-combining %.2f; combined %.2f; last SMs",
           *std::max_element(start.begin(), start.end()), pct(1), pct(10), pct(50), pct(90), pct(99), e[n - 1 - k], e[n - 1]);
    for (size_t i = n - std::min(n, (size_t)8); i < n; i++) printf(" %u", s[byEnd[i]].sm);
    printf("\n");
    fflush(stdout);
}

int main() {
    CK(cudaFree(0));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    const int sms = prop.multiProcessorCount;
    unsigned long long *stepD, step;
    CK(cudaMalloc(&stepD, 8));
    timer_step<<<1, 1>>>(stepD);
    CK(cudaMemcpy(&step, stepD, 8, cudaMemcpyDeviceToHost));
    printf("# gkcols: %s, %d SMs; %%globaltimer step %llu ns\n", prop.name, sms, step);

    const long long R = 65536, C = 1024, N = R * C;
    void *in, *copyDst;
    float *out;
    CK(cudaMalloc(&in, N * 4));
    CK(cudaMalloc(&copyDst, N * 4));
    CK(cudaMalloc(&out, C * 4));
    {
        std::vector<unsigned int> h(N);
        for (auto &w : h) w = 0x3c003c00u ^ (next32() & 0x03ff03ffu); // F16 pairs in [1, 2); F32 in [0.0078, 0.0156)
        CK(cudaMemcpy(in, h.data(), N * 4, cudaMemcpyHostToDevice));
    }
    // kernels/cuda's scratch (4 MiB of partials) and its tickets after it.
    void *scratch;
    CK(cudaMalloc(&scratch, (4 << 20) + 256));
    CK(cudaMemset(scratch, 0, (4 << 20) + 256));
    double *part = (double *)scratch;
    unsigned int *tickets = (unsigned int *)((char *)scratch + (4 << 20));
    Stamp *stD;
    CK(cudaMalloc(&stD, 4096 * sizeof(Stamp)));
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    const int warm = 20;

    for (int dt : {DT_F32, DT_F16, DT_BF16}) {
        const long long es = dt == DT_F32 ? 4 : 2, bytes = N * es;
        // The copy of the same bytes (half read, half written), timed the same two ways.
        float copyCold = timeUs([&] { CK(cudaMemcpyAsync(copyDst, in, bytes / 2, cudaMemcpyDeviceToDevice)); });
        CK(cudaEventRecord(a));
        for (int i = 0; i < warm; i++) CK(cudaMemcpyAsync(copyDst, in, bytes / 2, cudaMemcpyDeviceToDevice));
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        float ms;
        CK(cudaEventElapsedTime(&ms, a, b));
        float copyWarm = ms * 1000 / warm;
        printf("%s copy %lldMB: cold %.2f µs %.1f GB/s, warm %.2f µs %.1f GB/s\n", dtName(dt), bytes >> 20, copyCold,
               bytes / copyCold / 1e3, copyWarm, bytes / copyWarm / 1e3);

        // reduce.go's sumCols: groups of CW_X words, colWordPieces for blocks wanted.
        for (long long wanted : {264LL, 132LL, 528LL}) {
            Reduction r;
            memset(&r, 0, sizeof r);
            r.krank = r.rrank = 1;
            r.nOut = C, r.nRed = R;
            r.kshape[0] = C, r.kstride[0][0] = 1, r.kstride[1][0] = 1;
            r.rshape[0] = R, r.rstride[0] = C;
            r.dst = (unsigned long long)out, r.src = (unsigned long long)in, r.dtd = DT_F32, r.dts = dt;
            const long long V = 16 / es, groups = (C + CW_X * V - 1) / (CW_X * V);
            const long long want = std::max(1LL, std::min((wanted + groups - 1) / groups, R / (2 * CW_Y * CW_U)));
            const long long maxPartials = (4 << 20) / (long long)sizeof(Acc), per = (R + want - 1) / want;
            r.pieces = std::max(1LL, std::min((R + per - 1) / per, maxPartials / C));
            r.piece = std::max(1LL, (R + r.pieces - 1) / r.pieces);
            const int classes = (int)std::min(groups, 64LL);
            const unsigned grid = (unsigned)(groups * r.pieces);
            const void *k = kernelFor(dt);
            int mode = RED_SUM;
            double *p = r.pieces > 1 ? part : nullptr;
            void *args[] = {&r, &mode, &p, &tickets, (void *)&classes, &stD};
            auto launch = [&] { CK(cudaLaunchKernel(k, dim3(grid), dim3(BLOCK), args, 0, 0)); };
            std::vector<Stamp> s(grid);

            float cold = timeUs(launch);
            printf("%s [%lld,%lld] %u blocks (%lld groups x %lld pieces) cold %.2f µs %.1f GB/s %.1f%% ", dtName(dt), R, C, grid, groups,
                   r.pieces, cold, bytes / cold / 1e3, 100 * copyCold / cold);
            CK(cudaMemcpy(s.data(), stD, grid * sizeof(Stamp), cudaMemcpyDeviceToHost));
            timeline(s, classes);

            CK(cudaEventRecord(a));
            for (int i = 0; i < warm; i++) launch();
            CK(cudaEventRecord(b));
            CK(cudaEventSynchronize(b));
            CK(cudaEventElapsedTime(&ms, a, b));
            float w = ms * 1000 / warm;
            printf("%s [%lld,%lld] %u blocks warm %.2f µs %.1f GB/s %.1f%% ", dtName(dt), R, C, grid, w, bytes / w / 1e3, 100 * copyWarm / w);
            CK(cudaMemcpy(s.data(), stD, grid * sizeof(Stamp), cudaMemcpyDeviceToHost));
            timeline(s, classes);
        }
    }
    CK(cudaGetLastError());
    printf("# done\n");
    return 0;
}
