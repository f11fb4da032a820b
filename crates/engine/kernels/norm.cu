// Residual add and the RMSNorm after it, one block per row.
#include "common.cuh"

// One block per row (blockDim.x threads, at most NT). Rows up to NR · blockDim.x wide are read
// once, every load issued before the first store (in flight together: a single block is
// latency-bound), and kept in registers; wider rows take a second pass over the inputs.
template <int A> __device__ void add_rms_norm(void* out, const void* a, const void* r,
        const void* w, unsigned int rows, unsigned int h, float eps, void* q8) {
    __shared__ float red[32];
    unsigned long long row = blockIdx.x, n = (unsigned long long)rows * h, o = row * h;
    const unsigned int nt = blockDim.x;
    float ss = 0.0f;
    if (h <= NR * nt) {
        float xs[NR], ws[NR];
#pragma unroll
        for (int j = 0; j < NR; j++) {
            unsigned int e = threadIdx.x + j * nt;
            xs[j] = e < h ? ld<A>(a, o + e) + ld<A>(r, o + e) : 0.0f;
            ws[j] = e < h ? ld<A>(w, e) : 0.0f;
        }
#pragma unroll
        for (int j = 0; j < NR; j++) {
            unsigned int e = threadIdx.x + j * nt;
            xs[j] = rnd<A>(xs[j]);
            if (e < h) st<A>(out, o + e, xs[j]);
            ss += xs[j] * xs[j];
        }
        float inv = rsqrtf(block_sum(ss, red) / (float)h + eps);
#pragma unroll
        for (int j = 0; j < NR; j++) {
            unsigned int e = threadIdx.x + j * nt;
            // Whole warps: with q8, h is a multiple of 32.
            if (e < h) {
                st<A>(out, n + o + e, xs[j] * inv * ws[j]);
                if (q8) q8_put(q8, (o + e) / 32, rnd<A>(xs[j] * inv * ws[j]));
            }
        }
        return;
    }
    for (unsigned int e = threadIdx.x; e < h; e += nt) {
        float x = rnd<A>(ld<A>(a, o + e) + ld<A>(r, o + e));
        st<A>(out, o + e, x);
        ss += x * x;
    }
    float inv = rsqrtf(block_sum(ss, red) / (float)h + eps);
    for (unsigned int e = threadIdx.x; e < h; e += nt) {
        float x = rnd<A>(ld<A>(a, o + e) + ld<A>(r, o + e));
        st<A>(out, n + o + e, x * inv * ld<A>(w, e));
        if (q8) q8_put(q8, (o + e) / 32, rnd<A>(x * inv * ld<A>(w, e)));
    }
}

#define QE_ADD_RMS_NORM(a, ac)                                                                \
    extern "C" __global__ void __launch_bounds__(NT, 1) add_rms_norm_##a(                    \
            void* out, const void* a_, const void* r, const void* w, unsigned int rows,       \
            unsigned int h, float eps, void* q8) {                                            \
        add_rms_norm<ac>(out, a_, r, w, rows, h, eps, q8);                                    \
    }
QE_FOR_DTYPES(QE_ADD_RMS_NORM)
