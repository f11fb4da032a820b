// silu(gate)·up from the fused gate|up projection, one thread per output value.
#include "common.cuh"

template <int A> __device__ void swiglu(void* out, const void* gu, unsigned int rows,
        unsigned int inter, void* q8) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    // Whole warps return here when q8 is asked for (rows · inter is then a multiple of 32).
    if (i >= rows * inter) return;
    unsigned long long r = i / inter, j = i % inter;
    float g = ld<A>(gu, r * 2 * inter + j), u = ld<A>(gu, r * 2 * inter + inter + j);
    // silu rounded as candle's ops store its steps in A, then the product.
    float silu = rnd<A>(g / rnd<A>(1.0f + rnd<A>(expf(-g))));
    st<A>(out, i, silu * u);
    if (q8) q8_put(q8, i / 32, rnd<A>(silu * u));
}

#define QE_SWIGLU(a, ac)                                                                      \
    extern "C" __global__ void swiglu_##a(void* out, const void* gu, unsigned int rows,       \
                                          unsigned int inter, void* q8) {                     \
        swiglu<ac>(out, gu, rows, inter, q8);                                                 \
    }
QE_FOR_DTYPES(QE_SWIGLU)
