// elementwise.cu: the elementwise family: Unary, UnaryBackward, Binary,
// BinaryBackward, Axpy and Dropout (apply), over a Walk (broadcasting, any strides, any
// float or integer input types, a float output). One thread per output element, the
// grid striding; I is the index type (int when every offset fits in 31 bits).
#include "math.cuh"

template <typename C, typename I>
__device__ __forceinline__ void unary_k(const Walk &w, int op) {
    GRID_STRIDE(I, i, w.size) {
        I off[2];
        offsets<2, I>(w, i, off);
        C v = ld<C>(w.base[1], w.dtype[1], off[1], w.imm[1]);
        st<C>(w.base[0], w.dtype[0], off[0], unary_fn<C>(op, v));
    }
}

template <typename C, typename I>
__device__ __forceinline__ void unary_backward_k(const Walk &w, int op) {
    GRID_STRIDE(I, i, w.size) {
        I off[3];
        offsets<3, I>(w, i, off);
        C g = ld<C>(w.base[1], w.dtype[1], off[1], w.imm[1]);
        C s = ld<C>(w.base[2], w.dtype[2], off[2], w.imm[2]);
        st<C>(w.base[0], w.dtype[0], off[0], unary_grad<C>(op, g, s));
    }
}

template <typename C, typename I>
__device__ __forceinline__ void binary_k(const Walk &w, int op) {
    GRID_STRIDE(I, i, w.size) {
        I off[3];
        offsets<3, I>(w, i, off);
        C a = ld<C>(w.base[1], w.dtype[1], off[1], w.imm[1]);
        C b = ld<C>(w.base[2], w.dtype[2], off[2], w.imm[2]);
        st<C>(w.base[0], w.dtype[0], off[0], binary_fn<C>(op, a, b));
    }
}

template <typename C, typename I>
__device__ __forceinline__ void binary_backward_k(const Walk &w, int op, int wrt) {
    GRID_STRIDE(I, i, w.size) {
        I off[4];
        offsets<4, I>(w, i, off);
        C g = ld<C>(w.base[1], w.dtype[1], off[1], w.imm[1]);
        C a = ld<C>(w.base[2], w.dtype[2], off[2], w.imm[2]);
        C b = ld<C>(w.base[3], w.dtype[3], off[3], w.imm[3]);
        st<C>(w.base[0], w.dtype[0], off[0], binary_grad<C>(op, wrt, g, a, b));
    }
}

// axpy_k: dst += alpha·x; operand 1 is dst itself.
template <typename C, typename I>
__device__ __forceinline__ void axpy_k(const Walk &w, C alpha) {
    GRID_STRIDE(I, i, w.size) {
        I off[3];
        offsets<3, I>(w, i, off);
        C d = ld<C>(w.base[1], w.dtype[1], off[1], w.imm[1]);
        C x = ld<C>(w.base[2], w.dtype[2], off[2], w.imm[2]);
        st<C>(w.base[0], w.dtype[0], off[0], d + alpha * x);
    }
}

// dropout_k: x·scale where the Bool mask (operand 2) is 1, 0 where it is 0.
template <typename C, typename I>
__device__ __forceinline__ void dropout_k(const Walk &w, C scale) {
    GRID_STRIDE(I, i, w.size) {
        I off[3];
        offsets<3, I>(w, i, off);
        C x = ld<C>(w.base[1], w.dtype[1], off[1], w.imm[1]);
        C m = ld<C>(w.base[2], w.dtype[2], off[2], w.imm[2]);
        st<C>(w.base[0], w.dtype[0], off[0], m == 0 ? (C)0 : x * scale);
    }
}

// Entry points: NAME_<compute>_<index>. F64: the same with double and the suffix f64.
#define EW_KERNELS(C, CN, I, IN)                                                                         \
    KERNEL unary_##CN##_##IN(Walk w, int op) { unary_k<C, I>(w, op); }                                   \
    KERNEL unary_backward_##CN##_##IN(Walk w, int op) { unary_backward_k<C, I>(w, op); }                 \
    KERNEL binary_##CN##_##IN(Walk w, int op) { binary_k<C, I>(w, op); }                                 \
    KERNEL binary_backward_##CN##_##IN(Walk w, int op, int wrt) { binary_backward_k<C, I>(w, op, wrt); } \
    KERNEL axpy_##CN##_##IN(Walk w, C alpha) { axpy_k<C, I>(w, alpha); }                                \
    KERNEL dropout_##CN##_##IN(Walk w, C scale) { dropout_k<C, I>(w, scale); }

EW_KERNELS(float, f32, int, i32)
EW_KERNELS(float, f32, long long, i64)
