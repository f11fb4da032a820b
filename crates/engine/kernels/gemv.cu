// A float projection at one row: a warp per output row (opt-in, `QE_GEMV=1`).
#include "common.cuh"

// One warp per output row of w (n, k) · x (k): 16-byte non-coherent loads of 8 elements of the row
// and of x per lane and step, F32 accumulation, one rounding. T: 1 = F16, 2 = BF16.
__device__ __forceinline__ void ld4(const void* p, unsigned int& a, unsigned int& b,
                                    unsigned int& c, unsigned int& d) {
    asm("ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(a), "=r"(b), "=r"(c), "=r"(d) : "l"(p));
}
template <int T> __device__ __forceinline__ float lo16(unsigned int v) {
    return T == 1 ? h2f((unsigned short)(v & 0xffffu)) : b2f((unsigned short)(v & 0xffffu));
}
template <int T> __device__ __forceinline__ float hi16(unsigned int v) {
    return T == 1 ? h2f((unsigned short)(v >> 16)) : b2f((unsigned short)(v >> 16));
}
template <int T> __device__ void gemv(void* out, const void* w, const void* x, unsigned int n,
                                      unsigned int k) {
    const unsigned int row = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const unsigned int lane = threadIdx.x & 31u;
    if (row >= n) return;
    const unsigned short* wr = (const unsigned short*)w + (unsigned long long)row * k;
    const unsigned short* xv = (const unsigned short*)x;
    float acc = 0.f;
    #pragma unroll 4
    for (unsigned int i = lane * 8u; i < k; i += 256u) {
        unsigned int a[4], b[4];
        ld4(wr + i, a[0], a[1], a[2], a[3]);
        ld4(xv + i, b[0], b[1], b[2], b[3]);
        #pragma unroll
        for (int j = 0; j < 4; ++j) {
            acc += lo16<T>(a[j]) * lo16<T>(b[j]);
            acc += hi16<T>(a[j]) * hi16<T>(b[j]);
        }
    }
    acc = warp_sum(acc);
    if (lane == 0) st<T>(out, row, acc);
}

#define QE_GEMV(a, ac)                                                                        \
    extern "C" __global__ void gemv_##a(void* out, const void* w, const void* x,              \
                                        unsigned int n, unsigned int k) {                     \
        gemv<ac>(out, w, x, n, k);                                                            \
    }
QE_FOR_HALF_DTYPES(QE_GEMV)
