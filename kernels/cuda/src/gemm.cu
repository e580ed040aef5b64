// gemm.cu: the fallback matrix product, for machines without cuBLAS: dst = a·b per
// batch, with a [m, k], b [k, n] and dst [m, n] of any float types and strides, summed
// in float in k order with fused multiply-adds, as cuBLAS and kernels/cpu's GEMM sum
// (so deterministic), rounded once to dst's type. A 16×16 tile of
// dst per block, both operands staged through shared memory. It is simple, not fast:
// with cuBLAS present Matmul never runs it.
#include "common.cuh"

#define TILE 16

// gemm_tiled: each block computes 16×16 tiles of dst, striding over the tiles (x over
// n, y over m) and over the batches (z); the Walk enumerates the batches (operands dst,
// a, b; size = batch count).
KERNEL gemm_tiled(Walk w, Mat mt, long long m, long long n, long long k) {
    __shared__ float as[TILE][TILE + 1];
    __shared__ float bs[TILE][TILE + 1];
    int tx = threadIdx.x % TILE, ty = threadIdx.x / TILE;
    long long tilesM = (m + TILE - 1) / TILE, tilesN = (n + TILE - 1) / TILE;
    for (long long batch = blockIdx.z; batch < w.size; batch += gridDim.z) {
        long long off[3];
        offsets<3, long long>(w, batch, off);
        for (long long tm = blockIdx.y; tm < tilesM; tm += gridDim.y) {
            for (long long tn = blockIdx.x; tn < tilesN; tn += gridDim.x) {
                long long row = tm * TILE + ty, col = tn * TILE + tx;
                float acc = 0;
                for (long long k0 = 0; k0 < k; k0 += TILE) {
                    long long ka = k0 + tx, kb = k0 + ty;
                    as[ty][tx] = (row < m && ka < k) ? ld<float>(w.base[1], w.dtype[1], off[1] + row * mt.rs[1] + ka * mt.cs[1], 0) : 0.0f;
                    bs[ty][tx] = (kb < k && col < n) ? ld<float>(w.base[2], w.dtype[2], off[2] + kb * mt.rs[2] + col * mt.cs[2], 0) : 0.0f;
                    __syncthreads();
#pragma unroll
                    for (int q = 0; q < TILE; q++) acc = fmaf(as[ty][q], bs[q][tx], acc);
                    __syncthreads();
                }
                if (row < m && col < n) st<float>(w.base[0], w.dtype[0], off[0] + row * mt.rs[0] + col * mt.cs[0], acc);
            }
        }
    }
}
