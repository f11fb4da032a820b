// What every kernel family shares: the dtype codes (0 F32, 1 F16, 2 BF16) and their conversions
// (halves move as 16-bit words, converted by PTX `cvt` or bit shifts: no CUDA headers, so NVRTC
// compiles this at run time as it is), loads and stores by code, warp and block reductions, and the
// Q8_1 block writer. The launch constants (NT, NS, NR, CH) come from Rust (`kernels::PRELUDE`).
#pragma once

// Every (activation, cache) dtype pair and every dtype, for the `extern "C"` instantiations: X(name
// of A, code of A, name of C, code of C) and X(name, code). Kernel names are `<family>_<a>[_<c>]`.
#define QE_FOR_DTYPE_PAIRS(X) \
    X(f32, 0, f32, 0) X(f32, 0, f16, 1) X(f32, 0, bf16, 2) \
    X(f16, 1, f32, 0) X(f16, 1, f16, 1) X(f16, 1, bf16, 2) \
    X(bf16, 2, f32, 0) X(bf16, 2, f16, 1) X(bf16, 2, bf16, 2)
// The pairs with a half cache (F16, BF16): the tensor-core kernels'.
#define QE_FOR_HALF_CACHE_PAIRS(X) \
    X(f32, 0, f16, 1) X(f32, 0, bf16, 2) X(f16, 1, f16, 1) X(f16, 1, bf16, 2) \
    X(bf16, 2, f16, 1) X(bf16, 2, bf16, 2)
#define QE_FOR_DTYPES(X) X(f32, 0) X(f16, 1) X(bf16, 2)
#define QE_FOR_HALF_DTYPES(X) X(f16, 1) X(bf16, 2)

#define NEG_INF (-__int_as_float(0x7f800000))
__device__ __forceinline__ float h2f(unsigned short h) {
    float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f;
}
__device__ __forceinline__ unsigned short f2h(float f) {
    unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h;
}
__device__ __forceinline__ float b2f(unsigned short b) {
    return __uint_as_float(((unsigned int)b) << 16);
}
__device__ __forceinline__ unsigned short f2b(float f) {
    unsigned int u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (unsigned short)(u >> 16);
}
template <int T> __device__ __forceinline__ float ld(const void* p, unsigned long long i) {
    if (T == 0) return ((const float*)p)[i];
    if (T == 1) return h2f(((const unsigned short*)p)[i]);
    return b2f(((const unsigned short*)p)[i]);
}
template <int T> __device__ __forceinline__ void st(void* p, unsigned long long i, float v) {
    if (T == 0) ((float*)p)[i] = v;
    else if (T == 1) ((unsigned short*)p)[i] = f2h(v);
    else ((unsigned short*)p)[i] = f2b(v);
}
template <int T> __device__ __forceinline__ float rnd(float v) {
    if (T == 1) return h2f(f2h(v));
    if (T == 2) return b2f(f2b(v));
    return v;
}
__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
// One Q8_1 block (ggml's block_q8_1: half2 {d, sum}, 32 int8) of the 32 values a warp holds, lane
// i value i, block `blk` of `q8`: what candle's quantize_q8_1 kernel writes from the same F32 values
// (same reductions, same division), so the MMVQ matmul reading it sees the bytes it would have.
__device__ __forceinline__ void q8_put(void* q8, unsigned long long blk, float x) {
    float amax = warp_max(fabsf(x)), sum = warp_sum(x);
    float d = amax / 127.0f;
    int q = amax == 0.0f ? 0 : (int)roundf(x / d);
    unsigned char* b = (unsigned char*)q8 + blk * 36ull;
    ((signed char*)b)[4 + (threadIdx.x & 31)] = (signed char)q;
    if ((threadIdx.x & 31) == 0) {
        ((unsigned short*)b)[0] = f2h(d);
        ((unsigned short*)b)[1] = f2h(sum);
    }
}
// Block-wide sum / max of blockDim.x (a multiple of 32, ≤ 1024) threads; every thread gets it.
__device__ float block_sum(float v, float* red) {
    unsigned int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum(v);
    if (lane == 0) red[w] = v;
    __syncthreads();
    v = lane < nw ? red[lane] : 0.0f;
    v = warp_sum(v);
    __syncthreads();
    return v;
}
__device__ float block_max(float v, float* red) {
    unsigned int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_max(v);
    if (lane == 0) red[w] = v;
    __syncthreads();
    v = lane < nw ? red[lane] : NEG_INF;
    v = warp_max(v);
    __syncthreads();
    return v;
}
