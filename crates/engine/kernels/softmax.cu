// The prefill's causal softmax: scale, mask and softmax of one attention score row in one pass
// over memory, where candle's ops wrote the (rows, keys) scores three more times (scale, masked
// add, softmax). Query i of a chunk sees key j iff j ≤ pos + i, pos read from the device.
#include "common.cuh"

template <int A> __device__ void causal_softmax(void* out, const void* att, const unsigned int* pos,
        unsigned int queries, unsigned int keys, float scale) {
    __shared__ float red[32];
    unsigned long long base = (unsigned long long)blockIdx.x * keys;
    unsigned int i = blockIdx.x % queries;
    unsigned int seen = min(pos[0] + i + 1, keys);
    // Scaled as the eager models store it, in A, before the softmax.
    float m = NEG_INF;
    for (unsigned int j = threadIdx.x; j < seen; j += blockDim.x)
        m = fmaxf(m, rnd<A>(ld<A>(att, base + j) * scale));
    m = block_max(m, red);
    float l = 0.0f;
    for (unsigned int j = threadIdx.x; j < seen; j += blockDim.x)
        l += expf(rnd<A>(ld<A>(att, base + j) * scale) - m);
    l = block_sum(l, red);
    for (unsigned int j = threadIdx.x; j < keys; j += blockDim.x)
        st<A>(out, base + j, j < seen ? expf(rnd<A>(ld<A>(att, base + j) * scale) - m) / l : 0.0f);
}

#define QE_CAUSAL_SOFTMAX(a, ac)                                                              \
    extern "C" __global__ void __launch_bounds__(NS) causal_softmax_##a(                   \
            void* out, const void* att, const unsigned int* pos, unsigned int queries,        \
            unsigned int keys, float scale) {                                                 \
        causal_softmax<ac>(out, att, pos, queries, keys, scale);                              \
    }
QE_FOR_DTYPES(QE_CAUSAL_SOFTMAX)
