// A head row's element with its bias, and rotated by the step's (cos | sin) row: what RoPE, the KV
// write and attention's query all read, rounded as candle's eager ops round them.
#pragma once
#include "common.cuh"

// Element d of a head row x (bias added, rounded to A as the eager linear stores it).
template <int A, int C> __device__ float head_elem(const void* qkv, const void* buf,
        unsigned long long row, unsigned long long brow, int bias, unsigned int d) {
    if (!bias) return ld<A>(qkv, row + d);
    return rnd<A>(ld<A>(qkv, row + d) + ld<C>(buf, brow + d));
}
// Element d of that row rotated by the step row (cos | sin) as candle's rope / rope_i do in A:
// each product and the sum rounded to A.
template <int A, int C> __device__ float rotated(const void* qkv, const void* buf,
        unsigned long long row, unsigned long long brow, int bias, const float* step,
        unsigned int hd, unsigned int d, int inter) {
    unsigned int half = hd / 2;
    if (inter) {
        unsigned int j = d / 2;
        float c = step[j], s = step[half + j];
        if ((d & 1) == 0)
            return rnd<A>(rnd<A>(head_elem<A, C>(qkv, buf, row, brow, bias, d) * c)
                        - rnd<A>(head_elem<A, C>(qkv, buf, row, brow, bias, d + 1) * s));
        return rnd<A>(rnd<A>(head_elem<A, C>(qkv, buf, row, brow, bias, d - 1) * s)
                    + rnd<A>(head_elem<A, C>(qkv, buf, row, brow, bias, d) * c));
    }
    if (d < half)
        return rnd<A>(rnd<A>(head_elem<A, C>(qkv, buf, row, brow, bias, d) * step[d])
                    - rnd<A>(head_elem<A, C>(qkv, buf, row, brow, bias, d + half) * step[half + d]));
    unsigned int j = d - half;
    return rnd<A>(rnd<A>(head_elem<A, C>(qkv, buf, row, brow, bias, j) * step[half + j])
                + rnd<A>(head_elem<A, C>(qkv, buf, row, brow, bias, d) * step[j]));
}
