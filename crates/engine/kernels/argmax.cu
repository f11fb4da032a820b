// Greedy sampling on the device: each row's index of its largest value, the lowest index among
// equal maxima (NaN never wins; a row with no number gives 0), one block of NT threads per row.
// candle's argmax walks the row in one block through 64-bit strided indexing; on the H200 that took
// 125 µs of a 1.6 ms decode step at Qwen2's 151 936 logits (docs/MEASUREMENTS.md).
#include "common.cuh"

// Whether (v, i) beats (best, at): larger, or as large at a lower index.
__device__ __forceinline__ bool beats(float v, unsigned int i, float best, unsigned int at) {
    return v > best || (v == best && i < at);
}

// The warp's best (value, index), in every lane.
__device__ __forceinline__ void warp_best(float& best, unsigned int& at) {
    for (int o = 16; o > 0; o >>= 1) {
        float ov = __shfl_xor_sync(0xffffffffu, best, o);
        unsigned int oi = __shfl_xor_sync(0xffffffffu, at, o);
        if (beats(ov, oi, best, at)) {
            best = ov;
            at = oi;
        }
    }
}

template <int A> __device__ void argmax_rows(unsigned int* out, const void* x, unsigned int n) {
    __shared__ float wv[32];
    __shared__ unsigned int wi[32];
    unsigned int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    unsigned long long base = (unsigned long long)blockIdx.x * n;
    float best = NEG_INF;
    unsigned int at = 0xffffffffu;
    // UN loads in flight a thread; a thread's indices rise, so `>` keeps its first maximum.
    constexpr unsigned int UN = 16;
    for (unsigned int i0 = tid; i0 < n; i0 += UN * blockDim.x) {
        float v[UN];
#pragma unroll
        for (unsigned int k = 0; k < UN; k++) {
            unsigned int i = i0 + k * blockDim.x;
            v[k] = i < n ? ld<A>(x, base + i) : NEG_INF;
        }
#pragma unroll
        for (unsigned int k = 0; k < UN; k++) {
            if (v[k] > best) {
                best = v[k];
                at = i0 + k * blockDim.x;
            }
        }
    }
    warp_best(best, at);
    if (lane == 0) {
        wv[warp] = best;
        wi[warp] = at;
    }
    __syncthreads();
    if (warp != 0) return;
    unsigned int nw = blockDim.x >> 5;
    best = lane < nw ? wv[lane] : NEG_INF;
    at = lane < nw ? wi[lane] : 0xffffffffu;
    warp_best(best, at);
    if (lane == 0) out[blockIdx.x] = at == 0xffffffffu ? 0u : at;
}

#define QE_ARGMAX(a, ac)                                                                      \
    extern "C" __global__ void __launch_bounds__(NT, 1)                                      \
            argmax_##a(unsigned int* out, const void* x, unsigned int n) {                    \
        argmax_rows<ac>(out, x, n);                                                           \
    }
QE_FOR_DTYPES(QE_ARGMAX)
