// Test kernel for ArgBytes and LoadFatbin. args.fatbin beside this file is nvcc's
// output (any nvcc >= 11.8):
//
//	nvcc -fatbin -arch=compute_80 -code=sm_80,sm_90,compute_80 -o args.fatbin args.cu

// Small and large are passed by value; the Go test lays out the same bytes.
struct Small {
    int n;
    float x;
};

struct Large {
    unsigned long long dst;
    int count;
    int pad;
    float vals[250];
    double d;
};

// struct_args writes, into the floats at l.dst: vals[0:count] * scale, then s.n, s.x,
// l.d and tail, so that every argument's bytes are checked.
extern "C" __global__ void struct_args(struct Small s, struct Large l, float scale, unsigned long long tail) {
    float *dst = (float *)l.dst;
    int i = threadIdx.x;
    if (i < l.count) dst[i] = l.vals[i] * scale;
    if (i == 0) {
        dst[l.count] = (float)s.n;
        dst[l.count + 1] = s.x;
        dst[l.count + 2] = (float)l.d;
        dst[l.count + 3] = (float)tail;
    }
}
