// gkcols.cu: where the fixed cost of kernels/cuda's column sums goes (issue 18). On an
// H100 (2026-12-07, docs/benchmarks.md, "Column sums: 396 blocks rejected"), sum_cols
// reads F16 [65536, 1024] at 87.6% of a copy's rate through the library but at 99.7%
// at four times the rows: about 6.7 µs a launch do not grow with the rows (a copy's own
// fixed cost is about 2 µs). Two suspects: the end of the single wave (264 blocks, each
// a fixed slab of rows, end when the slowest does) and the last blocks' combination of
// the partials. This probe runs the library's own sum_cols_k (kernels/cuda/src/reduce.cu,
// launched as reduce.go's sumCols launches it) inside a kernel that stamps each block's
// start and end with %globaltimer and its SM, and prints the timeline; and beside it a
// candidate, cols2_k, whose combination has two levels (below), on more blocks.
//
// Run on the GPU machine from the repository root (under a minute):
//   /usr/local/cuda/bin/nvcc -O3 -fmad=false -std=c++17 -gencode arch=compute_80,code=sm_90 \
//     -o /tmp/gkcols scripts/gpu/mb/gkcols.cu -lcuda && /tmp/gkcols
// (compute_80 PTX, as kernels/cuda/gen's fatbins are built.)
//
// Each line: "dtype variant blocks (groups x pieces) rel mode µs GB/s %copy | timeline",
// where variant is library (sum_cols_k as kernels/cuda runs it, on the grid reduce.go
// makes for 264 blocks wanted, and 132 and 528) or two-level (cols2_k, 264, 528 and 1056
// wanted; pieces are capped as the library caps them, by its 4 MiB scratch); rel is the
// largest |output - float64 host sum| over the column's sum of magnitudes (OVER-TOLERANCE
// past the conformance suite's 1e-6); mode is cold (one launch after a 256 MB memset that
// leaves nothing in the L2, median of 21) or warm (20 launches back to back, as
// sublet-bench's ops and a training step run them: µs per launch; the timeline is the last
// launch's). The timeline, in µs from the first block's start: when the last block
// started; when the blocks ended at the 1st, 10th, 50th, 90th and 99th percentile; the
// last end of a block that did not combine; the end of the combination (the latest end);
// and the SMs whose blocks ended last. Reading it: if the 99th percentile sits well before
// the last non-combining end, a few slow blocks hold the launch (the wave's end); the gap
// from there to the latest end is the combination. %globaltimer's step on the card is
// printed first (its updates may be coarser than a nanosecond).
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

// cols2_k is a candidate: sum_cols_k's reading and block tree (copied from
// kernels/cuda/src/reduce.cu as of this file's commit, not shared: moving them into a
// function of their own changed the library's SASS, one kernel from 68 registers to 60,
// which only a card can judge) with a two-level combination.
// Pieces go in chunks of CH consecutive ones per column group; the last block of a
// chunk to finish adds the chunk's partials in piece order into a level-1 partial
// (lvl1[j * nOut + col]), and the last chunk of a group to finish adds the group's
// level-1 partials in chunk order and writes the outputs. The combination is spread
// over the blocks as they finish instead of left to one block a group at the end, so
// a launch can have more, shorter pieces (a finer end of the wave) for the same
// combination at its end. t1 holds groups * chunks tickets, t2 groups; each last block
// sets its ticket back to zero. The order (and so the bits) depends on the shapes alone,
// but differs from sum_cols_k's: the harness compares with the host's sums.
template <int DT, bool RUNS, int CH>
__device__ __forceinline__ void cols2_k(const Reduction &r, int mode, double *part, double *lvl1, unsigned int *t1, unsigned int *t2) {

    constexpr int U = CW_U;
    using V = vtype<DT>;
    constexpr int N = V::n, CB = CW_X * N;
    __shared__ double tree[CW_Y][N][CW_X]; // [ty][e][tx]: a warp's 32 doubles adjacent, no bank conflicts
    bool sq = mode == RED_SUMSQ;
    int tx = threadIdx.x % CW_X, ty = threadIdx.x / CW_X;
    long long groups = (r.nOut + CB - 1) / CB;
    long long g = blockIdx.x % groups, c = blockIdx.x / groups;
    long long word = g * CW_X + tx;
    long long lo = c * r.piece, hi = min(lo + r.piece, r.nRed);
    double d[N];
#pragma unroll
    for (int e = 0; e < N; e++) d[e] = 0;
    // add folds the first m of x's U rows into d.
    auto add = [&](const uint4 *x, int m) {
        if constexpr (RUNS) {
#pragma unroll
            for (int e = 0; e < N; e++) d[e] += (double)run_of<float, DT, U>(x, e, m, sq);
        } else {
#pragma unroll
            for (int u = 0; u < U; u++) {
#pragma unroll
                for (int e = 0; e < N; e++) {
                    float v = V::template get<float>(x[u], e);
                    if (u < m) d[e] += (double)(sq ? v * v : v);
                }
            }
        }
    };
    if (word * N < r.nOut) {
        long long step = CW_Y * (r.rstride[0] / N); // words from one of the thread's rows to its next
        long long row = lo + ty;
        const uint4 *p = (const uint4 *)r.src + row * (r.rstride[0] / N) + word;
        for (; row + (U - 1) * CW_Y < hi; row += U * CW_Y, p += U * step) {
            uint4 x[U];
#pragma unroll
            for (int u = 0; u < U; u++) x[u] = p[u * step];
            add(x, U);
        }
        if (row < hi) {
            int m = (int)((hi - row + CW_Y - 1) / CW_Y);
            uint4 x[U];
#pragma unroll
            for (int u = 0; u < U; u++) x[u] = u < m ? p[u * step] : make_uint4(0, 0, 0, 0);
            add(x, m);
        }
    }
#pragma unroll
    for (int e = 0; e < N; e++) tree[ty][e][tx] = d[e];
    __syncthreads();
    for (int h = CW_Y / 2; h > 0; h >>= 1) {
        if (ty < h) {
#pragma unroll
            for (int e = 0; e < N; e++) tree[ty][e][tx] += tree[ty + h][e][tx];
        }
        __syncthreads();
    }
    int t = threadIdx.x; // the block's column t, from here on
    long long col = g * CB + t;
    double sum = t < CB ? tree[0][t % N][t / N] : 0;
    if (r.pieces == 1) {
        if (t < CB && col < r.nOut) {
            Acc a = acc_zero();
            a.sum = sum;
            finish_out<float>(r, mode, nullptr, col, a);
        }
        return;
    }
    if (t < CB && col < r.nOut) part[c * r.nOut + col] = sum;
    long long chunks = (r.pieces + CH - 1) / CH, j = c / CH, c0 = j * CH, c1 = min(c0 + CH, r.pieces);
    if (!last_of(t1 + g * chunks + j, (unsigned int)(c1 - c0))) return;
    if (t < CB && col < r.nOut) {
        double v[CH], s = 0;
#pragma unroll
        for (int i = 0; i < CH; i++) v[i] = c0 + i < c1 ? __ldcg(part + (c0 + i) * r.nOut + col) : 0;
#pragma unroll
        for (int i = 0; i < CH; i++) s += v[i];
        lvl1[j * r.nOut + col] = s;
    }
    if (!last_of(t2 + g, (unsigned int)chunks)) return;
    if (t < CB && col < r.nOut) {
        Acc a = acc_zero();
        long long i = 0;
        for (; i + 8 <= chunks; i += 8) {
            double v[8];
#pragma unroll
            for (int k = 0; k < 8; k++) v[k] = __ldcg(lvl1 + (i + k) * r.nOut + col);
#pragma unroll
            for (int k = 0; k < 8; k++) a.sum += v[k];
        }
        for (; i < chunks; i++) a.sum += __ldcg(lvl1 + i * r.nOut + col);
        finish_out<float>(r, mode, nullptr, col, a);
    }
}

template <int DT, bool RUNS>
__global__ void __launch_bounds__(BLOCK) timed_cols2(Reduction r, int mode, double *part, double *lvl1, unsigned int *t1, unsigned int *t2, Stamp *st) {
    unsigned long long t0 = globalNs();
    cols2_k<DT, RUNS, 8>(r, mode, part, lvl1, t1, t2);
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

// hostSums returns each column's float64 sum and sum of magnitudes of the R x C
// elements of type dt in the words h.
static void hostSums(const std::vector<unsigned int> &h, int dt, long long R, long long C, std::vector<double> &want, std::vector<double> &mag) {
    want.assign(C, 0), mag.assign(C, 0);
    const unsigned char *b = (const unsigned char *)h.data();
    for (long long i = 0; i < R * C; i++) {
        double v;
        if (dt == DT_F32) {
            float f;
            memcpy(&f, b + 4 * i, 4);
            v = f;
        } else {
            unsigned short u;
            memcpy(&u, b + 2 * i, 2);
            if (dt == DT_F16) {
                __half_raw hr;
                hr.x = u;
                v = __half2float(__half(hr));
            } else {
                unsigned int w = (unsigned int)u << 16;
                float f;
                memcpy(&f, &w, 4);
                v = f;
            }
        }
        want[i % C] += v, mag[i % C] += std::fabs(v);
    }
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
    std::vector<unsigned int> h(N);
    for (auto &w : h) w = 0x3c003c00u ^ (next32() & 0x03ff03ffu); // F16 pairs in [1, 2); F32 in [0.0078, 0.0156)
    CK(cudaMemcpy(in, h.data(), N * 4, cudaMemcpyHostToDevice));
    // kernels/cuda's scratch (4 MiB of partials) and its tickets after it; the
    // candidate's level-1 partials and tickets.
    void *scratch;
    CK(cudaMalloc(&scratch, (4 << 20) + 256));
    CK(cudaMemset(scratch, 0, (4 << 20) + 256));
    double *part = (double *)scratch, *lvl1;
    unsigned int *tickets = (unsigned int *)((char *)scratch + (4 << 20)), *t1, *t2;
    CK(cudaMalloc(&lvl1, 4 << 20));
    CK(cudaMalloc(&t1, 1 << 16));
    CK(cudaMalloc(&t2, 1 << 12));
    CK(cudaMemset(t1, 0, 1 << 16));
    CK(cudaMemset(t2, 0, 1 << 12));
    Stamp *stD;
    CK(cudaMalloc(&stD, 4096 * sizeof(Stamp)));
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    const int warm = 20;

    for (int dt : {DT_F32, DT_F16, DT_BF16}) {
        const long long es = dt == DT_F32 ? 4 : 2, bytes = N * es;
        std::vector<double> want, mag;
        hostSums(h, dt, R, C, want, mag);
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

        // variant launches the library's kernel (cand false) or the candidate on the
        // grid reduce.go's sumCols makes for wanted blocks (colWordPieces), and prints
        // its times, its largest error against the host's sums and its timeline.
        auto variant = [&](const char *name, long long wanted, bool cand) {
            Reduction r;
            memset(&r, 0, sizeof r);
            r.krank = r.rrank = 1;
            r.nOut = C, r.nRed = R;
            r.kshape[0] = C, r.kstride[0][0] = 1, r.kstride[1][0] = 1;
            r.rshape[0] = R, r.rstride[0] = C;
            r.dst = (unsigned long long)out, r.src = (unsigned long long)in, r.dtd = DT_F32, r.dts = dt;
            const long long V = 16 / es, groups = (C + CW_X * V - 1) / (CW_X * V);
            const long long cuts = std::max(1LL, std::min((wanted + groups - 1) / groups, R / (2 * CW_Y * CW_U)));
            const long long maxPartials = (4 << 20) / (long long)sizeof(Acc), per = (R + cuts - 1) / cuts;
            r.pieces = std::max(1LL, std::min((R + per - 1) / per, maxPartials / C));
            r.piece = std::max(1LL, (R + r.pieces - 1) / r.pieces);
            int classes = (int)std::min(groups, 64LL), mode = RED_SUM;
            const unsigned grid = (unsigned)(groups * r.pieces);
            double *p = r.pieces > 1 ? part : nullptr;
            const void *k = cand ? (dt == DT_F32 ? (const void *)timed_cols2<DT_F32, false>
                                    : dt == DT_F16 ? (const void *)timed_cols2<DT_F16, true>
                                                   : (const void *)timed_cols2<DT_BF16, true>)
                                 : kernelFor(dt);
            void *libArgs[] = {&r, &mode, &p, &tickets, &classes, &stD};
            void *candArgs[] = {&r, &mode, &p, &lvl1, &t1, &t2, &stD};
            auto launch = [&] { CK(cudaLaunchKernel(k, dim3(grid), dim3(BLOCK), cand ? candArgs : libArgs, 0, 0)); };
            std::vector<Stamp> s(grid);
            std::vector<float> got(C);
            CK(cudaMemset(out, 0xff, C * 4));
            launch();
            CK(cudaMemcpy(got.data(), out, C * 4, cudaMemcpyDeviceToHost));
            double worst = 0;
            for (long long i = 0; i < C; i++) worst = std::max(worst, std::fabs((double)got[i] - want[i]) / mag[i]);

            float cold = timeUs(launch);
            printf("%s %s %u blocks (%lld groups x %lld pieces) rel %.1e%s cold %.2f µs %.1f GB/s %.1f%% ", dtName(dt), name, grid, groups,
                   r.pieces, worst, worst > 1e-6 ? " OVER-TOLERANCE" : "", cold, bytes / cold / 1e3, 100 * copyCold / cold);
            CK(cudaMemcpy(s.data(), stD, grid * sizeof(Stamp), cudaMemcpyDeviceToHost));
            timeline(s, classes);

            CK(cudaEventRecord(a));
            for (int i = 0; i < warm; i++) launch();
            CK(cudaEventRecord(b));
            CK(cudaEventSynchronize(b));
            CK(cudaEventElapsedTime(&ms, a, b));
            float w = ms * 1000 / warm;
            printf("%s %s %u blocks warm %.2f µs %.1f GB/s %.1f%% ", dtName(dt), name, grid, w, bytes / w / 1e3, 100 * copyWarm / w);
            CK(cudaMemcpy(s.data(), stD, grid * sizeof(Stamp), cudaMemcpyDeviceToHost));
            timeline(s, classes);
        };
        for (long long wanted : {264LL, 132LL, 528LL}) variant("library", wanted, false);
        for (long long wanted : {264LL, 528LL, 1056LL}) variant("two-level", wanted, true);
    }
    CK(cudaGetLastError());
    printf("# done\n");
    return 0;
}
