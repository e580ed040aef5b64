// gkln16.cu: candidates for the 16-bit layer norm forward (issue 18). tensor.LayerNorm
// of BF16 [65536, 1024] runs at 88-90 % of a copy's rate on the H100 (thirteenth
// session's ops_compare: 2623 GB/s against 2977; F16 90 %, F32 96 %), the one row
// family of the issue's "elementwise, cast and reduction kernels at >= 90 %" still
// short but for the column sums and the 16-bit cross-entropy. kernels/cuda runs it as
// layer_norm_regs_warp_{bf16,f16,f32}_v16 (layernorm.cu: a warp a row, the row in
// registers, rows/8 blocks of BLOCK threads), which sums the mean and the variance in
// double: two conversions to double an element (f32 -> f64 is one of the SM's 16
// conversions a clock, the pipe ex2 and the 16-bit unpacking share) and a double add
// each, where PyTorch's kernel accumulates in float (Welford). A 16-bit element is
// half the bytes of a float32 one for the same arithmetic, hence the hypothesis: the
// 16-bit forward is bound by that arithmetic, not by memory.
//
// Run on the GPU machine from the repository root (under a minute):
//   /usr/local/cuda/bin/nvcc -O3 -fmad=false -std=c++17 -gencode arch=compute_80,code=sm_90 -Xptxas -v \
//     -o /tmp/gkln16 scripts/gpu/mb/gkln16.cu -lcuda 2>/tmp/gkln16.ptxas && /tmp/gkln16
// (compute_80 PTX, as kernels/cuda/gen's fatbins are built; registers per kernel:
//   awk '/Compiling entry/{f=$0} /Used [0-9]+ registers/&&f{print f; print; f=""}' /tmp/gkln16.ptxas | c++filt)
// Measured on an H100 on 2026-12-07 (docs/benchmarks.md, "The 16-bit layer norm forward
// with float moments"): float-all 92.0 % of the copy warm against main's 90.7 % (BF16).
// Since branch lnfloat the library's kernels sum the moments of float rows in float in
// every form (F32 too, so that a 16-bit row keeps the bits of its float32 copy): main
// here is then float-all's arithmetic, float-lane and float-all its former candidates,
// and main-gen whatever the committed fatbin holds.
//
// Variants ("dtype variant cold-µs cold-%copy warm-µs warm-%copy check [registers, blocks/SM]"):
//   main        layer_norm_regs_warp_*_v16 from kernels/cuda/src, built by this nvcc
//   main-gen    the same kernel from the committed kernels/cuda/gen/layernorm.fatbin
//   float-lane  each lane sums its 32 elements (and then their squared deviations from
//               the mean, rounded to float) in float, the warp sums the lanes' sums in
//               double: one conversion to double a lane instead of one an element
//   float-all   float-lane with the warp's sums in float too
// Both candidates change the bits of mean, rstd and y (float sums of up to 32 terms, each
// rounded); check prints the largest relative error of mean, rstd and y against a
// float64 host computation of the same formulas (the conformance suite allows 1e-5 for
// F32 layer norm) and how many outputs differ from main's bits.
// Times: cold is one launch after an L2 flush, median of 21 (harness.cuh's timeUs); warm
// is 20 launches back to back, as sublet-bench's ops and a training step run them, µs a
// launch, median of 5 such runs. %copy compares with a cudaMemcpy of the row data
// (x read, y written: the same bytes), timed the same way.
#include "../../../kernels/cuda/src/layernorm.cu"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstring>

#include "harness.cuh"

// warp_sum_f is common.cuh's warp_sum in float: the same butterfly, every lane gets
// lane 0's sum.
__device__ __forceinline__ float warp_sum_f(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return __shfl_sync(0xffffffffu, v, 0);
}

// ln_cand is layer_norm_regs_k (G 32, V16, ROW_CHUNKS slots) with the moments summed in
// float a lane (FLOAT_GROUP: the warp's sums too), as the header says.
template <typename S, bool FLOAT_GROUP>
__global__ void __launch_bounds__(BLOCK) ln_cand(S *y, float *mean, float *rstd, const S *x, const S *w, const S *b, long long rows, long long n, float eps) {
    __shared__ double sm[BLOCK / 32];
    long long row = group_row<32>();
    int lane = group_lane<32>();
    if (row >= rows) return;
    typename layer_norm_row<S, 32, ROW_CHUNKS>::type v;
    v.template load<32, true>(x + row * n, n, lane);
    float sf = 0;
#pragma unroll
    for (int k = 0; k < 4 * ROW_CHUNKS; k++) sf += v.at(k); // past n: +0
    double mu = FLOAT_GROUP ? (double)(warp_sum_f(sf) / (float)n) : group_sum<32>((double)sf, sm) / (double)n;
    float m = (float)mu, ssf = 0;
#pragma unroll
    for (int k = 0; k < 4 * ROW_CHUNKS; k++) {
        if (!row_in<32, true>(k, n, lane)) break;
        float d = v.at(k) - m;
        ssf += d * d;
    }
    double ss = FLOAT_GROUP ? (double)warp_sum_f(ssf) : group_sum<32>((double)ssf, sm);
    float r = (float)(1.0 / sqrt(ss / (double)n + (double)eps));
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = r;
    }
    // The output as layer_norm_regs_k writes it (a copy of its loop: the library's
    // kernel stays byte for byte what the card ran).
#pragma unroll
    for (int i = 0; i < ROW_CHUNKS; i += 2) {
        float o[8], t[4];
#pragma unroll
        for (int h = 0; h < 8; h += 4) {
            long long j = chunk_at<32>(lane, i + h / 4);
#pragma unroll
            for (int k = 0; k < 4; k++) o[h + k] = (v.at(4 * i + h + k) - m) * r;
            if (w) {
                chunk_load<true>(t, w, j, n, 0);
#pragma unroll
                for (int k = 0; k < 4; k++) o[h + k] *= t[k];
            }
            if (b) {
                chunk_load<true>(t, b, j, n, 0);
#pragma unroll
                for (int k = 0; k < 4; k++) o[h + k] += t[k];
            }
        }
        pair_store<32, true>(y + row * n, o, i, n, lane);
    }
}

// ---- the harness ----------------------------------------------------------------------

// warmUs is the µs a launch of 20 back to back, median of 5 runs.
static float warmUs(const std::function<void()> &launch) {
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    std::vector<float> t;
    for (int r = 0; r < 6; r++) {
        CK(cudaEventRecord(a));
        for (int i = 0; i < 20; i++) launch();
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        CK(cudaGetLastError());
        float ms;
        CK(cudaEventElapsedTime(&ms, a, b));
        if (r > 0) t.push_back(ms * 1000 / 20);
    }
    std::sort(t.begin(), t.end());
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    return t[t.size() / 2];
}

int main() {
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("# gkln16: %s, %d SMs; columns: dtype variant cold-us cold-%%copy warm-us warm-%%copy check [registers]\n", prop.name,
           prop.multiProcessorCount);
    const long long rows = 65536, n = 1024, N = rows * n;
    const float eps = 1e-5f;
    std::vector<float> xs(N), ws(n), bs(n);
    for (long long i = 0; i + 1 < N; i += 2) { // N(0, 1) by Box-Muller, shifted so that the mean matters
        float u = ((next32() & 0xffffff) + 1) / 16777217.0f, v = (next32() & 0xffffff) / 16777216.0f;
        float r = sqrtf(-2 * logf(u));
        xs[i] = 0.5f + r * cosf(6.2831853f * v), xs[i + 1] = 0.5f + r * sinf(6.2831853f * v);
    }
    for (long long j = 0; j < n; j++) ws[j] = 1 + (next32() % 1000) / 4000.0f, bs[j] = (next32() % 1000) / 4000.0f - 0.125f;
    void *xd, *yd, *wd, *bd, *cp;
    float *md, *rd;
    CK(cudaMalloc(&xd, N * 4));
    CK(cudaMalloc(&yd, N * 4));
    CK(cudaMalloc(&cp, N * 4));
    CK(cudaMalloc(&wd, n * 4));
    CK(cudaMalloc(&bd, n * 4));
    CK(cudaMalloc(&md, rows * 4));
    CK(cudaMalloc(&rd, rows * 4));
    const unsigned grid = (unsigned)(rows / (BLOCK / 32)); // a warp a row
    for (int dt : {DT_BF16, DT_F16, DT_F32}) {
        size_t e = dt == DT_F32 ? 4 : 2;
        const char *name = dt == DT_F32 ? "f32" : dt == DT_F16 ? "f16" : "bf16";
        std::vector<float> x(N), w(n), b(n); // the values as stored
        if (dt == DT_F32) {
            x = xs, w = ws, b = bs;
            CK(cudaMemcpy(xd, x.data(), N * 4, cudaMemcpyHostToDevice));
            CK(cudaMemcpy(wd, w.data(), n * 4, cudaMemcpyHostToDevice));
            CK(cudaMemcpy(bd, b.data(), n * 4, cudaMemcpyHostToDevice));
        } else {
            std::vector<unsigned short> h(N), hw(n), hb(n);
            for (long long i = 0; i < N; i++) h[i] = toBits(dt, xs[i]), x[i] = host16(dt, h[i]);
            for (long long j = 0; j < n; j++) hw[j] = toBits(dt, ws[j]), w[j] = host16(dt, hw[j]), hb[j] = toBits(dt, bs[j]), b[j] = host16(dt, hb[j]);
            CK(cudaMemcpy(xd, h.data(), N * 2, cudaMemcpyHostToDevice));
            CK(cudaMemcpy(wd, hw.data(), n * 2, cudaMemcpyHostToDevice));
            CK(cudaMemcpy(bd, hb.data(), n * 2, cudaMemcpyHostToDevice));
        }
        // Host: mean, rstd and y in float64 from the stored values.
        std::vector<double> hm(rows), hr(rows);
        for (long long i = 0; i < rows; i++) {
            double s = 0, ss = 0;
            for (long long j = 0; j < n; j++) s += x[i * n + j];
            double mu = s / n;
            for (long long j = 0; j < n; j++) ss += (x[i * n + j] - mu) * (x[i * n + j] - mu);
            hm[i] = mu, hr[i] = 1 / std::sqrt(ss / n + (double)eps);
        }
        size_t bytes = N * e;
        float copyCold = timeUs([&] { CK(cudaMemcpyAsync(cp, xd, bytes, cudaMemcpyDeviceToDevice)); });
        float copyWarm = warmUs([&] { CK(cudaMemcpyAsync(cp, xd, bytes, cudaMemcpyDeviceToDevice)); });
        printf("%s copy %.2f 100.0 %.2f 100.0 - (cudaMemcpy of %zu MB)\n", name, copyCold, copyWarm, bytes >> 20);
        std::vector<unsigned char> refY;
        std::vector<float> refM, refR;
        auto run = [&](const char *variant, const std::string &res, const std::function<void()> &launch) {
            CK(cudaMemset(yd, 0xcd, bytes));
            launch();
            CK(cudaGetLastError());
            CK(cudaDeviceSynchronize());
            std::vector<unsigned char> gy(bytes);
            std::vector<float> gm(rows), gr(rows);
            CK(cudaMemcpy(gy.data(), yd, bytes, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(gm.data(), md, rows * 4, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(gr.data(), rd, rows * 4, cudaMemcpyDeviceToHost));
            double em = 0, er = 0, ey = 0;
            for (long long i = 0; i < rows; i++) {
                em = std::max(em, std::fabs(gm[i] - hm[i]) / std::max(1.0, std::fabs(hm[i])));
                er = std::max(er, std::fabs(gr[i] - hr[i]) / std::fabs(hr[i]));
            }
            for (long long i = 0; i < N; i += 97) { // every 97th element
                long long r = i / n, j = i % n;
                double want = (x[i] - hm[r]) * hr[r] * w[j] + b[j];
                float got;
                if (dt == DT_F32) memcpy(&got, gy.data() + i * 4, 4);
                else {
                    unsigned short h;
                    memcpy(&h, gy.data() + i * 2, 2);
                    got = host16(dt, h);
                }
                ey = std::max(ey, std::fabs(got - want) / std::max(1.0, std::fabs(want)));
            }
            long long differ = 0;
            if (refY.empty()) refY = gy, refM = gm, refR = gr;
            else {
                for (size_t i = 0; i < bytes; i += e) differ += memcmp(gy.data() + i, refY.data() + i, e) != 0;
                for (long long i = 0; i < rows; i++) differ += (gm[i] != refM[i]) + (gr[i] != refR[i]);
            }
            float cold = timeUs(launch), warm = warmUs(launch);
            printf("%s %s %.2f %.1f %.2f %.1f mean_rel=%.1e,rstd_rel=%.1e,y_rel=%.1e,differ=%lld %s\n", name, variant, cold, 100 * copyCold / cold, warm,
                   100 * copyWarm / warm, em, er, ey, differ, res.c_str());
            fflush(stdout);
        };
        auto launcher = [&](const void *k) {
            return [=, &xd, &yd, &wd, &bd, &md, &rd] {
                void *args[] = {(void *)&yd, (void *)&md, (void *)&rd, (void *)&xd, (void *)&wd, (void *)&bd, (void *)&rows, (void *)&n, (void *)&eps};
                CK(cudaLaunchKernel(k, dim3(grid), dim3(BLOCK), args, 0, 0));
            };
        };
        const void *mainK = dt == DT_BF16 ? (const void *)layer_norm_regs_warp_bf16_v16
                            : dt == DT_F16 ? (const void *)layer_norm_regs_warp_f16_v16
                                           : (const void *)layer_norm_regs_warp_f32_v16;
        run("main", resources(mainK), launcher(mainK));
        std::string gname = std::string("layer_norm_regs_warp_") + name + "_v16";
        if (CUfunction g = fatbinFn("kernels/cuda/gen/layernorm.fatbin", gname.c_str())) {
            run("main-gen", "", [=, &xd, &yd, &wd, &bd, &md, &rd] {
                void *args[] = {(void *)&yd, (void *)&md, (void *)&rd, (void *)&xd, (void *)&wd, (void *)&bd, (void *)&rows, (void *)&n, (void *)&eps};
                if (cuLaunchKernel(g, grid, 1, 1, BLOCK, 1, 1, 0, 0, args, nullptr) != CUDA_SUCCESS) {
                    fprintf(stderr, "cuLaunchKernel failed\n");
                    exit(1);
                }
            });
        } else {
            printf("# kernels/cuda/gen/layernorm.fatbin not loaded: no main-gen line\n");
        }
        const void *fl = dt == DT_BF16 ? (const void *)ln_cand<bf16_t, false> : dt == DT_F16 ? (const void *)ln_cand<f16_t, false> : (const void *)ln_cand<float, false>;
        const void *fa = dt == DT_BF16 ? (const void *)ln_cand<bf16_t, true> : dt == DT_F16 ? (const void *)ln_cand<f16_t, true> : (const void *)ln_cand<float, true>;
        run("float-lane", resources(fl), launcher(fl));
        run("float-all", resources(fa), launcher(fa));
    }
    printf("# done\n");
    return 0;
}
