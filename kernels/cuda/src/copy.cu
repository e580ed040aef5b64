// copy.cu: Copy (any type to any type, any layout, broadcasting the source) and Fill,
// converting as kernels/cpu's copy.go: the same type copies the bits; integer to
// integer goes through int64 and wraps (to Bool: x != 0); everything else goes through
// the compute type, double when either side is F64 (copy_f64_*: F64 to F16 or BF16
// rounds once), float otherwise, and float to integer truncates, saturates and sends
// NaN to 0.
#include "common.cuh"

__device__ __forceinline__ bool is_int(int dt) { return dt == DT_I32 || dt == DT_I64 || dt == DT_BOOL; }

__device__ __forceinline__ int dt_size(int dt) {
    switch (dt) {
    case DT_F16:
    case DT_BF16: return 2;
    case DT_F32:
    case DT_I32: return 4;
    case DT_I64:
    case DT_F64: return 8;
    }
    return 1;
}

__device__ __forceinline__ long long ld_int(unsigned long long base, int dt, long long i) {
    switch (dt) {
    case DT_I32: return ((const int *)base)[i];
    case DT_I64: return ((const long long *)base)[i];
    }
    return ((const unsigned char *)base)[i];
}

__device__ __forceinline__ void st_int(unsigned long long base, int dt, long long i, long long v) {
    switch (dt) {
    case DT_I32: ((int *)base)[i] = (int)v; return;
    case DT_I64: ((long long *)base)[i] = v; return;
    }
    ((unsigned char *)base)[i] = v != 0;
}

// st_any stores a float value into any type.
template <typename C>
__device__ __forceinline__ void st_any(unsigned long long base, int dt, long long i, C v) {
    switch (dt) {
    case DT_I32: ((int *)base)[i] = (int)f64_to_int((double)v, -2147483648LL, 2147483647LL); return;
    case DT_I64: ((long long *)base)[i] = f64_to_int((double)v, (-9223372036854775807LL - 1), 9223372036854775807LL); return;
    case DT_BOOL: ((unsigned char *)base)[i] = v != 0; return;
    }
    st<C>(base, dt, i, v);
}

template <typename C, typename I>
__device__ __forceinline__ void copy_k(const Walk &w) {
    int dd = w.dtype[0], ds = w.dtype[1];
    GRID_STRIDE(I, i, w.size) {
        I off[2];
        offsets<2, I>(w, i, off);
        if (dd == ds) {
            switch (dt_size(dd)) {
            case 1: ((unsigned char *)w.base[0])[off[0]] = ((const unsigned char *)w.base[1])[off[1]]; break;
            case 2: ((unsigned short *)w.base[0])[off[0]] = ((const unsigned short *)w.base[1])[off[1]]; break;
            case 4: ((unsigned int *)w.base[0])[off[0]] = ((const unsigned int *)w.base[1])[off[1]]; break;
            default: ((unsigned long long *)w.base[0])[off[0]] = ((const unsigned long long *)w.base[1])[off[1]];
            }
        } else if (is_int(dd) && is_int(ds)) {
            st_int(w.base[0], dd, off[0], ld_int(w.base[1], ds, off[1]));
        } else {
            st_any<C>(w.base[0], dd, off[0], ld<C>(w.base[1], ds, off[1], 0));
        }
    }
}

// fill_k writes the bit pattern bits (the value already converted to the output's type
// by the host, exactly as kernels/cpu.Fill converts it) to every element.
template <typename I>
__device__ __forceinline__ void fill_k(const Walk &w, unsigned long long bits) {
    int size = dt_size(w.dtype[0]);
    GRID_STRIDE(I, i, w.size) {
        I off[1];
        offsets<1, I>(w, i, off);
        switch (size) {
        case 1: ((unsigned char *)w.base[0])[off[0]] = (unsigned char)bits; break;
        case 2: ((unsigned short *)w.base[0])[off[0]] = (unsigned short)bits; break;
        case 4: ((unsigned int *)w.base[0])[off[0]] = (unsigned int)bits; break;
        default: ((unsigned long long *)w.base[0])[off[0]] = bits;
        }
    }
}

KERNEL copy_f32_i32(Walk w) { copy_k<float, int>(w); }
KERNEL copy_f32_i64(Walk w) { copy_k<float, long long>(w); }
KERNEL copy_f64_i32(Walk w) { copy_k<double, int>(w); }
KERNEL copy_f64_i64(Walk w) { copy_k<double, long long>(w); }
KERNEL fill_i32(Walk w, unsigned long long bits) { fill_k<int>(w, bits); }
KERNEL fill_i64(Walk w, unsigned long long bits) { fill_k<long long>(w, bits); }
