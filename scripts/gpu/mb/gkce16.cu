// gkce16.cu: candidates for the 16-bit cross-entropy forward (issue 18, branch ce16):
// tensor.CrossEntropy of F16 / BF16 logits [65536, 1024] with I64 labels, which
// kernels/cuda runs as cross_entropy_regs_warp_{f16,bf16}_v16 (loss.cu's register-row
// form, a warp a row) on min(8192, ceMaxBlocks = 2048) blocks of BLOCK threads
// (loss.go, rows.go: rowKernel, rowsGrid). Main's figure (2026-12-06 19:53 UTC, H100):
// 2272 GB/s counting the logits read once, 76% of a copy's 2979 GB/s; F32 96%.
//
// Run on the GPU machine from the repository root (under a minute; stdout is the
// result, the ptxas lines go to /tmp/gkce16.ptxas and /tmp/gkce16-80.ptxas):
//   /usr/local/cuda/bin/nvcc -O3 -fmad=false -std=c++17 -arch=sm_90 -Xptxas -v -o /tmp/gkce16 \
//     scripts/gpu/mb/gkce16.cu -lcuda 2>/tmp/gkce16.ptxas && /tmp/gkce16
//   /usr/local/cuda/bin/nvcc -O3 -fmad=false -std=c++17 -gencode arch=compute_80,code=sm_90 -Xptxas -v \
//     -o /tmp/gkce16-80 scripts/gpu/mb/gkce16.cu -lcuda 2>/tmp/gkce16-80.ptxas && /tmp/gkce16-80
// The second build is SASS for sm_90 from compute_80 PTX, as kernels/cuda/gen's fatbins
// are. Each line ends with the kernel's registers and blocks an SM as the card reports
// them; ptxas's per kernel (spills too):
//   awk '/Compiling entry/{f=$0} /Used [0-9]+ registers/&&f{print f; print; f=""}' /tmp/gkce16.ptxas | c++filt
// Registers under nvcc 11.8 (here; both builds the same): main 40 (F32 63), cand-same
// 40, cand-lb8 32 (16 B spilled), cand-2rows 64 (-lb4 64), cand-prefetch 64 (-lb4 64),
// cand-label-reg 46 (-lb6 40), cand-ffma 40, cand-poly-1of4 40, -2of4 40, cand-mix 46
// (-lb6 40), cand-mix-2rows-lb4 64, cand-mix-prefetch-lb4 64, ceiling-read-rows 40,
// ceiling-read-flat 30; no spills but lb8's.
//
// Hypotheses, each tested by variants below (all measured on the H100 and H200 by
// 2026-12-07: docs/benchmarks.md, "16-bit cross-entropy" sections; none beat main
// by more than a point or two but the one-round grid probe, +4):
//  H1 the tail: the library's SASS takes 40 registers (F32 63: gen/resources.txt), so an
//     SM holds 6 blocks of 256 (F32 4): the 2048 blocks make 2.59 rounds of the 792 an
//     H100 holds (F32 3.88 of 528), and the last round runs 59% of the card.
//  H2 issue / SFU: per element a conversion, a subtract, a multiply, ex2.approx (MUFU,
//     16 a clock an SM) and a float add, plus the maximum; at twice F32's elements a
//     byte, the SFU and issue load a byte is twice F32's.
//  H3 bytes in flight: a warp holds one row (2 KB) at a time, and between rows runs a
//     serial chain (max, two warp reductions, a double log, then lane 0's dependent
//     load of logits[row, label]) during which it has no load in flight.
//
// Variants ("family shape variant µs GB/s %copy bits|maxulp [host check] [regs, blocks/SM]"):
//   main              cross_entropy_regs_warp_*_v16 from kernels/cuda/src (this harness's
//                     nvcc), grid 2048: the baseline whose lse and loss the others match.
//   main-gen          the same kernel from the committed kernels/cuda/gen/loss.fatbin (nvcc
//                     11.8's SASS from compute_80 PTX, what the library runs), via the driver.
//   cand-same         c_ce with every option off: the candidates' code = main (bits, same µs).
//   cand-grid-4096, cand-grid-8192  main's kernel on 4096 blocks (5.2 rounds) or
//                     uncapped (8192: a row a warp, 10.3 rounds); the loss's bits change
//                     (the parts' tree), the lse's must not  [H1]
//   cand-grid-1round  main's kernel on blocks/SM x SMs blocks (one round, 10-11 rows a
//                     warp; a probe only: the library's grid must depend on the shape
//                     alone, for the loss's bits)  [H1]
//   cand-lb8          c_ce (= main) under __launch_bounds__(BLOCK, 8): 32 registers
//                     (16 bytes spilled), 8 blocks an SM (2048 blocks: 1.9 rounds)  [H1, H3]
//   cand-2rows        a warp loads two of its rows (row, row + grid stride) before
//                     reducing either (64 registers, 4 blocks an SM); the same rows in
//                     the same order, so the same bits; -lb4 the same under
//                     __launch_bounds__(BLOCK, 4) (for nvcc 13's allocation)  [H3]
//   cand-prefetch     the warp's next row loaded before the current one is reduced
//                     (software pipelining: its loads stay in flight during the
//                     arithmetic; 64 registers); the same bits; -lb4 as above  [H3]
//   cand-label-reg    logits[row, label] taken from the row's registers (a shuffle from
//                     the lane that holds it) instead of lane 0's dependent load after
//                     the log: the same bits (46 registers: 5 blocks an SM; -lb6 holds
//                     it to 40, 6 blocks, as main)  [H3]
//   cand-ffma         (x - max)·log2 e as one fmaf(x, log2 e, -max·log2 e): one
//                     instruction an element fewer; lse changes by up to |max|·2^-24
//                     (a term's exponent), within doc.go's tolerance  [H2]
//   cand-poly-1of4    a quarter (2of4: half) of the terms by exp2_poly (Cody-Waite: the
//                     exponent by a magic-number round, 2^f on [-1/2, 1/2] by a degree-6
//                     polynomial through Chebyshev nodes, 6 fmaf; relative error 8.1e-8 =
//                     2^-23.6 in float, against ex2.approx's ~2^-22), so that the FMA pipe
//                     takes a share of the SFU's work; deterministic  [H2]
//   cand-mix          label-reg + ffma + poly-1of4 (46 registers; -lb6: 40);
//                     cand-mix-2rows-lb4 and cand-mix-prefetch-lb4 add 2rows / prefetch
//   cand-l2pf-D       the warp's row D grid strides ahead asked of L2 (prefetch.global.L2,
//                     a 128-byte line a lane, no register held) before it loads the
//                     current one, so that memory stays busy while warps compute; the same
//                     bits; -ffma with cand-ffma's term  [H3]
//   ceiling-read-rows-l2pf  ceiling-read-rows with the next row asked of L2 first  [H3]
//   cand-async-D     each warp's next D rows copied into shared memory by cp.async
//                     (no register held; 2·D KB a warp) while it computes on the current
//                     one, which it then reads from there into main's register row: the
//                     same rows, order and bits; -lb6 under __launch_bounds__(BLOCK, 6),
//                     -ffma with cand-ffma's term. The carveout asks for the most shared
//                     memory (6 blocks of 32 KB for D 2)  [H3]
//   ceiling-read-rows-async-D  ceiling-read-rows through cand-async-D's copies  [H3]
//   ceiling-read-rows main's load pattern and grid, no arithmetic (an xor of the bits a
//                     row, lane 0 writes it): what this row form could reach
//   ceiling-read-flat a grid-stride read of the same bytes, 4 16-byte loads in flight a
//                     thread, one round of the card: what any reader could reach
// main's ex2 is already ex2.approx.ftz.f32 (loss.cu's lse_term), so no ftz variant.
//
// Correctness: lse (n + 1 floats: the rows' lse and the count) and the loss compared
// with main's bit for bit, else "maxulp=N,differ=M" (",by-design" where the variant
// changes the arithmetic, ",MISMATCH" where it must not); every variant's lse and loss
// against a float64 host reference (lse_rel: the largest |lse - ref| / max(1, |ref|);
// loss and want). Times: cudaEvents around the launch, L2 flushed before each (a 256 MB
// memset), 3 warm-ups, median of 21; GB/s counts the logits read once; % is of a
// cudaMemcpy device to device moving the same bytes (half read, half written), timed
// the same way. F32 main is one line for reference (96% through the library).
#include "../../../kernels/cuda/src/loss.cu"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "harness.cuh"

// ---- candidates --------------------------------------------------------------------------

__device__ constexpr float LOG2E = 1.4426950408889634f;

// exp2_poly is 2^t for t <= 0 (or NaN) on the FMA pipe: s = t + 1.5·2^23 rounds t to
// the integer j held in s's low mantissa bits (|t| < 2^22), f = t - j is exact and in
// [-1/2, 1/2], 2^f is a degree-6 polynomial (interpolating 2^f at the 7 Chebyshev
// nodes of [-1/2, 1/2]), and j is added to its exponent field ((s's bits << 23) is
// j << 23 mod 2^32). Relative error at most 8.1e-8 (a host emulation in float with
// fmaf, 200,000 points of [-125, 0]). t < -125 gives 0 (as ex2.approx.ftz flushes
// below 2^-126; -Inf too), NaN gives NaN.
__device__ __forceinline__ float exp2_poly(float t) {
    float s = t + 12582912.0f;
    float f = t - (s - 12582912.0f);
    float p = fmaf(1.546144485e-04f, f, 1.340042800e-03f);
    p = fmaf(p, f, 9.618056938e-03f);
    p = fmaf(p, f, 5.550327152e-02f);
    p = fmaf(p, f, 2.402265072e-01f);
    p = fmaf(p, f, 6.931471825e-01f);
    p = fmaf(p, f, 1.0f);
    float r = __int_as_float(__float_as_int(p) + (__float_as_int(s) << 23));
    return t < -125.0f ? 0.0f : r;
}

// c_term is a row's term exp(x - mx): t = (x - mx)·log2 e as main (lse_term), or with
// FF as fmaf(x, log2 e, nml) where nml = -(mx·log2 e); 2^t by ex2.approx.ftz, or with
// POLY by exp2_poly.
template <bool FF, bool POLY> __device__ __forceinline__ float c_term(float x, float mx, float nml) {
    float t = FF ? fmaf(x, LOG2E, nml) : (x - mx) * LOG2E;
    if (POLY) return exp2_poly(t);
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(t));
    return r;
}

// c_label_at is element l (0 <= l < c) of a warp's register row, from the lane that
// holds it: chunk q = l/4 sits in lane q % 32, slot q / 32 (common.cuh's chunk_at).
// Every lane of the warp runs it with the same l.
template <typename S> __device__ __forceinline__ float c_label_at(const reg_row<S> &v, long long l) {
    int q = (int)(l >> 2), slot = q >> 5, e = (int)(l & 3);
    uint2 w = v.bits[0];
#pragma unroll
    for (int i = 1; i < ROW_CHUNKS; i++)
        if (slot == i) w = v.bits[i];
    unsigned int h = __shfl_sync(0xffffffffu, e < 2 ? w.x : w.y, q & 31);
    return from_bits<S>((unsigned short)(e & 1 ? h >> 16 : h & 0xffffu));
}

// c_row finishes a warp's row held in v (label l): its maximum, its lse (written by
// lane 0) and lane 0's sum and count, as cross_entropy_k with regs_k's lambda: FF and
// PQ (the terms k with k % 4 < PQ by exp2_poly) as c_term, LREG the label's logit from
// the registers (c_label_at) instead of lane 0's load. Every lane of the warp runs it.
template <typename S, bool FF, int PQ, bool LREG>
__device__ __forceinline__ void c_row(const reg_row<S> &v, long long l, long long row, int lane, float *lse, const S *logits, long long c,
                                      long long ignore, double &sum, double &count) {
    float mx = warp_max(row_max<32, true>(v, c, lane)), out = mx;
    if (!isinf(mx)) { // lse_of
        float nml = -(mx * LOG2E), a = 0;
#pragma unroll
        for (int k = 0; k < 4 * ROW_CHUNKS; k++) {
            if (!row_in<32, true>(k, c, lane)) break;
            float x = v.at(k);
            a += (k % 4 < PQ) ? c_term<FF, true>(x, mx, nml) : c_term<FF, false>(x, mx, nml);
        }
        out = mx + (float)::log(warp_sum((double)a));
    }
    float xl = 0;
    if (LREG && label_ok(l, c)) xl = c_label_at<S>(v, l);
    if (lane != 0) return;
    lse[row] = out;
    if (l == ignore) return;
    count += 1;
    if (label_ok(l, c)) sum += (double)out - (double)(LREG ? xl : row_get(logits + row * c, l));
}

// c_start reads a warp's row (its label, reported if bad, and its elements into v).
template <typename S>
__device__ __forceinline__ void c_start(reg_row<S> &v, long long &l, long long row, int lane, const S *logits, const long long *labels, long long c,
                                        long long ignore, ErrorFlag *flag, unsigned int seq) {
    l = labels[row];
    if (lane == 0 && l != ignore && !label_ok(l, c)) report(flag, seq, ERR_CROSS_ENTROPY, row, l, c);
    v.template load<32, true>(logits + row * c, c, lane);
}

// c_ce is cross_entropy_regs_k's warp form over 16-byte words (G 32, V16, ROW_CHUNKS
// slots) with c_row's options, and R rows of a warp loaded before either is reduced
// (the warp's rows row, row + stride, ... in main's order, so its sums and bits),
// MINB blocks an SM for __launch_bounds__ (0: none, as main's KERNEL). With R 1, FF
// false, PQ 0, LREG false it is main's code: the same bits and registers.
template <typename S, int R, bool FF, int PQ, bool LREG, int MINB>
__global__ void __launch_bounds__(BLOCK, MINB) c_ce(unsigned long long loss, int dtl, float *lse, const S *logits, const long long *labels, long long n,
                                                    long long c, long long ignore, double *part, unsigned int *ticket, ErrorFlag *flag, unsigned int seq) {
    __shared__ double sm[BLOCK / 32];
    int lane = group_lane<32>();
    long long stride = (long long)gridDim.x * (BLOCK / 32);
    double sum = 0, count = 0; // lane 0's rows
    for (long long row0 = group_row<32>(); row0 < n; row0 += R * stride) {
        reg_row<S> v[R];
        long long l[R];
#pragma unroll
        for (int r = 0; r < R; r++) // warp-uniform
            if (row0 + r * stride < n) c_start(v[r], l[r], row0 + r * stride, lane, logits, labels, c, ignore, flag, seq);
#pragma unroll
        for (int r = 0; r < R; r++)
            if (row0 + r * stride < n) c_row<S, FF, PQ, LREG>(v[r], l[r], row0 + r * stride, lane, lse, logits, c, ignore, sum, count);
    }
    cross_entropy_finish(sum, count, sm, loss, dtl, lse, n, part, ticket);
}

// c_ce_pf is c_ce (R 1) with the warp's next row loaded before the current one is
// reduced: 2 KB a warp in flight while it computes, the same rows in the same order.
template <typename S, bool FF, int PQ, bool LREG, int MINB>
__global__ void __launch_bounds__(BLOCK, MINB) c_ce_pf(unsigned long long loss, int dtl, float *lse, const S *logits, const long long *labels, long long n,
                                                       long long c, long long ignore, double *part, unsigned int *ticket, ErrorFlag *flag, unsigned int seq) {
    __shared__ double sm[BLOCK / 32];
    int lane = group_lane<32>();
    long long stride = (long long)gridDim.x * (BLOCK / 32);
    double sum = 0, count = 0;
    long long row = group_row<32>(), lnext = 0;
    reg_row<S> next;
    if (row < n) c_start(next, lnext, row, lane, logits, labels, c, ignore, flag, seq);
    for (; row < n; row += stride) {
        reg_row<S> v = next;
        long long l = lnext;
        if (row + stride < n) c_start(next, lnext, row + stride, lane, logits, labels, c, ignore, flag, seq);
        c_row<S, FF, PQ, LREG>(v, l, row, lane, lse, logits, c, ignore, sum, count);
    }
    cross_entropy_finish(sum, count, sm, loss, dtl, lse, n, part, ticket);
}

// c_l2_prefetch asks L2 for row `row` of the logits (c elements of S; nothing past n
// rows): lane i < c·sizeof(S)/128 one 128-byte line each, no registers held and no
// wait, so the line comes from memory while the warp computes on the row before it.
template <typename S> __device__ __forceinline__ void c_l2_prefetch(const S *logits, long long row, long long n, long long c, int lane) {
    if (row >= n || (long long)lane * 128 >= c * (long long)sizeof(S)) return;
    asm volatile("prefetch.global.L2 [%0];" ::"l"((const char *)(logits + row * c) + lane * 128));
}

// c_ce_l2 is c_ce (R 1) with the warp's row D grid strides ahead asked of L2
// (c_l2_prefetch) before it loads the current one: the same rows, order and bits.
template <typename S, int D, bool FF, int MINB>
__global__ void __launch_bounds__(BLOCK, MINB) c_ce_l2(unsigned long long loss, int dtl, float *lse, const S *logits, const long long *labels, long long n,
                                                       long long c, long long ignore, double *part, unsigned int *ticket, ErrorFlag *flag, unsigned int seq) {
    __shared__ double sm[BLOCK / 32];
    int lane = group_lane<32>();
    long long stride = (long long)gridDim.x * (BLOCK / 32);
    double sum = 0, count = 0;
    long long row0 = group_row<32>();
    for (int d = 1; d < D; d++) c_l2_prefetch(logits, row0 + d * stride, n, c, lane);
    for (long long row = row0; row < n; row += stride) {
        c_l2_prefetch(logits, row + D * stride, n, c, lane);
        reg_row<S> v;
        long long l;
        c_start(v, l, row, lane, logits, labels, c, ignore, flag, seq);
        c_row<S, FF, 0, false>(v, l, row, lane, lse, logits, c, ignore, sum, count);
    }
    cross_entropy_finish(sum, count, sm, loss, dtl, lse, n, part, ticket);
}

// c_async_words is a warp buffer's 16-byte words: a row of 32·ROW_CHUNKS chunks of 4
// 16-bit elements (1024 elements, 2 KB).
constexpr int c_async_words = 32 * ROW_CHUNKS * 8 / 16;

// c_async_issue starts copying row `row` of the logits (c elements of S; c·sizeof(S) a
// multiple of 16 bytes and at most a warp buffer's, c_async_words) into buf, a warp's
// buffer in shared memory, by cp.async (sm_80 on): lane i copies the 16-byte words i,
// i + 32, ...; the copies pass no register and nobody waits for them until
// c_async_take. Nothing is copied past n rows, but the commit group is made, so that
// every lane's count of groups stays the same.
template <typename S> __device__ __forceinline__ void c_async_issue(uint4 *buf, const S *logits, long long row, long long n, long long c, int lane) {
    if (row < n) {
        const uint4 *src = (const uint4 *)(logits + row * c) + lane;
        int words = (int)(c * (long long)sizeof(S) / 16) - lane;
        unsigned int dst = (unsigned int)__cvta_generic_to_shared(buf + lane);
#pragma unroll
        for (int i = 0; i < c_async_words / 32; i++)
            if (32 * i < words) asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst + 512 * i), "l"(src + 32 * i) : "memory");
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
}

// c_async_take waits until at most W of the lane's commit groups are in flight (the
// oldest ones done), then reads the row in buf into v as row_load_bits does (lane l's
// slot i holds chunk l + 32·i, 0 bits at c or past): the same register row, so the same
// sums and bits as main. The warp is synchronised before (every lane's copies landed)
// and after (buf may be refilled).
template <int W, typename S> __device__ __forceinline__ void c_async_take(reg_row<S> &v, const uint4 *buf, long long c, int lane) {
    asm volatile("cp.async.wait_group %0;" ::"n"(W) : "memory");
    __syncwarp();
    const uint2 *p = (const uint2 *)buf;
#pragma unroll
    for (int i = 0; i < ROW_CHUNKS; i++) v.bits[i] = chunk_at<32>(lane, i) < c ? p[lane + 32 * i] : make_uint2(0, 0);
    __syncwarp();
}

// c_ce_async is c_ce (R 1) whose rows come through shared memory: each warp keeps its
// next D rows being copied there (c_async_issue) while it computes on the current one,
// held in registers as main holds it, so 2·D KB a warp are in flight during the
// arithmetic without a register for them (c_ce_pf's prefetch took 64-79 registers and
// lost blocks). The same rows, order and bits as main. Rows of up to 1024 16-bit
// elements (the harness's 1024), c % 8 == 0.
template <typename S, int D, bool FF, int MINB>
__global__ void __launch_bounds__(BLOCK, MINB) c_ce_async(unsigned long long loss, int dtl, float *lse, const S *logits, const long long *labels, long long n,
                                                          long long c, long long ignore, double *part, unsigned int *ticket, ErrorFlag *flag, unsigned int seq) {
    __shared__ double sm[BLOCK / 32];
    __shared__ uint4 bufs[BLOCK / 32][D][c_async_words];
    int lane = group_lane<32>(), w = threadIdx.x / 32;
    long long stride = (long long)gridDim.x * (BLOCK / 32);
    double sum = 0, count = 0;
    long long row0 = group_row<32>();
#pragma unroll
    for (int d = 0; d < D; d++) c_async_issue(bufs[w][d], logits, row0 + d * stride, n, c, lane);
    int k = 0;
    for (long long row = row0; row < n; row += stride) {
        long long l = labels[row];
        if (lane == 0 && l != ignore && !label_ok(l, c)) report(flag, seq, ERR_CROSS_ENTROPY, row, l, c);
        reg_row<S> v;
        c_async_take<D - 1>(v, bufs[w][k], c, lane);
        c_async_issue(bufs[w][k], logits, row + D * stride, n, c, lane);
        k = k + 1 == D ? 0 : k + 1;
        c_row<S, FF, 0, false>(v, l, row, lane, lse, logits, c, ignore, sum, count);
    }
    cross_entropy_finish(sum, count, sm, loss, dtl, lse, n, part, ticket);
}

// ceil_fold is the ceilings' stand-in for a row's arithmetic: the xor of the warp's
// register row, which lane 0 writes into lse[row].
template <typename S> __device__ __forceinline__ void ceil_fold(const reg_row<S> &v, float *lse, long long row, int lane) {
    unsigned int x = 0;
#pragma unroll
    for (int i = 0; i < ROW_CHUNKS; i++) x ^= v.bits[i].x ^ v.bits[i].y;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) x ^= __shfl_xor_sync(0xffffffffu, x, o);
    if (lane == 0) lse[row] = __uint_as_float(x);
}

// ceil_rows_async reads the rows as c_ce_async does and, like ceil_rows, does no
// arithmetic but an xor of each row's bits, which lane 0 writes into lse.
template <typename S, int D>
__global__ void __launch_bounds__(BLOCK) ceil_rows_async(unsigned long long, int, float *lse, const S *logits, const long long *, long long n, long long c,
                                                         long long, double *, unsigned int *, ErrorFlag *, unsigned int) {
    __shared__ uint4 bufs[BLOCK / 32][D][c_async_words];
    int lane = group_lane<32>(), w = threadIdx.x / 32;
    long long stride = (long long)gridDim.x * (BLOCK / 32), row0 = group_row<32>();
#pragma unroll
    for (int d = 0; d < D; d++) c_async_issue(bufs[w][d], logits, row0 + d * stride, n, c, lane);
    int k = 0;
    for (long long row = row0; row < n; row += stride) {
        reg_row<S> v;
        c_async_take<D - 1>(v, bufs[w][k], c, lane);
        c_async_issue(bufs[w][k], logits, row + D * stride, n, c, lane);
        k = k + 1 == D ? 0 : k + 1;
        ceil_fold(v, lse, row, lane);
    }
}

// ceil_rows reads the rows as main does (reg_row, a warp a row, the same grid) and
// does no arithmetic but an xor of each row's bits, which lane 0 writes into lse; with
// L2PF it asks L2 for the warp's next row first (c_l2_prefetch).
template <typename S, bool L2PF>
__global__ void __launch_bounds__(BLOCK) ceil_rows(unsigned long long, int, float *lse, const S *logits, const long long *, long long n, long long c,
                                                   long long, double *, unsigned int *, ErrorFlag *, unsigned int) {
    int lane = group_lane<32>();
    long long stride = (long long)gridDim.x * (BLOCK / 32);
    for (long long row = group_row<32>(); row < n; row += stride) {
        if (L2PF) c_l2_prefetch(logits, row + stride, n, c, lane);
        reg_row<S> v;
        v.template load<32, true>(logits + row * c, c, lane);
        ceil_fold(v, lse, row, lane);
    }
}

// ceil_flat reads words 16-byte words, 4 a thread in flight, and writes nothing unless
// their xor is a value it never is here.
__global__ void __launch_bounds__(BLOCK) ceil_flat(const uint4 *p, long long words, unsigned int *out) {
    unsigned int x = 0;
    long long step = (long long)gridDim.x * BLOCK;
    for (long long i = (long long)blockIdx.x * BLOCK + threadIdx.x; i < words; i += 4 * step) {
        uint4 w[4];
#pragma unroll
        for (int u = 0; u < 4; u++) w[u] = i + u * step < words ? __ldcs(p + i + u * step) : make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int u = 0; u < 4; u++) x ^= w[u].x ^ w[u].y ^ w[u].z ^ w[u].w;
    }
    if (x == 0x9e3779b9u) out[0] = x;
}

// ---- the harness ----------------------------------------------------------------------

// CEArgs are a forward's launch arguments, as loss.go passes them (seq 1).
struct CEArgs {
    unsigned long long loss;
    int dtl;
    float *lse;
    const void *logits;
    const long long *labels;
    long long n, c, ignore;
    double *part;
    unsigned int *ticket;
    ErrorFlag *flag;
    unsigned int seq;
    void *ptrs[12];
    void **args() {
        void *a[12] = {&loss, &dtl, &lse, &logits, &labels, &n, &c, &ignore, &part, &ticket, &flag, &seq};
        memcpy(ptrs, a, sizeof a);
        return ptrs;
    }
};

static int sms;
static const char *only;

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
    printf("copy %zuMB cudaMemcpy %.2f %.1f 100.0 - (memcpy D2D, MB read + written)\n", bytes >> 20, us, bytes / us / 1e3);
    return memo[bytes] = bytes / us / 1e3;
}

static std::vector<unsigned char> fetch(const void *d, size_t bytes) {
    std::vector<unsigned char> h(bytes);
    CK(cudaMemcpy(h.data(), d, bytes, cudaMemcpyDeviceToHost));
    return h;
}

static long long ord16(unsigned short h) { return (h & 0x8000) ? -(long long)(h & 0x7fff) : (long long)h; }
static long long ord32(unsigned int u) { return (u & 0x80000000u) ? -(long long)(u & 0x7fffffffu) : (long long)u; }

// Family is the forward at one shape and type: main's outputs (the first variant run),
// the bytes it reads, the outputs (lse, the loss) and their element sizes, and the host
// check of a variant's outputs.
struct Family {
    std::string name, shape;
    size_t bytes;
    std::vector<void *> outs;
    std::vector<size_t> outBytes;
    std::vector<int> elem;
    std::vector<std::vector<unsigned char>> ref;
    std::function<std::string(const std::vector<std::vector<unsigned char>> &)> host;
};

// run times one variant and prints its line. changes: the variant may change bits by
// design; compare false: its outputs are not the op's (the ceilings).
static void run(Family &f, const std::string &variant, bool changes, bool compare, const std::string &res, const std::function<void()> &launch) {
    for (size_t k = 0; k < f.outs.size(); k++) CK(cudaMemset(f.outs[k], 0xcd, f.outBytes[k]));
    launch();
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    std::vector<std::vector<unsigned char>> got;
    for (size_t k = 0; k < f.outs.size(); k++) got.push_back(fetch(f.outs[k], f.outBytes[k]));
    std::string same = "-", h;
    if (compare && f.ref.empty()) {
        f.ref = got;
        same = "baseline";
    } else if (compare) {
        bool eq = true;
        long long diffs = 0, maxUlp = 0;
        for (size_t k = 0; k < got.size(); k++) {
            if (got[k] == f.ref[k]) continue;
            eq = false;
            if (f.elem[k] == 2) {
                const unsigned short *a = (const unsigned short *)got[k].data(), *b = (const unsigned short *)f.ref[k].data();
                for (size_t i = 0; i < got[k].size() / 2; i++)
                    if (a[i] != b[i]) diffs++, maxUlp = std::max(maxUlp, std::llabs(ord16(a[i]) - ord16(b[i])));
            } else {
                const unsigned int *a = (const unsigned int *)got[k].data(), *b = (const unsigned int *)f.ref[k].data();
                for (size_t i = 0; i < got[k].size() / 4; i++)
                    if (a[i] != b[i]) diffs++, maxUlp = std::max(maxUlp, std::llabs(ord32(a[i]) - ord32(b[i])));
            }
        }
        char buf[200];
        if (eq) snprintf(buf, sizeof buf, "bits");
        else snprintf(buf, sizeof buf, "maxulp=%lld,differ=%lld,%s", maxUlp, diffs, changes ? "by-design" : "MISMATCH");
        same = buf;
    }
    if (compare && f.host) h = f.host(got);
    float us = timeUs(launch);
    double gbs = f.bytes / us / 1e3;
    double pct = 100 * gbs / copyGBs(f.bytes);
    printf("%s %s %s %.2f %.1f %.1f %s %s %s\n", f.name.c_str(), f.shape.c_str(), variant.c_str(), us, gbs, pct, same.c_str(), h.c_str(), res.c_str());
    fflush(stdout);
}

// ---- the committed fatbin, launched through the driver ---------------------------------

static std::string genResources(CUfunction f) {
    int regs = 0, b = 0;
    cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, f);
    cuOccupancyMaxActiveBlocksPerMultiprocessor(&b, f, BLOCK, 0);
    char s[64];
    snprintf(s, sizeof s, "regs=%d,blocks/SM=%d", regs, b);
    return s;
}

// ---- inputs ---------------------------------------------------------------------------

static const char *dtName(int dt) { return dt == DT_F32 ? "f32" : dt == DT_F16 ? "f16" : "bf16"; }

// Cand is a candidate kernel of c_ce's signature; cands lists a 16-bit type's, in the
// order they run.
struct Cand {
    const char *name;
    const void *k;
    bool changes;
};
template <typename S> static std::vector<Cand> cands() {
    return {
        {"cand-same", (const void *)c_ce<S, 1, false, 0, false, 0>, false},
        {"cand-lb8", (const void *)c_ce<S, 1, false, 0, false, 8>, false},
        {"cand-2rows", (const void *)c_ce<S, 2, false, 0, false, 0>, false},
        {"cand-2rows-lb4", (const void *)c_ce<S, 2, false, 0, false, 4>, false},
        {"cand-prefetch", (const void *)c_ce_pf<S, false, 0, false, 0>, false},
        {"cand-prefetch-lb4", (const void *)c_ce_pf<S, false, 0, false, 4>, false},
        {"cand-label-reg", (const void *)c_ce<S, 1, false, 0, true, 0>, false},
        {"cand-label-reg-lb6", (const void *)c_ce<S, 1, false, 0, true, 6>, false},
        {"cand-ffma", (const void *)c_ce<S, 1, true, 0, false, 0>, true},
        {"cand-poly-1of4", (const void *)c_ce<S, 1, false, 1, false, 0>, true},
        {"cand-poly-2of4", (const void *)c_ce<S, 1, false, 2, false, 0>, true},
        {"cand-mix", (const void *)c_ce<S, 1, true, 1, true, 0>, true},
        {"cand-mix-lb6", (const void *)c_ce<S, 1, true, 1, true, 6>, true},
        {"cand-mix-2rows-lb4", (const void *)c_ce<S, 2, true, 1, true, 4>, true},
        {"cand-mix-prefetch-lb4", (const void *)c_ce_pf<S, true, 1, true, 4>, true},
        {"cand-l2pf-1", (const void *)c_ce_l2<S, 1, false, 0>, false},
        {"cand-l2pf-2", (const void *)c_ce_l2<S, 2, false, 0>, false},
        {"cand-l2pf-3", (const void *)c_ce_l2<S, 3, false, 0>, false},
        {"cand-l2pf-1-ffma", (const void *)c_ce_l2<S, 1, true, 0>, true},
        {"cand-l2pf-2-ffma", (const void *)c_ce_l2<S, 2, true, 0>, true},
        {"cand-async-1", (const void *)c_ce_async<S, 1, false, 0>, false},
        {"cand-async-2", (const void *)c_ce_async<S, 2, false, 0>, false},
        {"cand-async-1-lb6", (const void *)c_ce_async<S, 1, false, 6>, false},
        {"cand-async-1-ffma", (const void *)c_ce_async<S, 1, true, 0>, true},
        {"cand-async-2-ffma", (const void *)c_ce_async<S, 2, true, 0>, true},
        {"cand-async-2-lb6", (const void *)c_ce_async<S, 2, false, 6>, false},
    };
}

int main() {
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    only = getenv("ONLY"); // run only the candidates whose name holds it (main and the ceilings always)
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("# gkce16 (ce16): %s, %d SMs; columns: family shape variant us GB/s %%copy bits|maxulp [host check] [registers]\n", prop.name, sms);
    CK(cudaFree(0));
    const long long rows = 65536, c = 1024, N = rows * c;
    void *xBuf, *lseBuf, *lossBuf, *labBuf, *partBuf, *sink;
    unsigned int *ticket;
    CK(cudaMalloc(&xBuf, N * 4));
    CK(cudaMalloc(&lseBuf, (rows + 1) * 4));
    CK(cudaMalloc(&lossBuf, 16));
    CK(cudaMalloc(&labBuf, rows * 8));
    CK(cudaMalloc(&partBuf, 2 * 8192 * 8 + 4096)); // two doubles a block, 8192 blocks at most
    CK(cudaMalloc(&sink, 16));
    CK(cudaMalloc(&ticket, 4));
    CK(cudaMemset(ticket, 0, 4));
    ErrorFlag *flag;
    int *lock;
    CK(cudaMalloc(&flag, sizeof(ErrorFlag)));
    CK(cudaMalloc(&lock, 4));
    CK(cudaMemset(lock, 0, 4));
    {
        ErrorFlag f{};
        f.lock = lock;
        CK(cudaMemcpy(flag, &f, sizeof f, cudaMemcpyHostToDevice));
    }
    double *part = (double *)partBuf;
    const long long ignore = -100;
    char shape[32];
    snprintf(shape, sizeof shape, "[%lld,%lld]", rows, c);
    std::vector<long long> labels(rows);
    for (long long i = 0; i < rows; i++) labels[i] = next32() % c;
    CK(cudaMemcpy(labBuf, labels.data(), rows * 8, cudaMemcpyHostToDevice));
    const unsigned rg = (unsigned)(rows / (BLOCK / 32)); // rowsGrid: a warp a row
    const unsigned ceGrid = std::min(rg, 2048u);         // loss.go: ceMaxBlocks

    // Logits ~ N(0, 1) (Box-Muller), as ops_compare's Randn, rounded to the type.
    std::vector<float> normal(N);
    for (long long i = 0; i + 1 < N; i += 2) {
        float u = ((next32() & 0xffffff) + 1) / 16777217.0f, v = (next32() & 0xffffff) / 16777216.0f;
        float r = sqrtf(-2 * logf(u));
        normal[i] = r * cosf(6.2831853f * v), normal[i + 1] = r * sinf(6.2831853f * v);
    }

    for (int dt : {DT_F16, DT_BF16, DT_F32}) {
        std::vector<float> x(N);
        size_t e = dt == DT_F32 ? 4 : 2;
        if (dt == DT_F32) {
            x = normal;
            CK(cudaMemcpy(xBuf, x.data(), N * 4, cudaMemcpyHostToDevice));
        } else {
            std::vector<unsigned short> b(N);
            for (long long i = 0; i < N; i++) b[i] = toBits(dt, normal[i]), x[i] = host16(dt, b[i]);
            CK(cudaMemcpy(xBuf, b.data(), N * 2, cudaMemcpyHostToDevice));
        }
        // Host: every row's lse and the mean loss, in float64.
        std::vector<double> hl(rows);
        double want = 0;
        for (long long i = 0; i < rows; i++) {
            const float *r = x.data() + i * c;
            double mx = -INFINITY, s = 0;
            for (long long j = 0; j < c; j++) mx = std::max(mx, (double)r[j]);
            for (long long j = 0; j < c; j++) s += std::exp((double)r[j] - mx);
            hl[i] = mx + std::log(s);
            want += hl[i] - r[labels[i]];
        }
        want /= rows;
        Family f{std::string("ce-fwd-") + dtName(dt), shape, (size_t)N * e, {lseBuf, lossBuf}, {(size_t)(rows + 1) * 4, e}, {4, (int)e}, {}, nullptr};
        f.host = [&](const std::vector<std::vector<unsigned char>> &o) {
            double worst = 0;
            const float *l = (const float *)o[0].data();
            for (long long i = 0; i < rows; i++) worst = std::max(worst, std::fabs(l[i] - hl[i]) / std::max(1.0, std::fabs(hl[i])));
            double got = dt == DT_F32 ? *(const float *)o[1].data() : host16(dt, *(const unsigned short *)o[1].data());
            char b[160];
            snprintf(b, sizeof b, "host:lse_rel=%.2e,loss=%.7g,want=%.7g,count=%.0f", worst, got, want, (double)l[rows]);
            return std::string(b);
        };
        CEArgs args{(unsigned long long)lossBuf, dt, (float *)lseBuf, xBuf, (const long long *)labBuf, rows, c, ignore, part, ticket, flag, 1, {}};
        auto launch = [&](const void *k, unsigned grid) {
            return [&args, k, grid] { CK(cudaLaunchKernel(k, dim3(grid), dim3(BLOCK), args.args(), 0, 0)); };
        };
        const void *mainK = dt == DT_F16 ? (const void *)cross_entropy_regs_warp_f16_v16
                            : dt == DT_BF16 ? (const void *)cross_entropy_regs_warp_bf16_v16
                                             : (const void *)cross_entropy_regs_warp_f32_v16;
        run(f, "main", false, true, resources(mainK), launch(mainK, ceGrid));
        const char *gname = dt == DT_F16 ? "cross_entropy_regs_warp_f16_v16" : dt == DT_BF16 ? "cross_entropy_regs_warp_bf16_v16" : "cross_entropy_regs_warp_f32_v16";
        if (CUfunction g = fatbinFn("kernels/cuda/gen/loss.fatbin", gname)) {
            run(f, "main-gen", false, true, genResources(g), [&args, g, ceGrid] {
                if (cuLaunchKernel(g, ceGrid, 1, 1, BLOCK, 1, 1, 0, 0, args.args(), nullptr) != CUDA_SUCCESS) {
                    fprintf(stderr, "cuLaunchKernel failed\n");
                    exit(1);
                }
            });
        } else {
            printf("# kernels/cuda/gen/loss.fatbin not loaded: no main-gen line\n");
        }
        if (dt == DT_F32) continue; // F32 is the reference line only
        int bps = 0;
        CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&bps, mainK, BLOCK, 0));
        for (unsigned g : {4096u, rg}) run(f, "cand-grid-" + std::to_string(g), true, true, "", launch(mainK, g));
        run(f, "cand-grid-1round=" + std::to_string(bps * sms), true, true, "", launch(mainK, (unsigned)(bps * sms)));
        for (const Cand &k : dt == DT_F16 ? cands<f16_t>() : cands<bf16_t>())
            if (!only || strstr(k.name, only)) {
                if (strstr(k.name, "async")) CK(cudaFuncSetAttribute(k.k, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared));
                run(f, k.name, k.changes, true, resources(k.k), launch(k.k, ceGrid));
            }
        for (int d : {1, 2}) {
            const void *ca = dt == DT_F16 ? (d == 1 ? (const void *)ceil_rows_async<f16_t, 1> : (const void *)ceil_rows_async<f16_t, 2>)
                                          : (d == 1 ? (const void *)ceil_rows_async<bf16_t, 1> : (const void *)ceil_rows_async<bf16_t, 2>);
            CK(cudaFuncSetAttribute(ca, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared));
            run(f, "ceiling-read-rows-async-" + std::to_string(d), false, false, resources(ca), launch(ca, ceGrid));
        }
        const void *cr = dt == DT_F16 ? (const void *)ceil_rows<f16_t, false> : (const void *)ceil_rows<bf16_t, false>;
        run(f, "ceiling-read-rows", false, false, resources(cr), launch(cr, ceGrid));
        const void *cr2 = dt == DT_F16 ? (const void *)ceil_rows<f16_t, true> : (const void *)ceil_rows<bf16_t, true>;
        run(f, "ceiling-read-rows-l2pf", false, false, resources(cr2), launch(cr2, ceGrid));
        int fb = 0;
        CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fb, (const void *)ceil_flat, BLOCK, 0));
        run(f, "ceiling-read-flat", false, false, resources((const void *)ceil_flat),
            [&] { ceil_flat<<<fb * sms, BLOCK>>>((const uint4 *)xBuf, (long long)(N * e / 16), (unsigned int *)sink); });
    }
    printf("# done\n");
    return 0;
}
