// optim.cu: the fused optimizer steps SGD and Adam (AdamW), elementwise over contiguous
// F32 or F64 parameters with kernels/cpu's optim.go formulas; the host computes the
// bias corrections in double exactly as kernels/cpu does and passes every
// hyper-parameter rounded to T, the parameters' element and compute type.
#include "math.cuh"

template <typename T>
__device__ __forceinline__ void sgd_k(T *p, const T *g, T *buf, long long n, T lr, T momentum, T dampening, T wd, int nesterov, int first) {
    GRID_STRIDE(long long, i, n) {
        T d = g[i];
        if (wd != 0) d += wd * p[i];
        if (momentum != 0) {
            T b = first ? d : momentum * buf[i] + ((T)1 - dampening) * d;
            buf[i] = b;
            d = nesterov ? d + momentum * b : b;
        }
        p[i] -= lr * d;
    }
}

template <typename T>
__device__ __forceinline__ void adam_k(T *p, const T *g, T *m, T *v, long long n, T b1, T b2, T omb1, T omb2, T eps, T wd, T stepSize, T rbc2, T decay, int decoupled) {
    GRID_STRIDE(long long, i, n) {
        T d = g[i];
        if (!decoupled && wd != 0) d += wd * p[i];
        T mi = b1 * m[i] + omb1 * d;
        T vi = b2 * v[i] + omb2 * d * d;
        m[i] = mi;
        v[i] = vi;
        p[i] = p[i] * decay - stepSize * mi / (c_sqrt(vi) * rbc2 + eps);
    }
}

#define OPTIM_KERNELS(T, TN)                                                                                                                 \
    KERNEL sgd_##TN(T *p, const T *g, T *buf, long long n, T lr, T momentum, T dampening, T wd, int nesterov, int first) {                      \
        sgd_k<T>(p, g, buf, n, lr, momentum, dampening, wd, nesterov, first);                                                                  \
    }                                                                                                                                          \
    KERNEL adam_##TN(T *p, const T *g, T *m, T *v, long long n, T b1, T b2, T omb1, T omb2, T eps, T wd, T stepSize, T rbc2, T decay,           \
                     int decoupled) {                                                                                                          \
        adam_k<T>(p, g, m, v, n, b1, b2, omb1, omb2, eps, wd, stepSize, rbc2, decay, decoupled);                                               \
    }

OPTIM_KERNELS(float, f32)
OPTIM_KERNELS(double, f64)
