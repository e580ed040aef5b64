// copy.cu: Copy (any type to any type, any layout, broadcasting the source) and Fill,
// converting as kernels/cpu's copy.go: the same type copies the bits; integer to
// integer goes through int64 and wraps (to Bool: x != 0); everything else goes through
// the compute type, double when either side is F64 (copy_f64_*: F64 to F16 or BF16
// rounds once), float otherwise, and float to integer truncates, saturates and sends
// NaN to 0.
#include "common.cuh"

__device__ __forceinline__ bool is_int(int dt) { return dt == DT_I32 || dt == DT_I64 || dt == DT_BOOL; }


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

// ld_bits and st_bits move the size bytes of element i as they are.
__device__ __forceinline__ unsigned long long ld_bits(unsigned long long base, int size, long long i) {
    switch (size) {
    case 1: return ((const unsigned char *)base)[i];
    case 2: return ((const unsigned short *)base)[i];
    case 4: return ((const unsigned int *)base)[i];
    }
    return ((const unsigned long long *)base)[i];
}

__device__ __forceinline__ void st_bits(unsigned long long base, int size, long long i, unsigned long long v) {
    switch (size) {
    case 1: ((unsigned char *)base)[i] = (unsigned char)v; return;
    case 2: ((unsigned short *)base)[i] = (unsigned short)v; return;
    case 4: ((unsigned int *)base)[i] = (unsigned int)v; return;
    }
    ((unsigned long long *)base)[i] = v;
}

// copy_one copies the element at src offset from into dst offset to.
template <typename C, typename I>
__device__ __forceinline__ void copy_one(const Walk &w, int dd, int ds, I to, I from) {
    if (dd == ds) {
        int size = elem_size(dd);
        st_bits(w.base[0], size, to, ld_bits(w.base[1], size, from));
    } else if (is_int(dd) && is_int(ds)) {
        st_int(w.base[0], dd, to, ld_int(w.base[1], ds, from));
    } else {
        st_any<C>(w.base[0], dd, to, ld<C>(w.base[1], ds, from, 0));
    }
}

// copy_vec copies 8 elements at a time over a dense walk of one dimension (copy_k
// checked it), for 4- or 2-byte types (SI bytes in, SO out): SI/2 and SO/2 16-byte
// words per 8 elements, converted as copy_one converts them.
template <int SI, int SO, typename C, typename I>
__device__ __forceinline__ void copy_vec(const Walk &w) {
    constexpr int WI = SI / 2, WO = SO / 2, PI = 16 / SI, PO = 16 / SO; // words, and elements per word
    int dd = w.dtype[0], ds = w.dtype[1];
    I nv = (I)w.size / 8;
    GRID_STRIDE(I, v, nv) {
        uint4 x[WI], o[WO];
#pragma unroll
        for (int j = 0; j < WI; j++) x[j] = ((const uint4 *)w.base[1])[v * WI + j];
        if (dd == ds) {
#pragma unroll
            for (int j = 0; j < WO; j++) o[j] = x[j];
        } else {
#pragma unroll
            for (int e = 0; e < 8; e++) vset<C>(o[e / PO], dd, e % PO, vget<C>(x[e / PI], ds, e % PI));
        }
#pragma unroll
        for (int j = 0; j < WO; j++) ((uint4 *)w.base[0])[v * WO + j] = o[j];
    }
}

// copy_vec_sizes returns SI·10+SO for a walk copy_vec can take (one dense dimension of
// a multiple of 8 elements, both blocks 16-byte aligned, 4- or 2-byte floats or I32
// unconverted), else 0.
__device__ __forceinline__ int copy_vec_sizes(const Walk &w) {
    int si = elem_size(w.dtype[1]), so = elem_size(w.dtype[0]);
    bool floats = w.dtype[0] != DT_I32 && w.dtype[1] != DT_I32;
    if (w.rank != 1 || w.stride[0][0] != 1 || w.stride[1][0] != 1 || w.size % 8 != 0 || ((w.base[0] | w.base[1]) & 15) != 0 ||
        (si != 2 && si != 4) || (so != 2 && so != 4) || !(floats || w.dtype[0] == w.dtype[1]))
        return 0;
    return si * 10 + so;
}

template <typename C, typename I>
__device__ __forceinline__ void copy_k(const Walk &w) {
    if constexpr (sizeof(C) == 4) {
        switch (copy_vec_sizes(w)) {
        case 44: copy_vec<4, 4, C, I>(w); return;
        case 42: copy_vec<4, 2, C, I>(w); return;
        case 24: copy_vec<2, 4, C, I>(w); return;
        case 22: copy_vec<2, 2, C, I>(w); return;
        }
    }
    int dd = w.dtype[0], ds = w.dtype[1];
    if (w.rank == 1) { // UNROLL elements a thread per round, loaded before stored (as map_k)
        I n = (I)w.size, sd = (I)w.stride[0][0], ss = (I)w.stride[1][0];
        bool same = dd == ds, ints = is_int(dd) && is_int(ds);
        int size = elem_size(dd);
        for (I base = (I)blockIdx.x * (BLOCK * UNROLL); base < n; base += (I)gridDim.x * (BLOCK * UNROLL)) {
            if (same) {
                unsigned long long v[UNROLL];
#pragma unroll
                for (int u = 0; u < UNROLL; u++) {
                    I i = base + u * BLOCK + threadIdx.x;
                    if (i < n) v[u] = ld_bits(w.base[1], size, i * ss);
                }
#pragma unroll
                for (int u = 0; u < UNROLL; u++) {
                    I i = base + u * BLOCK + threadIdx.x;
                    if (i < n) st_bits(w.base[0], size, i * sd, v[u]);
                }
            } else if (!ints) {
                C v[UNROLL];
#pragma unroll
                for (int u = 0; u < UNROLL; u++) {
                    I i = base + u * BLOCK + threadIdx.x;
                    if (i < n) v[u] = ld<C>(w.base[1], ds, i * ss, 0);
                }
#pragma unroll
                for (int u = 0; u < UNROLL; u++) {
                    I i = base + u * BLOCK + threadIdx.x;
                    if (i < n) st_any<C>(w.base[0], dd, i * sd, v[u]);
                }
            } else {
#pragma unroll
                for (int u = 0; u < UNROLL; u++) {
                    I i = base + u * BLOCK + threadIdx.x;
                    if (i < n) copy_one<C, I>(w, dd, ds, i * sd, i * ss);
                }
            }
        }
        return;
    }
    GRID_STRIDE(I, i, w.size) {
        I off[2];
        offsets<2, I>(w, i, off);
        copy_one<C, I>(w, dd, ds, off[0], off[1]);
    }
}

// fill_k writes the bit pattern bits (the value already converted to the output's type
// by the host, exactly as kernels/cpu.Fill converts it) to every element.
template <typename I>
__device__ __forceinline__ void fill_k(const Walk &w, unsigned long long bits) {
    int size = elem_size(w.dtype[0]);
    if (w.rank == 1) { // UNROLL elements a thread per round, without division (as map_k)
        I n = (I)w.size, sd = (I)w.stride[0][0];
        for (I base = (I)blockIdx.x * (BLOCK * UNROLL); base < n; base += (I)gridDim.x * (BLOCK * UNROLL)) {
#pragma unroll
            for (int u = 0; u < UNROLL; u++) {
                I i = base + u * BLOCK + threadIdx.x;
                if (i < n) st_bits(w.base[0], size, i * sd, bits);
            }
        }
        return;
    }
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

// transpose_k copies a walk of two dimensions [R, C] whose output is dense along C and
// whose source is dense along R (a transposed view made contiguous) in tiles of
// TILE×TILE elements E through shared memory, so that both the reads and the writes
// of a warp are consecutive; the element-wise walk would read one element per 32-byte
// sector. The same type: the bits move as they are.
template <typename E>
__device__ __forceinline__ void transpose_k(const Walk &w) {
    __shared__ E tile[TILE][TILE + 1]; // +1: a column of the tile spreads over the banks
    long long R = w.shape[0], C = w.shape[1], sd = w.stride[0][0], ss = w.stride[1][1];
    const E *src = (const E *)w.base[1];
    E *dst = (E *)w.base[0];
    int tx = threadIdx.x % TILE, ty = threadIdx.x / TILE;
    long long tilesR = (R + TILE - 1) / TILE, tiles = tilesR * ((C + TILE - 1) / TILE);
    for (long long t = blockIdx.x; t < tiles; t += gridDim.x) {
        long long r0 = (t % tilesR) * TILE, c0 = (t / tilesR) * TILE;
        for (int k = ty; k < TILE; k += BLOCK / TILE) {
            long long r = r0 + tx, c = c0 + k;
            if (r < R && c < C) tile[k][tx] = src[r + c * ss];
        }
        __syncthreads();
        for (int k = ty; k < TILE; k += BLOCK / TILE) {
            long long r = r0 + k, c = c0 + tx;
            if (r < R && c < C) dst[r * sd + c] = tile[tx][k];
        }
        __syncthreads();
    }
}

// unit returns 32-bit word i of x (i a constant once unrolled), read without a pointer
// into x, so that x stays in registers.
__device__ __forceinline__ unsigned unit(const uint4 &x, int i) { return i == 0 ? x.x : i == 1 ? x.y : i == 2 ? x.z : x.w; }

// st_word stores the 16-byte word x at p, one instruction: nvcc 11.8 split a uint4
// store of four values gathered one by one into four 4-byte stores.
__device__ __forceinline__ void st_word(void *p, const uint4 &x) {
    asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(x.x), "r"(x.y), "r"(x.z), "r"(x.w) : "memory");
}

// transpose_words_k is transpose_k for 4-byte elements where the tiles' edges are
// whole 16-byte words (the host checks R, C and both strides are multiples of V = 4
// elements and both blocks 16-byte aligned): every global load and store moves a word.
// A tile is TC columns c of 128 bytes along r (TR elements); a warp loads 4 columns of
// 8 words, each thread its NR words, and stores rows of TC/V words, RL rows a warp's
// lanes take in turn (RL = 4: 128 bytes of each row a store). A block loads its next
// tile's words before it stores the current tile, so that its loads are in flight
// while it stores (91.8% of a copy against 83.4% on an H100). The row pitch of smem is
// TR elements and one 4-byte word, so that both the stores into and the gathers out of
// it spread over the banks. The bits move as they are.
template <int TC>
__device__ __forceinline__ void transpose_words_k(const Walk &w, unsigned char *smem) {
    using E = unsigned;
    constexpr int V = 4, TR = 32, P = TR + 1, RL = 4;
    constexpr int WR = TR / V, WC = TC / V, NR = TC * WR / BLOCK, NW = TR * WC / BLOCK;
    static_assert(NR * BLOCK == TC * WR && NW * BLOCK == TR * WC && BLOCK % (RL * WC) == 0, "a tile is whole rounds of the block");
    E(*tile)[P] = (E(*)[P])smem;
    long long R = w.shape[0], C = w.shape[1], sd = w.stride[0][0], ss = w.stride[1][1];
    const E *src = (const E *)w.base[1];
    E *dst = (E *)w.base[0];
    unsigned tilesR = (unsigned)((R + TR - 1) / TR), tiles = tilesR * (unsigned)((C + TC - 1) / TC);
    uint4 x[NR];
    auto load = [&](unsigned t) { // tile t's words into x, zeros past the tiles and the edges
        long long r0 = (long long)(t % tilesR) * TR, c0 = (long long)(t / tilesR) * TC;
#pragma unroll
        for (int i = 0; i < NR; i++) {
            int k = threadIdx.x + i * BLOCK, c = k / WR, r = (k % WR) * V;
            x[i] = make_uint4(0, 0, 0, 0);
            if (t < tiles && r0 + r < R && c0 + c < C) x[i] = *(const uint4 *)(src + (c0 + c) * ss + r0 + r);
        }
    };
    load(blockIdx.x);
    for (unsigned t = blockIdx.x; t < tiles; t += gridDim.x) {
        long long r0 = (long long)(t % tilesR) * TR, c0 = (long long)(t / tilesR) * TC;
#pragma unroll
        for (int i = 0; i < NR; i++) {
            int k = threadIdx.x + i * BLOCK, c = k / WR, r = (k % WR) * V;
#pragma unroll
            for (int j = 0; j < V; j++) tile[c][r + j] = unit(x[i], j);
        }
        __syncthreads();
        load(t + gridDim.x);
#pragma unroll
        for (int i = 0; i < NW; i++) {
            int k = threadIdx.x + i * BLOCK, r = k % RL + k / (RL * WC) * RL, c = k / RL % WC * V;
            uint4 o = make_uint4(tile[c][r], tile[c + 1][r], tile[c + 2][r], tile[c + 3][r]);
            if (r0 + r < R && c0 + c < C) st_word(dst + (r0 + r) * sd + c0 + c, o);
        }
        __syncthreads();
    }
}

// transpose_units_k is transpose_words_k's counterpart for 2-byte elements E (the host
// checks the same, V = 8; scripts/gpu/mb/gkcopy.cu also runs it for 4-byte E, one
// column a unit): the tile, TR = 128 bytes of elements r by TC columns c, is held in
// shared memory in the output's layout, in 32-bit units of U = 4/sizeof(E) adjacent
// columns. A thread loads the words of U adjacent columns at the same V elements r,
// packs element j of each into one unit (a byte permute) and stores V units; an output
// word is then 4 units, one 16-byte load from shared memory: 10 shared-memory
// instructions for two 16-bit words where scattering and gathering them element by
// element took 32 (on an H100, [65536,1024].T: 92.6% of a copy against 88.5%, both
// with the prefetch; main's kernel 64%). Unit u of row r sits at u ^ 4·((r/V)%8), so
// that both a warp's unit stores (8 rows V apart, 4 units) and the 16-byte loads of a
// row's 8 lanes spread over the banks. A block loads its next tile's words before it
// stores the current tile. The bits move as they are.
template <typename E, int TC>
__device__ __forceinline__ void transpose_units_k(const Walk &w, unsigned char *smem) {
    constexpr int V = 16 / sizeof(E), U = 4 / sizeof(E), TR = 128 / sizeof(E);
    constexpr int WR = TR / V, WU = TC / U, WC = TC / V, NL = WR * WU / BLOCK, NW = TR * WC / BLOCK;
    static_assert(WR == 8 && NL * BLOCK == WR * WU && NW * BLOCK == TR * WC, "a tile is whole rounds of the block");
    unsigned(*tile)[WU] = (unsigned(*)[WU])smem;
    long long R = w.shape[0], C = w.shape[1], sd = w.stride[0][0], ss = w.stride[1][1];
    const E *src = (const E *)w.base[1];
    E *dst = (E *)w.base[0];
    unsigned tilesR = (unsigned)((R + TR - 1) / TR), tiles = tilesR * (unsigned)((C + TC - 1) / TC);
    uint4 x[NL][U];
    auto load = [&](unsigned t) { // tile t's words into x, zeros past the tiles and the edges
        long long r0 = (long long)(t % tilesR) * TR, c0 = (long long)(t / tilesR) * TC;
#pragma unroll
        for (int i = 0; i < NL; i++) {
            int k = threadIdx.x + i * BLOCK, r = k % WR * V, c = k / WR * U;
#pragma unroll
            for (int u = 0; u < U; u++) {
                x[i][u] = make_uint4(0, 0, 0, 0);
                if (t < tiles && r0 + r < R && c0 + c < C) x[i][u] = *(const uint4 *)(src + (c0 + c + u) * ss + r0 + r);
            }
        }
    };
    load(blockIdx.x);
    for (unsigned t = blockIdx.x; t < tiles; t += gridDim.x) {
        long long r0 = (long long)(t % tilesR) * TR, c0 = (long long)(t / tilesR) * TC;
#pragma unroll
        for (int i = 0; i < NL; i++) {
            int k = threadIdx.x + i * BLOCK, rw = k % WR, q = k / WR;
#pragma unroll
            for (int j = 0; j < V; j++) {
                unsigned v;
                if constexpr (U == 2) v = __byte_perm(unit(x[i][0], j / 2), unit(x[i][1], j / 2), j % 2 ? 0x7632 : 0x5410);
                else v = unit(x[i][0], j);
                tile[rw * V + j][q ^ (rw << 2)] = v;
            }
        }
        __syncthreads();
        load(t + gridDim.x);
#pragma unroll
        for (int i = 0; i < NW; i++) {
            int k = threadIdx.x + i * BLOCK, g = k % WC, r = k / WC;
            uint4 o = *(const uint4 *)&tile[r][4 * (g ^ (r / V % 8))];
            if (r0 + r < R && c0 + g * V < C) *(uint4 *)(dst + (r0 + r) * sd + c0 + g * V) = o;
        }
        __syncthreads();
    }
}

// copy_transpose_words is copy_transpose for walks whose tiles' edges are whole 16-byte
// words, in tiles of TWORDS_COLS columns: the same shared memory for 2- and 4-byte
// elements.
KERNEL copy_transpose_words(Walk w) {
    __shared__ uint4 smem[TWORDS_COLS * (128 + 4) / 16];
    if (elem_size(w.dtype[0]) == 2) transpose_units_k<unsigned short, TWORDS_COLS>(w, (unsigned char *)smem);
    else transpose_words_k<TWORDS_COLS>(w, (unsigned char *)smem);
}

KERNEL copy_transpose(Walk w) {
    switch (elem_size(w.dtype[0])) {
    case 1: transpose_k<unsigned char>(w); return;
    case 2: transpose_k<unsigned short>(w); return;
    case 4: transpose_k<unsigned int>(w); return;
    }
    transpose_k<unsigned long long>(w);
}

// cast_k converts n4·4 contiguous 16-bit elements of S to float32: 8-byte loads of 4
// elements and 16-byte stores, so that each load and each store of a warp covers one
// contiguous span. Entry points of its own: inside copy_k it took copy_k's registers and
// spilled; here it moves an H100's memcpy rate where copy_k's 16-byte words moved 87%.
template <typename S>
__device__ __forceinline__ void cast_k(const uint2 *__restrict__ src, float4 *__restrict__ dst, int n4) {
    map_words<CAST_U>(src, n4, [&](int i, const uint2 &x) {
        float v[4];
        unpack4<S>(v, x);
        dst[i] = make_float4(v[0], v[1], v[2], v[3]);
    });
}

KERNEL cast_to_f32_f16(const uint2 *__restrict__ src, float4 *__restrict__ dst, int n4) { cast_k<f16_t>(src, dst, n4); }
KERNEL cast_to_f32_bf16(const uint2 *__restrict__ src, float4 *__restrict__ dst, int n4) { cast_k<bf16_t>(src, dst, n4); }
KERNEL copy_f32_i32(Walk w) { copy_k<float, int>(w); }
KERNEL copy_f32_i64(Walk w) { copy_k<float, long long>(w); }
KERNEL copy_f64_i32(Walk w) { copy_k<double, int>(w); }
KERNEL copy_f64_i64(Walk w) { copy_k<double, long long>(w); }
KERNEL fill_i32(Walk w, unsigned long long bits) { fill_k<int>(w, bits); }
KERNEL fill_i64(Walk w, unsigned long long bits) { fill_k<long long>(w, bits); }
