// elementwise.cu: the elementwise family: Unary, UnaryBackward, Binary,
// BinaryBackward, Axpy, Dropout (apply), the binary cross-entropy losses and their
// gradients, and Addc, over a Walk (broadcasting, any strides, any float or integer
// input types, a float output). One thread per output element, the grid striding; I is
// the index type (int when every offset fits in 31 bits).
#include "math.cuh"

// map_vec is map_k over 16-byte words of the output's type DT (vec_width gave its
// width, every dense operand of that type): word v of the output is in row
// v / (inner / width); an operand repeated along the inner dimension (or an immediate)
// is read once per word.
template <int N, int DT, typename C, typename I, typename F>
__device__ __forceinline__ void map_vec(const Walk &w, F f) {
    using V = vtype<DT>;
    constexpr int VEC = V::n;
    int in = w.rank - 1;
    I cv = (I)w.shape[in] / VEC, nv = (I)w.size / VEC;
    bool rep[N - 1];
#pragma unroll
    for (int k = 1; k < N; k++) rep[k - 1] = w.dtype[k] == DT_IMM || w.stride[k][in] == 0;
    GRID_STRIDE(I, v, nv) {
        I r = in == 1 ? v / cv : 0;
        I c = (v - r * cv) * VEC;
        uint4 x[N - 1];
        C one[N - 1];
#pragma unroll
        for (int k = 1; k < N; k++) {
            I row = in == 1 ? r * (I)w.stride[k][0] : 0;
            if (rep[k - 1]) one[k - 1] = ld<C>(w.base[k], w.dtype[k], row, w.imm[k]);
            else x[k - 1] = ((const uint4 *)w.base[k])[(row + c) / VEC];
        }
        uint4 o;
#pragma unroll
        for (int e = 0; e < VEC; e++) {
            C a[N - 1];
#pragma unroll
            for (int k = 1; k < N; k++) a[k - 1] = rep[k - 1] ? one[k - 1] : V::template get<C>(x[k - 1], e);
            V::template set<C>(o, e, f(a));
        }
        I row = in == 1 ? r * (I)w.stride[0][0] : 0;
        ((uint4 *)w.base[0])[(row + c) / VEC] = o;
    }
}

// map_k is the loop of every kernel here: for each output element (operand 0), f gets
// the values of operands 1..N-1 as the compute type and returns the element's value.
// A walk the operands of which are dense along its inner dimension goes 16 bytes at a
// time (map_vec); another of one dimension U elements a thread per round, without
// division: UNROLL, or half as many for the five-operand kernel, whose registers would
// not hold more.
template <int N, typename C, typename I, typename F>
__device__ __forceinline__ void map_k(const Walk &w, F f) {
    constexpr int U = N >= 5 ? UNROLL / 2 : UNROLL;
    if constexpr (sizeof(C) == 4) { // float compute: 16-byte words where the operands allow
        if (vec_width(w, N, true) != 0) {
            switch (w.dtype[0]) {
            case DT_F32: map_vec<N, DT_F32, C, I>(w, f); return;
            case DT_F16: map_vec<N, DT_F16, C, I>(w, f); return;
            case DT_BF16: map_vec<N, DT_BF16, C, I>(w, f); return;
            }
        }
    }
    if (w.rank == 1) {
        I n = (I)w.size, s[N];
#pragma unroll
        for (int k = 0; k < N; k++) s[k] = (I)w.stride[k][0];
        for (I base = (I)blockIdx.x * (BLOCK * U); base < n; base += (I)gridDim.x * (BLOCK * U)) {
            C v[U][N - 1];
#pragma unroll
            for (int u = 0; u < U; u++) {
                I i = base + u * BLOCK + threadIdx.x;
                if (i < n) {
#pragma unroll
                    for (int k = 1; k < N; k++) v[u][k - 1] = ld<C>(w.base[k], w.dtype[k], i * s[k], w.imm[k]);
                }
            }
#pragma unroll
            for (int u = 0; u < U; u++) {
                I i = base + u * BLOCK + threadIdx.x;
                if (i < n) st<C>(w.base[0], w.dtype[0], i * s[0], f(v[u]));
            }
        }
        return;
    }
    GRID_STRIDE(I, i, w.size) {
        I off[N];
        offsets<N, I>(w, i, off);
        C v[N - 1];
#pragma unroll
        for (int k = 1; k < N; k++) v[k - 1] = ld<C>(w.base[k], w.dtype[k], off[k], w.imm[k]);
        st<C>(w.base[0], w.dtype[0], off[0], f(v));
    }
}

// The ops a training step runs most, ReLU and its gradient, Add and Mul, get loops of
// their own, compiled for that one op: the switch over every op would cost a dozen
// instructions an element, which a kernel moving 16 bytes per thread and round cannot
// hide. The other ops share one loop and its switch, as do the float64 and 64-bit index
// variants (hot is false), where the copies would only grow the fatbin.
template <typename C, typename I> constexpr bool hot = sizeof(C) == 4 && sizeof(I) == 4;
template <typename C, typename I>
__device__ __forceinline__ void unary_k(const Walk &w, int op) {
    if constexpr (hot<C, I>) {
        if (op == OP_RELU) {
            map_k<2, C, I>(w, [&](const C *v) { return unary_fn<C>(OP_RELU, v[0]); });
            return;
        }
    }
    map_k<2, C, I>(w, [&](const C *v) { return unary_fn<C>(op, v[0]); });
}

// unary_backward_k: operands dx, g, saved.
template <typename C, typename I>
__device__ __forceinline__ void unary_backward_k(const Walk &w, int op) {
    if constexpr (hot<C, I>) {
        if (op == OP_RELU) {
            map_k<3, C, I>(w, [&](const C *v) { return unary_grad<C>(OP_RELU, v[0], v[1]); });
            return;
        }
    }
    map_k<3, C, I>(w, [&](const C *v) { return unary_grad<C>(op, v[0], v[1]); });
}

template <typename C, typename I>
__device__ __forceinline__ void binary_k(const Walk &w, int op) {
    if constexpr (hot<C, I>) {
        switch (op) {
        case OP_ADD: map_k<3, C, I>(w, [&](const C *v) { return binary_fn<C>(OP_ADD, v[0], v[1]); }); return;
        case OP_MUL: map_k<3, C, I>(w, [&](const C *v) { return binary_fn<C>(OP_MUL, v[0], v[1]); }); return;
        }
    }
    map_k<3, C, I>(w, [&](const C *v) { return binary_fn<C>(op, v[0], v[1]); });
}

// binary_backward_k: operands dst, g, a, b.
template <typename C, typename I>
__device__ __forceinline__ void binary_backward_k(const Walk &w, int op, int wrt) {
    map_k<4, C, I>(w, [&](const C *v) { return binary_grad<C>(op, wrt, v[0], v[1], v[2]); });
}

// axpy_k: dst += alpha·x; operand 1 is dst itself.
template <typename C, typename I>
__device__ __forceinline__ void axpy_k(const Walk &w, C alpha) {
    map_k<3, C, I>(w, [&](const C *v) { return v[0] + alpha * v[1]; });
}

// dropout_k: x·scale where the Bool mask (operand 2) is 1, 0 where it is 0.
template <typename C, typename I>
__device__ __forceinline__ void dropout_k(const Walk &w, C scale) {
    map_k<3, C, I>(w, [&](const C *v) { return v[1] == 0 ? (C)0 : v[0] * scale; });
}

// bce_k: BinaryCrossEntropy of x (operand 1) against y (2). Every loss is written, as
// kernels/cpu writes them; the x outside [0, 1] or NaN are counted and reported as a
// range error of the launch (seq).
template <typename C, typename I>
__device__ __forceinline__ void bce_k(const Walk &w, ErrorFlag *flag, unsigned int seq) {
    unsigned long long bad = 0;
    map_k<3, C, I>(w, [&](const C *v) {
        if (!(v[0] >= (C)0 && v[0] <= (C)1)) bad++;
        return bce_fn<C>(v[0], v[1]);
    });
    report_outside(flag, seq, ERR_BINARY_CROSS_ENTROPY, bad);
}

// bce_backward_k: operands dst, g, x, y.
template <typename C, typename I>
__device__ __forceinline__ void bce_backward_k(const Walk &w, int wrt) {
    map_k<4, C, I>(w, [&](const C *v) { return bce_grad<C>(wrt, v[0], v[1], v[2]); });
}

// bce_logits_k: operands dst, x, y, pw (an immediate 1 for none).
template <typename C, typename I>
__device__ __forceinline__ void bce_logits_k(const Walk &w) {
    map_k<4, C, I>(w, [&](const C *v) { return bce_logits_fn<C>(v[0], v[1], v[2]); });
}

// bce_logits_backward_k: operands dst, g, x, y, pw: the one kernel with MAX_OPS operands
// (for ARG_B y is an immediate: its derivative does not read it).
template <typename C, typename I>
__device__ __forceinline__ void bce_logits_backward_k(const Walk &w, int wrt) {
    map_k<5, C, I>(w, [&](const C *v) { return bce_logits_grad<C>(wrt, v[0], v[1], v[2], v[3]); });
}

// addc_k: operands dst, x, a, b; dst may be x.
template <typename C, typename I>
__device__ __forceinline__ void addc_k(const Walk &w, int op, C value) {
    map_k<4, C, I>(w, [&](const C *v) { return addc_fn<C>(op, v[0], v[1], v[2], value); });
}

// Entry points: NAME_<compute>_<index>, compute f32 or f64, index i32 or i64.
#define EW_KERNELS(C, CN, I, IN)                                                                         \
    KERNEL unary_##CN##_##IN(Walk w, int op) { unary_k<C, I>(w, op); }                                   \
    KERNEL unary_backward_##CN##_##IN(Walk w, int op) { unary_backward_k<C, I>(w, op); }                 \
    KERNEL binary_##CN##_##IN(Walk w, int op) { binary_k<C, I>(w, op); }                                 \
    KERNEL binary_backward_##CN##_##IN(Walk w, int op, int wrt) { binary_backward_k<C, I>(w, op, wrt); } \
    KERNEL axpy_##CN##_##IN(Walk w, C alpha) { axpy_k<C, I>(w, alpha); }                                 \
    KERNEL dropout_##CN##_##IN(Walk w, C scale) { dropout_k<C, I>(w, scale); }                           \
    KERNEL_ROOM bce_##CN##_##IN(Walk w, ErrorFlag *flag, unsigned int seq) { bce_k<C, I>(w, flag, seq); }\
    KERNEL bce_backward_##CN##_##IN(Walk w, int wrt) { bce_backward_k<C, I>(w, wrt); }                   \
    KERNEL bce_logits_##CN##_##IN(Walk w) { bce_logits_k<C, I>(w); }                                     \
    KERNEL_ROOM bce_logits_backward_##CN##_##IN(Walk w, int wrt) { bce_logits_backward_k<C, I>(w, wrt); }\
    KERNEL addc_##CN##_##IN(Walk w, int op, C value) { addc_k<C, I>(w, op, value); }

EW_KERNELS(float, f32, int, i32)
EW_KERNELS(float, f32, long long, i64)
EW_KERNELS(double, f64, int, i32)
EW_KERNELS(double, f64, long long, i64)

// gelu_tanh_k is Unary(GeluTanh) over nw contiguous 16-byte words of 16-bit elements of
// S, in and out of the same type: the op compiled alone (unary_k's switch over ops costs
// a dozen instructions an element, which 8 elements a word cannot hide), the results
// rounded in pairs (pack2). The same float arithmetic as unary_k's, so the same bits.
// On an H100 it moves 95% of the memcpy rate where unary_f32_i32 moved 61-75%.
template <typename S>
__device__ __forceinline__ void gelu_tanh_k(const uint4 *__restrict__ src, uint4 *__restrict__ dst, int nw) {
    map_words<GELU_U>(src, nw, [&](int i, const uint4 &x) {
        float r[8];
        unpack4<S>(r, make_uint2(x.x, x.y));
        unpack4<S>(r + 4, make_uint2(x.z, x.w));
#pragma unroll
        for (int e = 0; e < 8; e++) r[e] = unary_fn<float>(OP_GELU_TANH, r[e]);
        dst[i] = make_uint4(pack2<S>(r[0], r[1]), pack2<S>(r[2], r[3]), pack2<S>(r[4], r[5]), pack2<S>(r[6], r[7]));
    });
}

KERNEL gelu_tanh_f16(const uint4 *__restrict__ src, uint4 *__restrict__ dst, int nw) { gelu_tanh_k<f16_t>(src, dst, nw); }
KERNEL gelu_tanh_bf16(const uint4 *__restrict__ src, uint4 *__restrict__ dst, int nw) { gelu_tanh_k<bf16_t>(src, dst, nw); }
