// gemm.cu: the fallback matrix product, for products cuBLAS does not take (mixed types,
// strided outputs) or machines without it: dst = a·b per batch, with a [m, k], b [k, n]
// and dst [m, n] of any float types and strides, summed in the compute type C (double
// when an operand is F64, float otherwise) in k order with fused multiply-adds, as
// cuBLAS and kernels/cpu's GEMM sum (so deterministic), rounded once to dst's type. A
// 16×16 tile of dst per block, both operands staged through shared memory in C. It is
// simple, not fast.
#include "math.cuh"

#define TILE 16

// gemm_tiled: each block computes 16×16 tiles of dst, striding over the tiles (x over
// n, y over m) and over the batches (z); the Walk enumerates the batches (operands dst,
// a, b; size = batch count).
template <typename C>
__device__ __forceinline__ void gemm_tiled_k(const Walk &w, const Mat &mt, long long m, long long n, long long k) {
    __shared__ C as[TILE][TILE + 1];
    __shared__ C bs[TILE][TILE + 1];
    int tx = threadIdx.x % TILE, ty = threadIdx.x / TILE;
    long long tilesM = (m + TILE - 1) / TILE, tilesN = (n + TILE - 1) / TILE;
    for (long long batch = blockIdx.z; batch < w.size; batch += gridDim.z) {
        long long off[3];
        offsets<3, long long>(w, batch, off);
        for (long long tm = blockIdx.y; tm < tilesM; tm += gridDim.y) {
            for (long long tn = blockIdx.x; tn < tilesN; tn += gridDim.x) {
                long long row = tm * TILE + ty, col = tn * TILE + tx;
                C acc = 0;
                for (long long k0 = 0; k0 < k; k0 += TILE) {
                    long long ka = k0 + tx, kb = k0 + ty;
                    as[ty][tx] = (row < m && ka < k) ? ld<C>(w.base[1], w.dtype[1], off[1] + row * mt.rs[1] + ka * mt.cs[1], 0) : (C)0;
                    bs[ty][tx] = (kb < k && col < n) ? ld<C>(w.base[2], w.dtype[2], off[2] + kb * mt.rs[2] + col * mt.cs[2], 0) : (C)0;
                    __syncthreads();
#pragma unroll
                    for (int q = 0; q < TILE; q++) acc = c_fma(as[ty][q], bs[q][tx], acc);
                    __syncthreads();
                }
                if (row < m && col < n) st<C>(w.base[0], w.dtype[0], off[0] + row * mt.rs[0] + col * mt.cs[0], acc);
            }
        }
    }
}

KERNEL gemm_tiled_f32(Walk w, Mat mt, long long m, long long n, long long k) { gemm_tiled_k<float>(w, mt, m, n, k); }
KERNEL_ROOM gemm_tiled_f64(Walk w, Mat mt, long long m, long long n, long long k) { gemm_tiled_k<double>(w, mt, m, n, k); }
