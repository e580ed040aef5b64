// optim.cu: the fused optimizer steps SGD and Adam (AdamW), elementwise over contiguous
// F32 or F64 parameters, one tensor a launch or a list of them (OptimList), with
// kernels/cpu's optim.go formulas; the host computes the bias corrections in double
// exactly as kernels/cpu does and passes every hyper-parameter rounded to T, the
// parameters' element and compute type.
#include "math.cuh"

// sgd_at and adam_at update element i: the single-tensor and the multi-tensor kernels
// run the same code, so every element gets the same bits from either.
template <typename T>
__device__ __forceinline__ void sgd_at(T *p, const T *g, T *buf, long long i, T lr, T momentum, T dampening, T wd, int nesterov, int first) {
    T d = g[i];
    if (wd != 0) d += wd * p[i];
    if (momentum != 0) {
        T b = first ? d : momentum * buf[i] + ((T)1 - dampening) * d;
        buf[i] = b;
        d = nesterov ? d + momentum * b : b;
    }
    p[i] -= lr * d;
}

template <typename T>
__device__ __forceinline__ void adam_at(T *p, const T *g, T *m, T *v, long long i, T b1, T b2, T omb1, T omb2, T eps, T wd, T stepSize, T rbc2, T decay, int decoupled) {
    T d = g[i];
    if (!decoupled && wd != 0) d += wd * p[i];
    T mi = b1 * m[i] + omb1 * d;
    T vi = b2 * v[i] + omb2 * d * d;
    m[i] = mi;
    v[i] = vi;
    p[i] = p[i] * decay - stepSize * mi / (c_sqrt(vi) * rbc2 + eps);
}

template <typename T>
__device__ __forceinline__ void sgd_k(T *p, const T *g, T *buf, long long n, T lr, T momentum, T dampening, T wd, int nesterov, int first) {
    GRID_STRIDE(long long, i, n) { sgd_at<T>(p, g, buf, i, lr, momentum, dampening, wd, nesterov, first); }
}

template <typename T>
__device__ __forceinline__ void adam_k(T *p, const T *g, T *m, T *v, long long n, T b1, T b2, T omb1, T omb2, T eps, T wd, T stepSize, T rbc2, T decay, int decoupled) {
    GRID_STRIDE(long long, i, n) { adam_at<T>(p, g, m, v, i, b1, b2, omb1, omb2, eps, wd, stepSize, rbc2, decay, decoupled); }
}

// The multi-tensor steps: the blocks stride over the list's chunks (common.cuh).
template <typename T> __device__ __forceinline__ void sgd_multi_k(const OptimList &l, T lr, T momentum, T dampening, T wd, int nesterov) {
    for (long long c = blockIdx.x; c < l.chunk[l.count]; c += gridDim.x) {
        int i;
        long long lo, hi;
        list_chunk(l, c, i, lo, hi);
        T *p = (T *)l.p[i], *buf = (T *)l.s0[i];
        const T *g = (const T *)l.g[i];
        int first = l.first[i];
#pragma unroll 1
        for (long long j = lo + threadIdx.x; j < hi; j += BLOCK) sgd_at<T>(p, g, buf, j, lr, momentum, dampening, wd, nesterov, first);
    }
}

template <typename T> __device__ __forceinline__ void adam_multi_k(const OptimList &l, T b1, T b2, T omb1, T omb2, T eps, T wd, T decay, int decoupled) {
    for (long long c = blockIdx.x; c < l.chunk[l.count]; c += gridDim.x) {
        int i;
        long long lo, hi;
        list_chunk(l, c, i, lo, hi);
        T *p = (T *)l.p[i], *m = (T *)l.s0[i], *v = (T *)l.s1[i];
        const T *g = (const T *)l.g[i];
        T stepSize = (T)l.stepSize[i], rbc2 = (T)l.rbc2[i];
#pragma unroll 1
        for (long long j = lo + threadIdx.x; j < hi; j += BLOCK) adam_at<T>(p, g, m, v, j, b1, b2, omb1, omb2, eps, wd, stepSize, rbc2, decay, decoupled);
    }
}

#define OPTIM_KERNELS(T, TN)                                                                                                                 \
    KERNEL sgd_##TN(T *p, const T *g, T *buf, long long n, T lr, T momentum, T dampening, T wd, int nesterov, int first) {                      \
        sgd_k<T>(p, g, buf, n, lr, momentum, dampening, wd, nesterov, first);                                                                  \
    }                                                                                                                                          \
    KERNEL adam_##TN(T *p, const T *g, T *m, T *v, long long n, T b1, T b2, T omb1, T omb2, T eps, T wd, T stepSize, T rbc2, T decay,           \
                     int decoupled) {                                                                                                          \
        adam_k<T>(p, g, m, v, n, b1, b2, omb1, omb2, eps, wd, stepSize, rbc2, decay, decoupled);                                               \
    }                                                                                                                                          \
    KERNEL sgd_multi_##TN(OptimList l, T lr, T momentum, T dampening, T wd, int nesterov) { sgd_multi_k<T>(l, lr, momentum, dampening, wd, nesterov); } \
    KERNEL adam_multi_##TN(OptimList l, T b1, T b2, T omb1, T omb2, T eps, T wd, T decay, int decoupled) {                                     \
        adam_multi_k<T>(l, b1, b2, omb1, omb2, eps, wd, decay, decoupled);                                                                     \
    }

OPTIM_KERNELS(float, f32)
OPTIM_KERNELS(double, f64)
