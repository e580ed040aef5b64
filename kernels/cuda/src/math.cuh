// math.cuh: the elementwise functions of sublet's ops and their derivatives, written
// with the same formulas as kernels/cpu (unary.go, binary.go, bce.go, addc.go), in its
// order of operations, so that results agree to the rounding of the math library. C is
// the compute type. The kernels are compiled with -fmad=false (gen_kernels.sh): every
// product and sum here rounds on its own, as Go's do, never fused into one FMA.
#pragma once

#include "common.cuh"

__device__ __forceinline__ float c_exp(float x) { return expf(x); }
__device__ __forceinline__ float c_log(float x) { return logf(x); }
__device__ __forceinline__ float c_log1p(float x) { return log1pf(x); }
__device__ __forceinline__ float c_sqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ float c_tanh(float x) { return tanhf(x); }
__device__ __forceinline__ float c_erf(float x) { return erff(x); }
__device__ __forceinline__ float c_pow(float x, float y) { return powf(x, y); }
__device__ __forceinline__ float c_abs(float x) { return fabsf(x); }
__device__ __forceinline__ double c_exp(double x) { return exp(x); }
__device__ __forceinline__ double c_log(double x) { return log(x); }
__device__ __forceinline__ double c_log1p(double x) { return log1p(x); }
__device__ __forceinline__ double c_sqrt(double x) { return sqrt(x); }
__device__ __forceinline__ double c_tanh(double x) { return tanh(x); }
__device__ __forceinline__ double c_erf(double x) { return erf(x); }
__device__ __forceinline__ double c_pow(double x, double y) { return pow(x, y); }
__device__ __forceinline__ double c_abs(double x) { return fabs(x); }

// c_fma is a·b + c rounded once: the one fused multiply-add a kernel asks for by name
// (the build contracts none on its own).
__device__ __forceinline__ float c_fma(float a, float b, float c) { return fmaf(a, b, c); }
__device__ __forceinline__ double c_fma(double a, double b, double c) { return fma(a, b, c); }

#define SQRT_2_OVER_PI 0.7978845608028654
#define GELU_COEF 0.044715
#define GELU_COEF3 0.134145 // 3·GELU_COEF, one constant as Go folds 3*geluCoef
#define INV_SQRT_2 0.7071067811865476
#define INV_SQRT_2PI 0.3989422804014327

// go_max and go_min are Go's max and min: NaN when either operand is, +0 above -0.
template <typename C> __device__ __forceinline__ C go_max(C x, C y) {
    if (x != x) return x;
    if (y != y) return y;
    if (x == y) return (x == 0 && signbit(x)) ? y : x;
    return x > y ? x : y;
}

template <typename C> __device__ __forceinline__ C go_min(C x, C y) {
    if (x != x) return x;
    if (y != y) return y;
    if (x == y) return (x == 0 && signbit(y)) ? y : x;
    return x < y ? x : y;
}

// gelu_minus_2u is -2u for GeluTanh's u = sqrt(2/pi)(x + 0.044715x^3).
template <typename C> __device__ __forceinline__ C gelu_minus_2u(C x) {
    return (C)-2 * (C)SQRT_2_OVER_PI * (x + (C)GELU_COEF * x * x * x);
}

// sigmoid is 1/(1 + e^-v); e^-v overflowing to +Inf gives 0.
template <typename C> __device__ __forceinline__ C sigmoid(C v) { return (C)1 / ((C)1 + c_exp(-v)); }

template <typename C> __device__ __forceinline__ C unary_fn(int op, C v) {
    switch (op) {
    case OP_NEG: return -v;
    case OP_ABS: return c_abs(v);
    case OP_EXP: return c_exp(v);
    case OP_LOG: return c_log(v);
    case OP_SQRT: return c_sqrt(v);
    case OP_TANH: return c_tanh(v);
    case OP_SIGMOID: return sigmoid(v);
    case OP_RELU: return v > 0 ? v : (v != v ? v : (C)0);
    case OP_GELU_TANH: return v / ((C)1 + c_exp(gelu_minus_2u(v))); // x·σ(2u)
    case OP_GELU_ERF: return (C)0.5 * v * ((C)1 + c_erf(v * (C)INV_SQRT_2));
    }
    return v;
}

// unary_grad is g·op'(x) where s is op's output y (op.SavesOutput) or its input x.
template <typename C> __device__ __forceinline__ C unary_grad(int op, C g, C s) {
    switch (op) {
    case OP_NEG: return -g;
    case OP_ABS: return s > 0 ? g : (s < 0 ? -g : (C)0 * g);
    case OP_EXP: return g * s;
    case OP_LOG: return g / s;
    case OP_SQRT: return g / ((C)2 * s);
    case OP_TANH: return g * ((C)1 - s * s);
    case OP_SIGMOID: return g * s * ((C)1 - s);
    case OP_RELU: return s <= 0 ? (C)0 : g; // PyTorch's threshold_backward: a NaN y passes g on
    case OP_GELU_TANH: {
        C t = (C)2 / ((C)1 + c_exp(gelu_minus_2u(s))) - (C)1; // tanh u, finite when e^-2u overflows
        C du = (C)SQRT_2_OVER_PI * ((C)1 + (C)GELU_COEF3 * s * s);
        return g * ((C)0.5 * ((C)1 + t) + (C)0.5 * s * ((C)1 - t * t) * du);
    }
    case OP_GELU_ERF: {
        C e = c_exp((C)-0.5 * s * s);
        C cdf = (C)0.5 * ((C)1 + c_erf(s * (C)INV_SQRT_2));
        return g * (cdf + s * (C)INV_SQRT_2PI * e);
    }
    }
    return g;
}

template <typename C> __device__ __forceinline__ C binary_fn(int op, C a, C b) {
    switch (op) {
    case OP_ADD: return a + b;
    case OP_SUB: return a - b;
    case OP_MUL: return a * b;
    case OP_DIV: return a / b;
    case OP_POW: return c_pow(a, b);
    case OP_MAXIMUM: return go_max(a, b);
    case OP_MINIMUM: return go_min(a, b);
    }
    return a;
}

// binary_grad is g·∂op(a,b)/∂wrt; at ties Maximum and Minimum give each side half.
template <typename C> __device__ __forceinline__ C binary_grad(int op, int wrt, C g, C a, C b) {
    switch (op) {
    case OP_ADD: return g;
    case OP_SUB: return wrt == ARG_A ? g : -g;
    case OP_MUL: return wrt == ARG_A ? g * b : g * a;
    case OP_DIV: return wrt == ARG_A ? g / b : -g * a / (b * b);
    case OP_POW:
        if (wrt == ARG_A) return b == 0 ? (C)0 * g : g * b * c_pow(a, b - (C)1);
        return (a == 0 && b >= 0) ? (C)0 * g : g * c_pow(a, b) * c_log(a);
    case OP_MAXIMUM:
    case OP_MINIMUM: {
        // p is the operand wrt, oriented so that it wins when p > q.
        C p = a, q = b;
        if ((op == OP_MAXIMUM) != (wrt == ARG_A)) p = b, q = a;
        if (p > q) return g;
        if (p == q) return g / (C)2;
        if (p < q) return (C)0;
        return p + q; // a NaN input gets a NaN gradient
    }
    }
    return g;
}

// ---- binary cross-entropy (kernels/cpu's bce.go) ------------------------------------
//
// PyTorch's formulas: BinaryCrossEntropy's logarithms are clamped at -100, so that a
// probability of exactly 0 or 1 gives a finite loss, and its input gradient divides by
// x(1-x) no smaller than 1e-12. Each line is kernels/cpu's, in its order of operations.

#define BCE_LOG_CLAMP -100
#define BCE_EPS 1e-12

// bce_fn is -(t·max(ln p, -100) + (1-t)·max(ln(1-p), -100)), as
// (t-1)·max(log1p(-p), -100) - t·max(ln p, -100).
template <typename C> __device__ __forceinline__ C bce_fn(C p, C t) {
    C l1 = go_max(c_log1p(-p), (C)BCE_LOG_CLAMP);
    C l0 = go_max(c_log(p), (C)BCE_LOG_CLAMP);
    return (t - (C)1) * l1 - t * l0;
}

// bce_grad is g·∂bce/∂wrt: g(p-t)/max((1-p)p, 1e-12) for p (ARG_A), -g·ln(p/(1-p)) for t.
template <typename C> __device__ __forceinline__ C bce_grad(int wrt, C g, C p, C t) {
    if (wrt == ARG_A) return g * (p - t) / go_max(((C)1 - p) * p, (C)BCE_EPS);
    return -g * c_log(p / ((C)1 - p));
}

// log_sigmoid is ln σ(v) = min(v, 0) - ln(1 + e^-|v|), finite for every finite v.
template <typename C> __device__ __forceinline__ C log_sigmoid(C v) {
    return go_min(v, (C)0) - c_log1p(c_exp(-c_abs(v)));
}

// pos_term is 1 + (w-1)·t, the weight of -ln σ(v) in the logits form.
template <typename C> __device__ __forceinline__ C pos_term(C t, C w) { return (w - (C)1) * t + (C)1; }

// bce_logits_fn is (1-t)·v - (1+(w-1)t)·ln σ(v), w the positive weight.
template <typename C> __device__ __forceinline__ C bce_logits_fn(C v, C t, C w) {
    return ((C)1 - t) * v - pos_term(t, w) * log_sigmoid(v);
}

// bce_logits_grad is g·∂/∂wrt of bce_logits_fn: for v (ARG_A) ((1+(w-1)t)σ(v) - w·t)·g,
// the factor rounded to C first (kernels/cpu computes it into a buffer of its compute
// type, then multiplies by g); for t g·(ln σ(-v) - w·ln σ(v)).
template <typename C> __device__ __forceinline__ C bce_logits_grad(int wrt, C g, C v, C t, C w) {
    if (wrt == ARG_A) return (pos_term(t, w) * sigmoid(v) - w * t) * g;
    return g * (log_sigmoid(-v) - w * log_sigmoid(v));
}

// ---- addcmul, addcdiv (kernels/cpu's addc.go) ---------------------------------------

// addc_fn is x + (value·a)·b (OP_MUL) or x + (value·a)/b (OP_DIV), PyTorch's order.
template <typename C> __device__ __forceinline__ C addc_fn(int op, C x, C a, C b, C value) {
    C va = value * a;
    return x + (op == OP_MUL ? va * b : va / b);
}
