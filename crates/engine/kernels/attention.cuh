// What the decode attention kernels share: where a block's KV rows are and, for the split kernels
// (attention.cu's on CUDA cores, attention_mma.cu's on tensor cores), the group's q rows, 16-byte
// row loads, and the combine of the shares by the last block of a group.
#pragma once
#include "common.cuh"
#include "rotary.cuh"

// What a decode-attention block knows of its head: where its KV rows are, its position, and the
// row that is its own (kn, vn in shared memory) with `fold`, or none (0xffffffff).
struct AttnHead {
    unsigned long long kb, vb;
    unsigned int pos, len, own;
};

// Split attention ("flash-decoding") over a KV head's whole query group: grid (KV heads,
// sequences, splits), NS threads a block. One block reads each of its positions' K and V rows once
// for all g = nh / nkv query heads of the group (the one-block kernel reads them once per query
// head: g times, 6–8× at today's GQA shapes), with 16-byte loads, a chunk's rows in flight
// together. Block `sp` attends to its share of positions 0..=pos, writes each head's running max,
// sum and unnormalized ·V row to `part`, and the last block of its group to finish (an atomic
// count, left at 0 again for the next launch) combines the shares. The launcher uses it for head
// widths 64, 128 and 256 and groups of at most GQ heads (the CUDA-core kernel's softmax takes a
// warp a head of its NS = 256 threads; the tensor-core kernel's q tile holds 8 heads), else the
// one-block kernel.
#define GQ 8
// The split kernels' arguments (both kinds take the same, launched the same way).
#define QE_DECODE_ATTN_GROUP_ARGS                                                              \
    void *out, const void *qkv, const void *buf, const float *step, unsigned int b,            \
        unsigned int nh, unsigned int nkv, unsigned int hd, unsigned int ctx, int bias,        \
        int inter, float scale, void *q8, int fold, unsigned int splits, float *part,          \
        unsigned int *cnt
// 8 consecutive cache elements as loaded: one 16-byte word for F16/BF16, two for F32.
template <int C> struct Row8 {
    uint4 w[C == 0 ? 2 : 1];
};
__device__ __forceinline__ unsigned int word(const uint4& w, int k) {
    return k == 0 ? w.x : k == 1 ? w.y : k == 2 ? w.z : w.w;
}
// Element j (a constant after unrolling) of a loaded row.
template <int C> __device__ __forceinline__ float at(const Row8<C>& x, int j) {
    if (C == 0) return __uint_as_float(word(x.w[(j / 4) % (C == 0 ? 2 : 1)], j % 4));
    unsigned int u = word(x.w[0], j / 2);
    unsigned short h = (unsigned short)(j % 2 ? u >> 16 : u & 0xffffu);
    return C == 1 ? h2f(h) : b2f(h);
}
// Elements [e, e + 8) of row `t` of a K or V cache at `base` (in elements of C): the block's own
// row from shared memory (`mine`, stored as C), past the share zeros, else the cache.
template <int C> __device__ __forceinline__ Row8<C> row8(const void* buf, unsigned long long base,
        unsigned int t, unsigned int t_end, unsigned int own, unsigned int hd, unsigned int e,
        const void* mine) {
    Row8<C> x;
    const int n = C == 0 ? 2 : 1;
    if (t >= t_end) {
#pragma unroll
        for (int k = 0; k < n; k++) x.w[k] = make_uint4(0u, 0u, 0u, 0u);
        return x;
    }
    constexpr unsigned int sz = C == 0 ? 4 : 2;
    const char* p = t == own ? (const char*)mine + e * sz
                             : (const char*)buf + (base + (unsigned long long)t * hd + e) * sz;
#pragma unroll
    for (int k = 0; k < n; k++) x.w[k] = ((const uint4*)p)[k];
    return x;
}
// A float written by another block of this launch: from L2, past this SM's L1.
__device__ __forceinline__ float ld_l2(const float* p) {
    float v;
    asm volatile("ld.global.cg.f32 %0, [%1];" : "=f"(v) : "l"(p));
    return v;
}
// Four of them, 16-byte aligned.
__device__ __forceinline__ float4 ld_l2_v4(const float* p) {
    float4 v;
    asm volatile("ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p));
    return v;
}
template <int C> __device__ __forceinline__ void put_raw(void* row, unsigned int i, float v) {
    if (C == 0) ((float*)row)[i] = v;
    else ((unsigned short*)row)[i] = C == 1 ? f2h(v) : f2b(v);
}
// Where the block's KV head's rows are, and its position (one load: the step row's last float).
__device__ __forceinline__ AttnHead group_rows(const float* step, unsigned int b, unsigned int nkv,
        unsigned int hd, unsigned int ctx, int fold) {
    unsigned int kvh = blockIdx.x, bi = blockIdx.y;
    AttnHead a;
    a.pos = __float_as_uint(step[hd]);
    a.len = a.pos + 1 < ctx ? a.pos + 1 : ctx;
    a.own = fold && a.pos < ctx ? a.pos : 0xffffffffu;
    unsigned long long cache = (unsigned long long)b * nkv * ctx * hd;
    a.kb = ((unsigned long long)bi * nkv + kvh) * ctx * hd;
    a.vb = cache + a.kb;
    return a;
}
// The group's rotated q rows into qs (g × hd) and, with `fold`, the KV head's new K and V rows
// into kown, vown as C (split 0 also writes them to the cache). Ends with a barrier.
template <int A, int C> __device__ __forceinline__ void group_q(const AttnHead& a, const void* qkv,
        void* buf, const float* step, unsigned int b, unsigned int nh, unsigned int nkv,
        unsigned int hd, unsigned int ctx, int bias, int inter, bool writer, float* qs,
        void* kown, void* vown) {
    unsigned int kvh = blockIdx.x, bi = blockIdx.y, tid = threadIdx.x, g = nh / nkv;
    unsigned long long cache = (unsigned long long)b * nkv * ctx * hd;
    unsigned long long nq = (unsigned long long)(nh + 2 * nkv) * hd;
    for (unsigned int i = tid; i < g * hd; i += blockDim.x) {
        unsigned long long q = (unsigned long long)(kvh * g + i / hd) * hd;
        qs[i] = rotated<A, C>(qkv, buf, bi * nq + q, 2 * cache + q, bias, step, hd, i % hd, inter);
    }
    if (tid < hd && a.own != 0xffffffffu) {
        unsigned long long kc = (unsigned long long)(nh + kvh) * hd;
        unsigned long long vc = (unsigned long long)(nh + nkv + kvh) * hd;
        float k = rnd<C>(rotated<A, C>(qkv, buf, bi * nq + kc, 2 * cache + kc, bias, step, hd,
                                       tid, inter));
        float v = rnd<C>(head_elem<A, C>(qkv, buf, bi * nq + vc, 2 * cache + vc, bias, tid));
        put_raw<C>(kown, tid, k);
        put_raw<C>(vown, tid, v);
        if (writer) {
            st<C>(buf, a.kb + (unsigned long long)a.pos * hd + tid, k);
            st<C>(buf, a.vb + (unsigned long long)a.pos * hd + tid, v);
        }
    }
    __syncthreads();
}
// Whether this block is the last of its group to finish: it publishes its shares (each head's
// [·V row (hd)] at rows[(bi · nh + head) · splits + sp], [max, sum] at ml[the same], the two
// arrays apart so rows stay 16-byte aligned), then counts them in the group's counter.
__device__ __forceinline__ bool last_share(unsigned int* count, unsigned int splits, unsigned int& last) {
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(count, 1u) == splits - 1;
    __syncthreads();
    if (!last) return false;
    __threadfence();
    return true;
}
// The last block's combine of every share of its group into the heads' outputs (and their Q8_1
// blocks), leaving the counter at 0 for the next launch. `red` holds g · 256 floats, `ls` g, `qs`
// g · hd (16-byte aligned).
template <int A> __device__ __forceinline__ void combine_shares(void* out, void* q8, unsigned int nh,
        unsigned int g, unsigned int hd, unsigned int splits, unsigned int h0, unsigned long long hs0,
        float* rows, float* ml, unsigned int* count, float* red, float* ls, float* qs) {
    unsigned int bi = blockIdx.y, tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    // Combine. Each head's share weights exp(m_j − max) (0 for a share with no positions) into
    // `red` and its total sum into `ls`, one warp a head.
    if (warp < g) {
        const float* hm = ml + 2 * (hs0 + (unsigned long long)warp * splits);
        float* w = red + warp * 256;
        float mm = NEG_INF;
        for (unsigned int j = lane; j < splits; j += 32) {
            w[j] = ld_l2(hm + 2 * j);
            mm = fmaxf(mm, w[j]);
        }
        mm = warp_max(mm);
        float ll = 0.0f;
        for (unsigned int j = lane; j < splits; j += 32) {
            float lj = ld_l2(hm + 2 * j + 1);
            w[j] = lj > 0.0f ? expf(w[j] - mm) : 0.0f;
            ll += lj * w[j];
        }
        ll = warp_sum(ll);
        if (lane == 0) ls[warp] = ll;
    }
    __syncthreads();
    // Every 4 elements of a head sum the shares' ·V rows, CB 16-byte loads in flight at a time
    // (the combine is one block's work while the others have finished: its latency is the
    // launch's tail), into qs; then each element is stored with its Q8_1 block.
    constexpr int CB = 16;
    for (unsigned int i = tid * 4; i < g * hd; i += NS * 4) {
        unsigned int h = i / hd, d = i % hd;
        const float* hp = rows + (hs0 + (unsigned long long)h * splits) * hd + d;
        const float* w = red + h * 256;
        float4 o = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        for (unsigned int j0 = 0; j0 < splits; j0 += CB) {
            float4 x[CB];
#pragma unroll
            for (int j = 0; j < CB; j++)
                x[j] = j0 + j < splits ? ld_l2_v4(hp + (unsigned long long)(j0 + j) * hd)
                                       : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
            for (int j = 0; j < CB; j++) {
                float wj = j0 + j < splits ? w[j0 + j] : 0.0f;
                o.x += x[j].x * wj;
                o.y += x[j].y * wj;
                o.z += x[j].z * wj;
                o.w += x[j].w * wj;
            }
        }
        float l = ls[h];
        *(float4*)(qs + i) = make_float4(o.x / l, o.y / l, o.z / l, o.w / l);
    }
    __syncthreads();
    // g · hd is whole warps (hd ≥ 64), and a warp's 32 elements are one Q8_1 block of one head.
    for (unsigned int i = tid; i < g * hd; i += NS) {
        unsigned long long o = ((unsigned long long)bi * nh + h0) * hd + i;
        st<A>(out, o, qs[i]);
        if (q8) q8_put(q8, o / 32, rnd<A>(qs[i]));
    }
    if (tid == 0) *count = 0;
}
