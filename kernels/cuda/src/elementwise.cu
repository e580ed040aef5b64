// elementwise.cu: the elementwise family: Unary, UnaryBackward, Binary,
// BinaryBackward, Axpy, Dropout (apply), the binary cross-entropy losses and their
// gradients, and Addc, over a Walk (broadcasting, any strides, any float or integer
// input types, a float output). One thread per output element, the grid striding; I is
// the index type (int when every offset fits in 31 bits).
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

// bce_k: BinaryCrossEntropy of x (operand 1) against y (2). Every loss is written, as
// kernels/cpu writes them; the x outside [0, 1] or NaN are counted and reported as a
// range error of the launch (seq).
template <typename C, typename I>
__device__ __forceinline__ void bce_k(const Walk &w, ErrorFlag *flag, unsigned int seq) {
    unsigned long long bad = 0;
    GRID_STRIDE(I, i, w.size) {
        I off[3];
        offsets<3, I>(w, i, off);
        C p = ld<C>(w.base[1], w.dtype[1], off[1], w.imm[1]);
        C t = ld<C>(w.base[2], w.dtype[2], off[2], w.imm[2]);
        if (!(p >= (C)0 && p <= (C)1)) bad++;
        st<C>(w.base[0], w.dtype[0], off[0], bce_fn<C>(p, t));
    }
    report_outside(flag, seq, ERR_BINARY_CROSS_ENTROPY, bad);
}

// bce_backward_k: operands dst, g, x, y.
template <typename C, typename I>
__device__ __forceinline__ void bce_backward_k(const Walk &w, int wrt) {
    GRID_STRIDE(I, i, w.size) {
        I off[4];
        offsets<4, I>(w, i, off);
        C g = ld<C>(w.base[1], w.dtype[1], off[1], w.imm[1]);
        C p = ld<C>(w.base[2], w.dtype[2], off[2], w.imm[2]);
        C t = ld<C>(w.base[3], w.dtype[3], off[3], w.imm[3]);
        st<C>(w.base[0], w.dtype[0], off[0], bce_grad<C>(wrt, g, p, t));
    }
}

// bce_logits_k: operands dst, x, y, pw (an immediate 1 for none).
template <typename C, typename I>
__device__ __forceinline__ void bce_logits_k(const Walk &w) {
    GRID_STRIDE(I, i, w.size) {
        I off[4];
        offsets<4, I>(w, i, off);
        C v = ld<C>(w.base[1], w.dtype[1], off[1], w.imm[1]);
        C t = ld<C>(w.base[2], w.dtype[2], off[2], w.imm[2]);
        C pw = ld<C>(w.base[3], w.dtype[3], off[3], w.imm[3]);
        st<C>(w.base[0], w.dtype[0], off[0], bce_logits_fn<C>(v, t, pw));
    }
}

// bce_logits_backward_k: operands dst, g, x, y, pw: the one kernel with MAX_OPS operands
// (for ARG_B y is an immediate: its derivative does not read it).
template <typename C, typename I>
__device__ __forceinline__ void bce_logits_backward_k(const Walk &w, int wrt) {
    GRID_STRIDE(I, i, w.size) {
        I off[5];
        offsets<5, I>(w, i, off);
        C g = ld<C>(w.base[1], w.dtype[1], off[1], w.imm[1]);
        C v = ld<C>(w.base[2], w.dtype[2], off[2], w.imm[2]);
        C t = ld<C>(w.base[3], w.dtype[3], off[3], w.imm[3]);
        C pw = ld<C>(w.base[4], w.dtype[4], off[4], w.imm[4]);
        st<C>(w.base[0], w.dtype[0], off[0], bce_logits_grad<C>(wrt, g, v, t, pw));
    }
}

// addc_k: operands dst, x, a, b; dst may be x.
template <typename C, typename I>
__device__ __forceinline__ void addc_k(const Walk &w, int op, C value) {
    GRID_STRIDE(I, i, w.size) {
        I off[4];
        offsets<4, I>(w, i, off);
        C x = ld<C>(w.base[1], w.dtype[1], off[1], w.imm[1]);
        C a = ld<C>(w.base[2], w.dtype[2], off[2], w.imm[2]);
        C b = ld<C>(w.base[3], w.dtype[3], off[3], w.imm[3]);
        st<C>(w.base[0], w.dtype[0], off[0], addc_fn<C>(op, x, a, b, value));
    }
}

// Entry points: NAME_<compute>_<index>. F64: the same with double and the suffix f64.
#define EW_KERNELS(C, CN, I, IN)                                                                         \
    KERNEL unary_##CN##_##IN(Walk w, int op) { unary_k<C, I>(w, op); }                                   \
    KERNEL unary_backward_##CN##_##IN(Walk w, int op) { unary_backward_k<C, I>(w, op); }                 \
    KERNEL binary_##CN##_##IN(Walk w, int op) { binary_k<C, I>(w, op); }                                 \
    KERNEL binary_backward_##CN##_##IN(Walk w, int op, int wrt) { binary_backward_k<C, I>(w, op, wrt); } \
    KERNEL axpy_##CN##_##IN(Walk w, C alpha) { axpy_k<C, I>(w, alpha); }                                 \
    KERNEL dropout_##CN##_##IN(Walk w, C scale) { dropout_k<C, I>(w, scale); }                           \
    KERNEL bce_##CN##_##IN(Walk w, ErrorFlag *flag, unsigned int seq) { bce_k<C, I>(w, flag, seq); }     \
    KERNEL bce_backward_##CN##_##IN(Walk w, int wrt) { bce_backward_k<C, I>(w, wrt); }                   \
    KERNEL bce_logits_##CN##_##IN(Walk w) { bce_logits_k<C, I>(w); }                                     \
    KERNEL bce_logits_backward_##CN##_##IN(Walk w, int wrt) { bce_logits_backward_k<C, I>(w, wrt); }     \
    KERNEL addc_##CN##_##IN(Walk w, int op, C value) { addc_k<C, I>(w, op, value); }

EW_KERNELS(float, f32, int, i32)
EW_KERNELS(float, f32, long long, i64)
