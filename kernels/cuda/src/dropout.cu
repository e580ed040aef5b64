// dropout.cu: DropoutMask, bit for bit kernels/cpu's dropout.go: element i is kept (1)
// when word i%4 of Philox4x32-10 at counter i/4 under the key seed is at least
// threshold = p·2³², dropped (0) otherwise. Thread t computes block t.
#include "common.cuh"

// philox4x32_10 is Random123's Philox4x32-10 (kernels/cpu's philox.go).
__device__ __forceinline__ uint4 philox4x32_10(uint4 c, uint2 k) {
#pragma unroll
    for (int r = 0; r < 10; r++) {
        if (r > 0) {
            k.x += 0x9E3779B9u;
            k.y += 0xBB67AE85u;
        }
        unsigned int hi0 = __umulhi(0xD2511F53u, c.x), lo0 = 0xD2511F53u * c.x;
        unsigned int hi1 = __umulhi(0xCD9E8D57u, c.z), lo1 = 0xCD9E8D57u * c.z;
        c = make_uint4(hi1 ^ c.y ^ k.x, lo1, hi0 ^ c.w ^ k.y, lo0);
    }
    return c;
}

KERNEL dropout_mask(unsigned char *mask, long long n, unsigned long long seed, unsigned long long threshold) {
    uint2 key = make_uint2((unsigned int)seed, (unsigned int)(seed >> 32));
    GRID_STRIDE(long long, b, (n + 3) / 4) {
        uint4 w = philox4x32_10(make_uint4((unsigned int)b, (unsigned int)((unsigned long long)b >> 32), 0, 0), key);
        unsigned int words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
        for (int j = 0; j < 4; j++) {
            long long i = 4 * b + j;
            if (i < n) mask[i] = (unsigned long long)words[j] >= threshold;
        }
    }
}
