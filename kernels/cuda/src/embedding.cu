// embedding.cu: Embedding (gather rows of a [vocab, dim] table) and its backward, a
// scatter-add that is deterministic without float atomics (see below). Indices outside
// [0, vocab) are reported through the ErrorFlag and skipped. T is the table's element
// type, F32 or F64.
#include "common.cuh"

template <typename T>
__device__ __forceinline__ void embedding_k(T *dst, const T *w, const long long *idx, long long count, long long dim, long long vocab, ErrorFlag *flag, unsigned int seq) {
    GRID_STRIDE(long long, t, count * dim) {
        long long i = t / dim, j = t % dim;
        long long r = idx[i];
        if (r < 0 || r >= vocab) {
            if (j == 0) report(flag, seq, ERR_EMBEDDING, i, r, vocab);
            continue;
        }
        dst[t] = w[r * dim + j];
    }
}

// ---- the backward: sort, then one pass over each row's run of positions ---------------
//
// The scatter-add is made deterministic without float atomics by sorting: each index i
// becomes the key (idx[i] << 32) | i, the keys are sorted (a bitonic network: the same
// compare-and-swap steps whatever the data), and a warp per sorted position that starts
// a run of one row adds that run's rows of g into dw's row in position order, the order
// kernels/cpu adds them in, so the sums are kernels/cpu's bit for bit. The work is
// count·dim loads plus the sort's count·log²count key moves, where the former pass
// read every index once per thread (count·dim·parts loads). Keys live in the stream's
// scratch when they fit, else in a block of the caching allocator (embedding.go).

// EMB_CHUNK is how many keys one block sorts in shared memory: two per thread.
#define EMB_CHUNK (2 * BLOCK)

// EMB_SKIP is the key of a bad index and of the padding up to a power of two: sorted
// last, its row is no row.
#define EMB_SKIP 0xffffffffffffffffull

// embedding_keys writes key i of padded (a power of two, >= EMB_CHUNK) keys, reporting
// an index outside [0, vocab) (its key is EMB_SKIP).
KERNEL embedding_keys(unsigned long long *keys, const long long *idx, long long count, long long padded, long long vocab,
                      ErrorFlag *flag, unsigned int seq) {
    GRID_STRIDE(long long, i, padded) {
        unsigned long long key = EMB_SKIP;
        if (i < count) {
            long long r = idx[i];
            if (r < 0 || r >= vocab) {
                report(flag, seq, ERR_EMBEDDING_BACKWARD, i, r, vocab);
            } else {
                key = ((unsigned long long)r << 32) | (unsigned long long)i;
            }
        }
        keys[i] = key;
    }
}

// bitonic_cas is one compare-and-swap of the network: elements at a and a + j (a has
// bit j clear), into ascending order when the enclosing block of size k is ascending
// (bit k of a clear).
__device__ __forceinline__ void bitonic_cas(unsigned long long *x, long long a, long long j, long long k, long long base) {
    unsigned long long u = x[a], v = x[a + j];
    bool up = ((base + a) & k) == 0;
    if ((u > v) == up) {
        x[a] = v;
        x[a + j] = u;
    }
}

// embedding_sort_global is one step (k, j) of the network with j >= EMB_CHUNK, where a
// pair spans blocks: thread t swaps the t-th pair.
KERNEL embedding_sort_global(unsigned long long *keys, long long padded, long long k, long long j) {
    GRID_STRIDE(long long, t, padded / 2) {
        long long a = (t / j) * 2 * j + t % j;
        bitonic_cas(keys, a, j, k, 0);
    }
}

// embedding_sort_local runs the steps with j < EMB_CHUNK in shared memory, a block per
// chunk of EMB_CHUNK keys: for k = 0 every step of the network up to k = EMB_CHUNK
// (each chunk sorted, in the direction the next merge needs); else the steps j =
// EMB_CHUNK/2 .. 1 of merge k.
KERNEL embedding_sort_local(unsigned long long *keys, long long k) {
    __shared__ unsigned long long x[EMB_CHUNK];
    long long base = (long long)blockIdx.x * EMB_CHUNK;
    x[threadIdx.x] = keys[base + threadIdx.x];
    x[threadIdx.x + BLOCK] = keys[base + threadIdx.x + BLOCK];
    __syncthreads();
    long long k0 = k == 0 ? 2 : k, k1 = k == 0 ? EMB_CHUNK : k;
    for (long long kk = k0; kk <= k1; kk *= 2) {
        for (long long j = min(kk, (long long)EMB_CHUNK) / 2; j > 0; j /= 2) {
            long long t = threadIdx.x;
            bitonic_cas(x, (t / j) * 2 * j + t % j, j, kk, base);
            __syncthreads();
        }
    }
    keys[base + threadIdx.x] = x[threadIdx.x];
    keys[base + threadIdx.x + BLOCK] = x[threadIdx.x + BLOCK];
}

// embedding_backward_k: warp w takes sorted position w; if it starts a run of row r
// (the key before it is another row's), its lanes add the run's rows of g into row r
// of dw, column by column, in position order.
template <typename T>
__device__ __forceinline__ void embedding_backward_k(T *dw, const T *g, const unsigned long long *keys, long long count, long long dim) {
    long long w = ((long long)blockIdx.x * BLOCK + threadIdx.x) / 32;
    int lane = threadIdx.x & 31;
    if (w >= count) return;
    unsigned long long key = keys[w];
    if (key == EMB_SKIP) return;
    long long r = (long long)(key >> 32);
    if (w > 0 && (long long)(keys[w - 1] >> 32) == r) return;
    long long end = w + 1;
    while (end < count && keys[end] != EMB_SKIP && (long long)(keys[end] >> 32) == r) end++;
    for (long long j = lane; j < dim; j += 32) {
        T acc = dw[r * dim + j];
        for (long long q = w; q < end; q++) {
            long long i = (long long)(keys[q] & 0xffffffffull);
            acc += g[i * dim + j];
        }
        dw[r * dim + j] = acc;
    }
}

#define EMBEDDING_KERNELS(T, TN)                                                                                                            \
    KERNEL embedding_##TN(T *dst, const T *w, const long long *idx, long long count, long long dim, long long vocab, ErrorFlag *flag,          \
                          unsigned int seq) {                                                                                                 \
        embedding_k<T>(dst, w, idx, count, dim, vocab, flag, seq);                                                                            \
    }                                                                                                                                         \
    KERNEL embedding_backward_##TN(T *dw, const T *g, const unsigned long long *keys, long long count, long long dim) {                      \
        embedding_backward_k<T>(dw, g, keys, count, dim);                                                                                     \
    }

EMBEDDING_KERNELS(float, f32)
EMBEDDING_KERNELS(double, f64)
