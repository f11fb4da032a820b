// Decode attention over the KV cache for one query position: one block of NT threads per head,
// or split over blocks of NS threads ("flash-decoding") with the shares combined in the launch.
#include "common.cuh"
#include "rotary.cuh"

// One block of NT threads per (query head, sequence); positions in chunks of CH with an online
// softmax, so any context fits in fixed shared memory.
// What a decode-attention block knows of its head: where its KV rows are, its position, and the
// row that is its own (kn, vn in shared memory) with `fold`, or none (0xffffffff).
struct AttnHead {
    unsigned long long kb, vb;
    unsigned int pos, len, own;
};
// The block's q row (rotated) into qs and, with `fold`, its KV head's new K and V rows into kn, vn
// as rope_kv would store them; `writer` blocks also write those rows to the cache (one block per
// KV head: no block of the launch reads that row from memory, the next step's launch does). Ends
// with a barrier.
template <int A, int C> __device__ __forceinline__ AttnHead attn_head(const void* qkv, void* buf, const float* step,
        unsigned int b, unsigned int nh, unsigned int nkv, unsigned int hd, unsigned int ctx,
        int bias, int inter, int fold, bool writer, float* qs, float* kn, float* vn) {
    unsigned int h = blockIdx.x, bi = blockIdx.y, tid = threadIdx.x;
    AttnHead a;
    a.pos = __float_as_uint(step[hd]);
    a.len = a.pos + 1 < ctx ? a.pos + 1 : ctx;
    a.own = fold && a.pos < ctx ? a.pos : 0xffffffffu;
    unsigned long long cache = (unsigned long long)b * nkv * ctx * hd;
    unsigned long long nq = (unsigned long long)(nh + 2 * nkv) * hd;
    unsigned int kvh = h / (nh / nkv);
    a.kb = ((unsigned long long)bi * nkv + kvh) * ctx * hd;
    a.vb = cache + a.kb;
    if (tid < hd) {
        qs[tid] = rotated<A, C>(qkv, buf, bi * nq + (unsigned long long)h * hd,
                                2 * cache + (unsigned long long)h * hd, bias, step, hd, tid, inter);
        if (a.own != 0xffffffffu) {
            unsigned long long kc = (unsigned long long)(nh + kvh) * hd;
            unsigned long long vc = (unsigned long long)(nh + nkv + kvh) * hd;
            float k = rnd<C>(rotated<A, C>(qkv, buf, bi * nq + kc, 2 * cache + kc, bias, step,
                                           hd, tid, inter));
            float v = rnd<C>(head_elem<A, C>(qkv, buf, bi * nq + vc, 2 * cache + vc, bias, tid));
            kn[tid] = k;
            vn[tid] = v;
            if (writer && h % (nh / nkv) == 0) {
                st<C>(buf, a.kb + (unsigned long long)a.pos * hd + tid, k);
                st<C>(buf, a.vb + (unsigned long long)a.pos * hd + tid, v);
            }
        }
    }
    __syncthreads();
    return a;
}
// Softmax attention of qs over positions [t_begin, t_end) of the head's KV rows (own row from
// kn, vn), in chunks of CH with an online softmax: the running max m, sum l, and this thread's
// unnormalized ·V partial acc (thread = row group g of blockDim / hd, element d). A warp per
// position, four positions at a time, and eight ·V rows in flight: the step is latency-bound (a
// few hundred rows per head), so independent loads in flight are what makes it fast.
template <int C> __device__ __forceinline__ void attend(const void* buf, const AttnHead& a, unsigned int t_begin,
        unsigned int t_end, unsigned int hd, float scale, const float* qs, const float* kn,
        const float* vn, float* sc, float* red, float& m, float& l, float& acc) {
    unsigned int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nw = blockDim.x >> 5;
    unsigned int groups = blockDim.x / hd, g = tid / hd, d = tid % hd;
    m = NEG_INF;
    l = 0.0f;
    acc = 0.0f;
    for (unsigned int c0 = t_begin; c0 < t_end; c0 += CH) {
        unsigned int n = t_end - c0 < CH ? t_end - c0 : CH;
        for (unsigned int t0 = warp; t0 < n; t0 += 4 * nw) {
            float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            // The four rows' loads of one element are independent, so they issue together.
            const float* kr[4];
            unsigned long long ko[4];
#pragma unroll
            for (int u = 0; u < 4; u++) {
                unsigned int t = t0 + u * nw;
                // Past the chunk: kn, a throwaway read, never the row being written.
                kr[u] = t >= n || c0 + t == a.own ? kn : nullptr;
                ko[u] = a.kb + (unsigned long long)(c0 + t) * hd;
            }
            for (unsigned int e = lane; e < hd; e += 32) {
                float q = qs[e];
#pragma unroll
                for (int u = 0; u < 4; u++) s[u] += q * (kr[u] ? kr[u][e] : ld<C>(buf, ko[u] + e));
            }
#pragma unroll
            for (int u = 0; u < 4; u++) {
                float v = warp_sum(s[u]);
                unsigned int t = t0 + u * nw;
                if (lane == 0 && t < n) sc[t] = v * scale;
            }
        }
        __syncthreads();
        float mx = NEG_INF;
        for (unsigned int t = tid; t < n; t += blockDim.x) mx = fmaxf(mx, sc[t]);
        float mn = fmaxf(m, block_max(mx, red));
        float sum = 0.0f;
        for (unsigned int t = tid; t < n; t += blockDim.x) {
            float p = expf(sc[t] - mn);
            sc[t] = p;
            sum += p;
        }
        sum = block_sum(sum, red);
        float alpha = expf(m - mn);
        l = l * alpha + sum;
        acc *= alpha;
        if (g < groups) {
            float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
            float a4 = 0.0f, a5 = 0.0f, a6 = 0.0f, a7 = 0.0f;
            unsigned long long vd = a.vb + (unsigned long long)c0 * hd + d;
            // The block's own row (fold) comes from vn, in its place in the sum.
            unsigned int mine = a.own - c0 < n ? a.own - c0 : 0xffffffffu;
            unsigned int t = g;
#define VROW(r) (sc[r] * ((r) == mine ? vn[d] : ld<C>(buf, vd + (unsigned long long)(r) * hd)))
            for (; t + 7 * groups < n; t += 8 * groups) {
                a0 += VROW(t);
                a1 += VROW(t + groups);
                a2 += VROW(t + 2 * groups);
                a3 += VROW(t + 3 * groups);
                a4 += VROW(t + 4 * groups);
                a5 += VROW(t + 5 * groups);
                a6 += VROW(t + 6 * groups);
                a7 += VROW(t + 7 * groups);
            }
            for (; t < n; t += groups) a0 += VROW(t);
#undef VROW
            acc += ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7));
        }
        m = mn;
        __syncthreads();
    }
}
// The head's row: the row groups' partials summed into element tid (< hd) of `pacc`'s first row.
__device__ __forceinline__ float attn_row(float acc, unsigned int hd, float* pacc) {
    unsigned int tid = threadIdx.x, groups = blockDim.x / hd, g = tid / hd;
    pacc[tid] = g < groups ? acc : 0.0f;
    __syncthreads();
    float o = 0.0f;
    if (tid < hd)
        for (unsigned int j = 0; j < groups; j++) o += pacc[j * hd + tid];
    return o;
}
// Output element tid (< hd, whole warps) of the head: stored, and its Q8_1 block with q8.
template <int A> __device__ __forceinline__ void attn_out(void* out, void* q8, unsigned int nh, unsigned int hd,
                                          float v) {
    unsigned long long i = ((unsigned long long)blockIdx.y * nh + blockIdx.x) * hd + threadIdx.x;
    st<A>(out, i, v);
    if (q8) q8_put(q8, i / 32, rnd<A>(v));
}
// One block of NT threads per (query head, sequence) over all positions 0..=pos.
template <int A, int C> __device__ void decode_attn(void* out, const void* qkv, void* buf,
        const float* step, unsigned int b, unsigned int nh, unsigned int nkv, unsigned int hd,
        unsigned int ctx, int bias, int inter, float scale, void* q8, int fold) {
    __shared__ float qs[256], kn[256], vn[256], sc[CH], red[32], part[NT];
    AttnHead a = attn_head<A, C>(qkv, buf, step, b, nh, nkv, hd, ctx, bias, inter, fold, true,
                                 qs, kn, vn);
    float m, l, acc;
    attend<C>(buf, a, 0, a.len, hd, scale, qs, kn, vn, sc, red, m, l, acc);
    float o = attn_row(acc, hd, part);
    if (threadIdx.x < hd) attn_out<A>(out, q8, nh, hd, o / l);
}
// Split attention ("flash-decoding", opt-in: QE_ATTN_SPLIT=1): grid (heads, sequences, splits),
// NS threads a block. Block `sp` attends to its share of positions 0..=pos, writes its running max,
// sum and unnormalized ·V row to `part`, and the last block of its head to finish (an atomic count,
// left at 0 again for the next launch) combines the shares into the output — one launch, and
// heads × splits blocks instead of one 1024-thread block per head (12 or 28 of 132 SMs).
template <int A, int C> __device__ void decode_attn_split(void* out, const void* qkv, void* buf,
        const float* step, unsigned int b, unsigned int nh, unsigned int nkv, unsigned int hd,
        unsigned int ctx, int bias, int inter, float scale, void* q8, int fold,
        unsigned int splits, float* part, unsigned int* cnt) {
    __shared__ float qs[256], kn[256], vn[256], sc[CH], red[32], pacc[NS];
    __shared__ unsigned int last;
    unsigned int h = blockIdx.x, bi = blockIdx.y, sp = blockIdx.z, tid = threadIdx.x;
    // Split 0 writes the group's new K/V row.
    AttnHead a = attn_head<A, C>(qkv, buf, step, b, nh, nkv, hd, ctx, bias, inter, fold, sp == 0,
                                 qs, kn, vn);
    // This block's positions: [t_begin, t_end), possibly none.
    unsigned int per = (a.len + splits - 1) / splits;
    unsigned int t_begin = sp * per < a.len ? sp * per : a.len;
    unsigned int t_end = t_begin + per < a.len ? t_begin + per : a.len;
    float m, l, acc;
    attend<C>(buf, a, t_begin, t_end, hd, scale, qs, kn, vn, sc, red, m, l, acc);
    float o = attn_row(acc, hd, pacc);
    // This block's share: [max, sum, ·V row (hd)] at part[((bi · nh + h) · splits + sp) · (hd + 2)].
    unsigned long long hb = ((unsigned long long)bi * nh + h) * splits * (hd + 2);
    float* share = part + hb + (unsigned long long)sp * (hd + 2);
    if (tid < hd) share[2 + tid] = o;
    if (tid == 0) {
        share[0] = m;
        share[1] = l;
    }
    // Publish the share, then count it; the block that counts last reads every share.
    __threadfence();
    __syncthreads();
    if (tid == 0) last = atomicAdd(cnt + bi * nh + h, 1u) == splits - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    const volatile float* all = part + hb;
    if (tid < hd) {
        float mm = NEG_INF;
        for (unsigned int j = 0; j < splits; j++) mm = fmaxf(mm, all[j * (hd + 2)]);
        float ll = 0.0f, oo = 0.0f;
        for (unsigned int j = 0; j < splits; j++) {
            float lj = all[j * (hd + 2) + 1];
            if (lj > 0.0f) {
                float w = expf(all[j * (hd + 2)] - mm);
                ll += lj * w;
                oo += all[j * (hd + 2) + 2 + tid] * w;
            }
        }
        attn_out<A>(out, q8, nh, hd, oo / ll);
    }
    if (tid == 0) cnt[bi * nh + h] = 0;
}

// The kernels launched with up to NT threads say so (`__launch_bounds__(NT, 1)`, so at most 64
// registers a thread): without it a kernel can take more and its launch fail at NT threads.
#define QE_DECODE_ATTN(a, ac, c, cc)                                                          \
    extern "C" __global__ void __launch_bounds__(NT, 1) decode_attn_##a##_##c(               \
            void* out, const void* qkv, const void* buf, const float* step, unsigned int b,   \
            unsigned int nh, unsigned int nkv, unsigned int hd, unsigned int ctx, int bias,   \
            int inter, float scale, void* q8, int fold) {                                     \
        decode_attn<ac, cc>(out, qkv, (void*)buf, step, b, nh, nkv, hd, ctx, bias, inter,     \
                            scale, q8, fold);                                                 \
    }                                                                                         \
    extern "C" __global__ void __launch_bounds__(NS, 1) decode_attn_split_##a##_##c(         \
            void* out, const void* qkv, const void* buf, const float* step, unsigned int b,   \
            unsigned int nh, unsigned int nkv, unsigned int hd, unsigned int ctx, int bias,   \
            int inter, float scale, void* q8, int fold, unsigned int splits, float* part,     \
            unsigned int* cnt) {                                                              \
        decode_attn_split<ac, cc>(out, qkv, (void*)buf, step, b, nh, nkv, hd, ctx, bias,      \
                                  inter, scale, q8, fold, splits, part, cnt);                 \
    }
QE_FOR_DTYPE_PAIRS(QE_DECODE_ATTN)
