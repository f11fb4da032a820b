// In-place writes of the static decode step that need no dtype: K/V rows into the cache at the
// device position (16- or 32-bit words: F16/BF16 or F32), and the position counter's increment.
#include "common.cuh"

template <typename W> __device__ void kv_write(W* cache, const W* src, const unsigned int* pos,
        unsigned int rows, unsigned int s, unsigned int ctx, unsigned int d) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * s * d) return;
    unsigned int e = i % d, rj = i / d, j = rj % s, r = rj / s;
    unsigned int p = pos[0] + j;
    if (p >= ctx) return;
    cache[((unsigned long long)r * ctx + p) * d + e] = src[i];
}
extern "C" __global__ void kv_write_u16(unsigned short* cache, const unsigned short* src,
        const unsigned int* pos, unsigned int rows, unsigned int s, unsigned int ctx,
        unsigned int d) {
    kv_write(cache, src, pos, rows, s, ctx, d);
}
extern "C" __global__ void kv_write_u32(unsigned int* cache, const unsigned int* src,
        const unsigned int* pos, unsigned int rows, unsigned int s, unsigned int ctx,
        unsigned int d) {
    kv_write(cache, src, pos, rows, s, ctx, d);
}
extern "C" __global__ void add_u32(unsigned int* x, unsigned int n, unsigned int len) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < len) x[i] += n;
}
