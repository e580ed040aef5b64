// Test kernels for package cuda. kernels.ptx beside this file is nvcc's output, made on
// the GPU machine with:
//
//	nvcc -ptx -arch=compute_75 -o kernels.ptx kernels.cu
//
// (compute_75 is the oldest target CUDA 13's nvcc accepts; the driver JIT-compiles the
// PTX for the GPU it runs on.)

// fill_u32 sets dst[0:n] to value.
extern "C" __global__ void fill_u32(unsigned int *dst, unsigned int value, unsigned long long n) {
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = value;
}

// axpy_f32 computes y = a*x + y over n floats.
extern "C" __global__ void axpy_f32(float a, const float *x, float *y, unsigned long long n) {
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

// wait_flag spins until *flag is non-zero or timeout_ns have passed on the GPU's global
// timer, then writes 1 to *seen if it saw the flag, else 0. Launched with one thread, it
// holds its stream until the host writes the flag through another stream, so tests can
// observe events that have not completed yet.
extern "C" __global__ void wait_flag(const volatile unsigned int *flag, unsigned long long timeout_ns, unsigned int *seen) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        if (*flag != 0) {
            *seen = 1;
            return;
        }
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < timeout_ns);
    *seen = 0;
}
