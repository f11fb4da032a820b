// The rotary step row (once per step) and the per-layer K/V rotary + cache write.
#include "common.cuh"
#include "rotary.cuh"

extern "C" __global__ void rope_step(const float* table, const unsigned int* pos, float* out,
        unsigned int hd, unsigned int rows) {
    unsigned int i = threadIdx.x, p = pos[0];
    if (p >= rows) p = rows - 1;
    if (i < hd) out[i] = table[(unsigned long long)p * hd + i];
    else if (i == hd) out[i] = __uint_as_float(pos[0]);
}
// One thread per (sequence, K or V, KV head, element).
template <int A, int C> __device__ void rope_kv(void* buf, const void* qkv, const float* step,
        unsigned int b, unsigned int nh, unsigned int nkv, unsigned int hd, unsigned int ctx,
        int bias, int inter) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= b * 2 * nkv * hd) return;
    unsigned int d = i % hd, r = i / hd, kvh = r % nkv;
    r /= nkv;
    unsigned int which = r % 2, bi = r / 2;
    unsigned int pos = __float_as_uint(step[hd]);
    if (pos >= ctx) return;
    unsigned long long cache = (unsigned long long)b * nkv * ctx * hd;
    unsigned long long nq = (unsigned long long)(nh + 2 * nkv) * hd;
    unsigned long long col = (unsigned long long)(nh + which * nkv + kvh) * hd;
    unsigned long long row = bi * nq + col, brow = 2 * cache + col;
    float x = which == 0 ? rotated<A, C>(qkv, buf, row, brow, bias, step, hd, d, inter)
                         : head_elem<A, C>(qkv, buf, row, brow, bias, d);
    st<C>(buf, which * cache + (((unsigned long long)bi * nkv + kvh) * ctx + pos) * hd + d, x);
}

#define QE_ROPE_KV(a, ac, c, cc)                                                              \
    extern "C" __global__ void rope_kv_##a##_##c(void* buf, const void* qkv, const float* step, \
            unsigned int b, unsigned int nh, unsigned int nkv, unsigned int hd, unsigned int ctx, \
            int bias, int inter) {                                                             \
        rope_kv<ac, cc>(buf, qkv, step, b, nh, nkv, hd, ctx, bias, inter);                      \
    }
QE_FOR_DTYPE_PAIRS(QE_ROPE_KV)
