// embedding.cu: Embedding (gather rows of a [vocab, dim] table) and its backward, a
// scatter-add that is deterministic without float atomics: each element of dw is
// owned by one thread, which adds the rows of g that land on it in index order, as
// kernels/cpu's embedding.go does. Thread t owns column t % dim of the table rows in
// part t / dim (parts of rowsPerPart rows); it reads every index (the same index for a
// whole warp, so a broadcast load) and only the rows of g it needs. Indices outside
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

template <typename T>
__device__ __forceinline__ void embedding_backward_k(T *dw, const T *g, const long long *idx, long long count, long long dim, long long vocab, long long rowsPerPart, ErrorFlag *flag, unsigned int seq) {
    long long parts = (vocab + rowsPerPart - 1) / rowsPerPart;
    GRID_STRIDE(long long, t, dim * parts) {
        long long j = t % dim, p = t / dim;
        long long lo = p * rowsPerPart, hi = lo + rowsPerPart;
        for (long long i = 0; i < count; i++) {
            long long r = idx[i];
            if (r >= lo && r < hi && r < vocab) {
                dw[r * dim + j] += g[i * dim + j];
            } else if (t == 0 && (r < 0 || r >= vocab)) {
                report(flag, seq, ERR_EMBEDDING_BACKWARD, i, r, vocab);
            }
        }
    }
}

#define EMBEDDING_KERNELS(T, TN)                                                                                                            \
    KERNEL embedding_##TN(T *dst, const T *w, const long long *idx, long long count, long long dim, long long vocab, ErrorFlag *flag,          \
                          unsigned int seq) {                                                                                                 \
        embedding_k<T>(dst, w, idx, count, dim, vocab, flag, seq);                                                                            \
    }                                                                                                                                         \
    KERNEL_ROOM embedding_backward_##TN(T *dw, const T *g, const long long *idx, long long count, long long dim, long long vocab,                   \
                                   long long rowsPerPart, ErrorFlag *flag, unsigned int seq) {                                                \
        embedding_backward_k<T>(dw, g, idx, count, dim, vocab, rowsPerPart, flag, seq);                                                       \
    }

EMBEDDING_KERNELS(float, f32)
EMBEDDING_KERNELS(double, f64)
