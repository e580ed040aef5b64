// compare.cu: the comparison family: Compare (a Bool result from two operands of any
// types, compared in the type they promote to), Where (a selection by a Bool condition,
// into a float output over the compute type C, or into an integer or Bool one) and the
// exact integer Sum (an I64 output from integer or Bool elements), over a Walk as the
// elementwise family's kernels. One thread per element, the grid striding; I is the
// index type (int when every offset fits in 31 bits).
#include "common.cuh"

// Comparison ops: package kernels' CompareOp values (kernels/cuda's
// TestCompareCodesMatch checks them).
#define CMP_EQ 1
#define CMP_NE 2
#define CMP_LT 3
#define CMP_LE 4
#define CMP_GT 5
#define CMP_GE 6

// ld_int reads element i of an integer or Bool operand of type dt at base exactly; an
// immediate reads imm, an integer the host checked.
__device__ __forceinline__ long long ld_int(unsigned long long base, int dt, long long i, double imm) {
    switch (dt) {
    case DT_I32: return ((const int *)base)[i];
    case DT_I64: return ((const long long *)base)[i];
    case DT_BOOL: return ((const unsigned char *)base)[i];
    }
    return (long long)imm;
}

// st_int writes v as element i of an integer or Bool operand of type dt, as
// kernels/cpu's storeInts converts: I32 wraps, Bool is v != 0.
__device__ __forceinline__ void st_int(unsigned long long base, int dt, long long i, long long v) {
    switch (dt) {
    case DT_I32: ((int *)base)[i] = (int)v; return;
    case DT_I64: ((long long *)base)[i] = v; return;
    case DT_BOOL: ((unsigned char *)base)[i] = v != 0; return;
    }
}

// round_to rounds v once to the floating type dt, as package dtype's Round does.
__device__ __forceinline__ double round_to(int dt, double v) {
    switch (dt) {
    case DT_F32: return (double)(float)v;
    case DT_F16: return (double)f16_to_f32(to_f16(v));
    case DT_BF16: return (double)bf16_to_f32(to_bf16(v));
    }
    return v;
}

template <typename T>
__device__ __forceinline__ bool cmp(int op, T a, T b) {
    switch (op) {
    case CMP_EQ: return a == b;
    case CMP_NE: return a != b;
    case CMP_LT: return a < b;
    case CMP_LE: return a <= b;
    case CMP_GT: return a > b;
    }
    return a >= b;
}

// compare_k: operands dst (Bool), a, b, compared in type in (kernels.CompareType):
// DT_I64 exactly, a floating type after rounding each value to it once.
template <typename I>
__device__ __forceinline__ void compare_k(const Walk &w, int op, int in) {
    GRID_STRIDE(I, i, w.size) {
        I off[3];
        offsets<3, I>(w, i, off);
        bool r;
        if (in == DT_I64) {
            r = cmp(op, ld_int(w.base[1], w.dtype[1], off[1], w.imm[1]), ld_int(w.base[2], w.dtype[2], off[2], w.imm[2]));
        } else {
            double a = round_to(in, ld<double>(w.base[1], w.dtype[1], off[1], w.imm[1]));
            double b = round_to(in, ld<double>(w.base[2], w.dtype[2], off[2], w.imm[2]));
            r = cmp(op, a, b);
        }
        ((unsigned char *)w.base[0])[off[0]] = r;
    }
}

// where_k: operands dst (float), cond, a, b, read as the compute type C; only the
// operand selected is read. (No operand is picked by a run-time index into the Walk:
// that would copy it to a stack frame.)
template <typename C, typename I>
__device__ __forceinline__ void where_k(const Walk &w) {
    GRID_STRIDE(I, i, w.size) {
        I off[4];
        offsets<4, I>(w, i, off);
        bool a = ld<C>(w.base[1], w.dtype[1], off[1], w.imm[1]) != (C)0;
        st<C>(w.base[0], w.dtype[0], off[0], a ? ld<C>(w.base[2], w.dtype[2], off[2], w.imm[2]) : ld<C>(w.base[3], w.dtype[3], off[3], w.imm[3]));
    }
}

// where_int_k: operands dst (integer or Bool), cond, a, b (integer or Bool).
template <typename I>
__device__ __forceinline__ void where_int_k(const Walk &w) {
    GRID_STRIDE(I, i, w.size) {
        I off[4];
        offsets<4, I>(w, i, off);
        bool a = ld_int(w.base[1], w.dtype[1], off[1], w.imm[1]) != 0;
        st_int(w.base[0], w.dtype[0], off[0], a ? ld_int(w.base[2], w.dtype[2], off[2], w.imm[2]) : ld_int(w.base[3], w.dtype[3], off[3], w.imm[3]));
    }
}

// sum_int_k: operands src (integer or Bool; the walk is over its shape) and dst (I64,
// zeroed by the host, broadcast over the reduced dimensions): each element is added to
// its output. Integer addition wraps and commutes, so the atomics give the same bits in
// any order.
template <typename I>
__device__ __forceinline__ void sum_int_k(const Walk &w) {
    GRID_STRIDE(I, i, w.size) {
        I off[2];
        offsets<2, I>(w, i, off);
        long long v = ld_int(w.base[0], w.dtype[0], off[0], 0);
        atomicAdd((unsigned long long *)w.base[1] + off[1], (unsigned long long)v);
    }
}

// Entry points: NAME_<index> for the kernels over integers or a runtime type,
// where_<compute>_<index> for the float selection.
#define CMP_KERNELS(I, IN)                                                              \
    KERNEL compare_##IN(Walk w, int op, int in) { compare_k<I>(w, op, in); }           \
    KERNEL where_int_##IN(Walk w) { where_int_k<I>(w); }                               \
    KERNEL sum_int_##IN(Walk w) { sum_int_k<I>(w); }                                   \
    KERNEL where_f32_##IN(Walk w) { where_k<float, I>(w); }                            \
    KERNEL where_f64_##IN(Walk w) { where_k<double, I>(w); }

CMP_KERNELS(int, i32)
CMP_KERNELS(long long, i64)
