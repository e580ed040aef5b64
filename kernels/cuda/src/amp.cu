// amp.cu: Unscale for the gradient scaler: g *= inv in place over a Walk (any float type,
// any strides, computed in g's precision: double for F64) and *found = 1 (an F32 scalar) when g held an Inf or a NaN, as PyTorch's
// _amp_foreach_non_finite_check_and_unscale_ does. Threads that find one all store the
// same 1.0, so the result does not depend on their order.
#include "common.cuh"

// unscale_at unscales element i of g, of type dt: the single-tensor and the
// multi-tensor kernels run the same code.
template <typename C>
__device__ __forceinline__ void unscale_at(unsigned long long g, int dt, long long i, C inv, float *found) {
    C x = ld<C>(g, dt, i, 0);
    if (x - x != 0) *found = 1.0f;
    st<C>(g, dt, i, x * inv);
}

template <typename C, typename I>
__device__ __forceinline__ void unscale_k(const Walk &w, C inv, float *found) {
    GRID_STRIDE(I, i, w.size) {
        I off[1];
        offsets<1, I>(w, i, off);
        unscale_at<C>(w.base[0], w.dtype[0], off[0], inv, found);
    }
}

// unscale_span unscales elements [lo, hi) of a contiguous gradient of type DT with the
// block's threads, its type fixed at compile time.
template <typename C, int DT>
__device__ __forceinline__ void unscale_span(unsigned long long g, long long lo, long long hi, C inv, float *found) {
#pragma unroll 1
    for (long long j = lo + threadIdx.x; j < hi; j += BLOCK) unscale_at<C>(g, DT, j, inv, found);
}

// unscale_multi unscales every gradient of l, F64 ones in double with inv64, the others
// in float with inv32 (Unscale's compute types), over the list's chunks (common.cuh).
KERNEL unscale_multi(ScaleList l, float inv32, double inv64, float *found) {
    for (long long c = blockIdx.x; c < l.chunk[l.count]; c += gridDim.x) {
        int i;
        long long lo, hi;
        list_chunk(l, c, i, lo, hi);
        unsigned long long g = l.g[i];
        switch (l.dtype[i]) {
        case DT_F32: unscale_span<float, DT_F32>(g, lo, hi, inv32, found); break;
        case DT_F16: unscale_span<float, DT_F16>(g, lo, hi, inv32, found); break;
        case DT_BF16: unscale_span<float, DT_BF16>(g, lo, hi, inv32, found); break;
        case DT_F64: unscale_span<double, DT_F64>(g, lo, hi, inv64, found); break;
        }
    }
}

KERNEL unscale_f32_i32(Walk w, float inv, float *found) { unscale_k<float, int>(w, inv, found); }
KERNEL unscale_f32_i64(Walk w, float inv, float *found) { unscale_k<float, long long>(w, inv, found); }
KERNEL unscale_f64_i32(Walk w, double inv, float *found) { unscale_k<double, int>(w, inv, found); }
KERNEL unscale_f64_i64(Walk w, double inv, float *found) { unscale_k<double, long long>(w, inv, found); }
