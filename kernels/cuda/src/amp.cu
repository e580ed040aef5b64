// amp.cu: Unscale for the gradient scaler: g *= inv in place over a Walk (any float type,
// any strides, computed in g's precision: double for F64) and *found = 1 (an F32 scalar) when g held an Inf or a NaN, as PyTorch's
// _amp_foreach_non_finite_check_and_unscale_ does. Threads that find one all store the
// same 1.0, so the result does not depend on their order.
#include "common.cuh"

template <typename C, typename I>
__device__ __forceinline__ void unscale_k(const Walk &w, C inv, float *found) {
    GRID_STRIDE(I, i, w.size) {
        I off[1];
        offsets<1, I>(w, i, off);
        C x = ld<C>(w.base[0], w.dtype[0], off[0], 0);
        if (x - x != 0) *found = 1.0f;
        st<C>(w.base[0], w.dtype[0], off[0], x * inv);
    }
}

KERNEL unscale_f32_i32(Walk w, float inv, float *found) { unscale_k<float, int>(w, inv, found); }
KERNEL unscale_f32_i64(Walk w, float inv, float *found) { unscale_k<float, long long>(w, inv, found); }
KERNEL unscale_f64_i32(Walk w, double inv, float *found) { unscale_k<double, int>(w, inv, found); }
KERNEL unscale_f64_i64(Walk w, double inv, float *found) { unscale_k<double, long long>(w, inv, found); }
