// optim.cu: the fused optimizer steps SGD and Adam (AdamW), elementwise over contiguous
// F32 or F64 parameters, one tensor a launch or a list of them (OptimList), with
// kernels/cpu's optim.go formulas; the host computes the bias corrections in double
// exactly as kernels/cpu does and passes every hyper-parameter rounded to T, the
// parameters' element and compute type. The capturable Adam (adam_multi_capturable,
// then adam_count) reads the learning rate and each parameter's step count on the
// device instead and computes the same corrections there, with Go's math.Pow
// arithmetic (go_pow), so that a step recorded in a CUDA graph replays with the counts
// of the moment it runs and gives the host-counted step's bits.
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

// adam_list_k runs adam_at over every chunk of l with the step size and 1/√(1-β2^t)
// that corrections(i, stepSize, rbc2) gives entry i.
template <typename T, typename F>
__device__ __forceinline__ void adam_list_k(const OptimList &l, T b1, T b2, T omb1, T omb2, T eps, T wd, T decay, int decoupled, F corrections) {
    for (long long c = blockIdx.x; c < l.chunk[l.count]; c += gridDim.x) {
        int i;
        long long lo, hi;
        list_chunk(l, c, i, lo, hi);
        T *p = (T *)l.p[i], *m = (T *)l.s0[i], *v = (T *)l.s1[i];
        const T *g = (const T *)l.g[i];
        T stepSize, rbc2;
        corrections(i, stepSize, rbc2);
#pragma unroll 1
        for (long long j = lo + threadIdx.x; j < hi; j += BLOCK) adam_at<T>(p, g, m, v, j, b1, b2, omb1, omb2, eps, wd, stepSize, rbc2, decay, decoupled);
    }
}

template <typename T> __device__ __forceinline__ void adam_multi_k(const OptimList &l, T b1, T b2, T omb1, T omb2, T eps, T wd, T decay, int decoupled) {
    adam_list_k<T>(l, b1, b2, omb1, omb2, eps, wd, decay, decoupled, [&](int i, T &stepSize, T &rbc2) {
        stepSize = (T)l.stepSize[i];
        rbc2 = (T)l.rbc2[i];
    });
}

// go_pow is x^n for 0 <= x < 1 and n >= 1 as Go's math.Pow computes it for an
// integral exponent, operation for operation (math/pow.go: the mantissa squared
// repeatedly, powers of two kept apart, then Ldexp), so that the device's bias
// corrections have the bits kernels/cpu's have. -fmad=false keeps each product rounded
// on its own, as Go on amd64 rounds it. Frexp and Ldexp are written on the bits, as
// Go's are (CUDA's frexp and ldexp would take a stack frame).
__device__ __forceinline__ double go_pow(double x, long long n) {
    const long long expMask = 0x7ffLL << 52;
    if (n == 1) return x;
    if (x == 0) return 0;
    // Frexp: x = x1·2^xe with x1 in [0.5, 1); a subnormal x is scaled up first.
    int shift = 0;
    if ((__double_as_longlong(x) & expMask) == 0) {
        x *= 4503599627370496.0; // 2^52
        shift = 52;
    }
    long long xb = __double_as_longlong(x);
    int xe = (int)((xb & expMask) >> 52) - 1022 - shift;
    double x1 = __longlong_as_double((xb & ~expMask) | (1022LL << 52));
    double a1 = 1;
    int ae = 0;
#pragma unroll 1
    for (long long i = n; i != 0; i >>= 1) {
        if (xe < -(1 << 12) || (1 << 12) < xe) { // the result underflows: Ldexp gives 0
            ae += xe;
            break;
        }
        if (i & 1) {
            a1 *= x1;
            ae += xe;
        }
        x1 *= x1;
        xe <<= 1;
        if (x1 < .5) {
            x1 += x1;
            xe--;
        }
    }
    // Ldexp(a1, ae): a1 is normal and below 1; e is the result's biased exponent.
    long long ab = __double_as_longlong(a1);
    long long e = ((ab & expMask) >> 52) + ae;
    if (e >= 1) return __longlong_as_double((ab & ~expMask) | (e << 52));
    if (e < -52) return 0;
    return __longlong_as_double((ab & ~expMask) | ((e + 53) << 52)) * 1.1102230246251565e-16; // subnormal: ·2^-53, rounded once
}

// adam_multi_capturable_k is adam_multi_k with each entry's step size, 1/√(1-β2^t) and
// AdamW's decay computed from *lr and its count steps[l.first[i]] (the entry's slot; the
// field is SGD's first-step flag otherwise) plus one, in double as kernels/cpu's
// AdamStep computes them, then rounded to T. The counts are not written here:
// adam_count adds the step to them once every block has read them.
template <typename T>
__device__ __forceinline__ void adam_multi_capturable_k(const OptimList &l, const double *lr, const double *steps, T b1, T b2, T omb1, T omb2, T eps, T wd,
                                                        double beta1, double beta2, double wd64, int decoupled) {
    double rate = *lr;
    T decay = decoupled ? (T)(1 - rate * wd64) : (T)1;
    adam_list_k<T>(l, b1, b2, omb1, omb2, eps, wd, decay, decoupled, [&](int i, T &stepSize, T &rbc2) {
        long long t = (long long)steps[l.first[i]] + 1;
        stepSize = (T)(rate / (1 - go_pow(beta1, t)));
        rbc2 = (T)(1 / sqrt(1 - go_pow(beta2, t)));
    });
}

// adam_count adds one update to the count of every entry of l (a thread per entry; the
// slots are distinct), after adam_multi_capturable has read them.
KERNEL adam_count(OptimList l, double *steps) {
    int i = blockIdx.x * BLOCK + threadIdx.x;
    if (i < l.count) steps[l.first[i]] += 1;
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
    }                                                                                                                                          \
    KERNEL adam_multi_capturable_##TN(OptimList l, const double *lr, const double *steps, T b1, T b2, T omb1, T omb2, T eps, T wd, double beta1,  \
                                      double beta2, double wd64, int decoupled) {                                                              \
        adam_multi_capturable_k<T>(l, lr, steps, b1, b2, omb1, omb2, eps, wd, beta1, beta2, wd64, decoupled);                                   \
    }

OPTIM_KERNELS(float, f32)
OPTIM_KERNELS(double, f64)
