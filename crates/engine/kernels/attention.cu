// Decode attention over the KV cache for one query position: one block of NT threads per head,
// or split over blocks of NS threads ("flash-decoding") with the shares combined in the launch.
#include "common.cuh"
#include "attention.cuh"

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
// One block of NT threads per (query head, sequence) over all positions 0..=pos, in chunks of CH
// with an online softmax, so any context fits in fixed shared memory.
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
// QE_ATTN_HOIST 1: a chunk converts each K and V row from the cache's type once for the whole
// group, where the default converts it again for every head (nvcc left 1 068 HADD2 conversions
// beside 1 171 FFMAs in the F16 kernel): the same sums in the same order, so the same results.
#ifndef QE_ATTN_HOIST
#define QE_ATTN_HOIST 0
#endif
// Element j of a row: converted from the cache's type (a loaded row), or as converted already.
template <int C> __device__ __forceinline__ float el(const Row8<C>& x, int j) { return at<C>(x, j); }
__device__ __forceinline__ float el(const float (&f)[8], int j) { return f[j]; }
// A loaded row's 8 elements as floats.
template <int C> __device__ __forceinline__ void row_floats(const Row8<C>& x, float (&f)[8]) {
#pragma unroll
    for (int j = 0; j < 8; j++) f[j] = at<C>(x, j);
}
// Head h's 8 elements of its q row, from shared memory.
__device__ __forceinline__ void q_row(const float* qs, int h, unsigned int hd, unsigned int e, float (&q)[8]) {
    const float4* qp = (const float4*)(qs + h * hd + e);
    float4 q0 = qp[0], q1 = qp[1];
    q[0] = q0.x, q[1] = q0.y, q[2] = q0.z, q[3] = q0.w, q[4] = q1.x, q[5] = q1.y, q[6] = q1.z, q[7] = q1.w;
}
// q · row summed over a slot's L lanes, stored as slot position t's score (−inf past the share).
template <int L, class Row> __device__ __forceinline__ void put_score(const float (&q)[8], const Row& row,
        float* sc_h, unsigned int t, unsigned int e, unsigned int c0, unsigned int t_end, float scale) {
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < 8; j++) s += q[j] * el(row, j);
#pragma unroll
    for (int o = L / 2; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (e == 0) sc_h[t] = c0 + t < t_end ? s * scale : NEG_INF;
}
// A head's ·V partial plus weight p times the row.
template <class Row> __device__ __forceinline__ void add_pv(float (&acc)[8], float p, const Row& row) {
#pragma unroll
    for (int j = 0; j < 8; j++) acc[j] += p * el(row, j);
}
// One chunk's arithmetic: the scores of every head of the group at the chunk's first NP passes
// of RS positions (the L lanes of a slot sum), the online softmax (a warp per head: the chunk's
// max, its weights, the running sum), and the heads' ·V partials. NP is a constant, so the passes
// unroll with no branch between them and their shuffle sums overlap.
template <int C, int L, int U, int NP> __device__ __forceinline__ void chunk(const Row8<C> (&k)[U],
        const Row8<C> (&v)[U], float (&acc)[GQ][8], const float* qs, float* sc, float* ms,
        float* ls, float* al, unsigned int g, unsigned int hd, unsigned int e, unsigned int r,
        unsigned int c0, unsigned int t_end, float scale) {
    constexpr int RS = NS / L, PC = U * RS;
    unsigned int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    float q[8], f[8];
    if (QE_ATTN_HOIST) {
        // Passes outside, heads inside: each K row converted once, each q row read again.
#pragma unroll
        for (int u = 0; u < NP; u++) {
            row_floats<C>(k[u], f);
#pragma unroll
            for (int h = 0; h < GQ; h++) {
                if (h < g) {
                    q_row(qs, h, hd, e, q);
                    put_score<L>(q, f, sc + h * PC, r + u * RS, e, c0, t_end, scale);
                }
            }
        }
    } else {
#pragma unroll
        for (int h = 0; h < GQ; h++) {
            if (h < g) {
                q_row(qs, h, hd, e, q);
#pragma unroll
                for (int u = 0; u < NP; u++) put_score<L>(q, k[u], sc + h * PC, r + u * RS, e, c0, t_end, scale);
            }
        }
    }
    __syncthreads();
    if (warp < g) {
        float mx = NEG_INF;
#pragma unroll
        for (unsigned int t = lane; t < NP * RS; t += 32) mx = fmaxf(mx, sc[warp * PC + t]);
        mx = warp_max(mx);
        float m_old = ms[warp], mn = fmaxf(m_old, mx), sum = 0.0f;
#pragma unroll
        for (unsigned int t = lane; t < NP * RS; t += 32) {
            float p = expf(sc[warp * PC + t] - mn);
            sc[warp * PC + t] = p;
            sum += p;
        }
        sum = warp_sum(sum);
        if (lane == 0) {
            float alpha = expf(m_old - mn);
            al[warp] = alpha;
            ls[warp] = ls[warp] * alpha + sum;
            ms[warp] = mn;
        }
    }
    __syncthreads();
    // Each head's ·V partials, rescaled by alpha, plus the passes' p · V rows in pass order; the
    // hoisted order converts each V row once and makes the same sums in the same order.
#pragma unroll
    for (int h = 0; h < GQ; h++) {
        if (h < g) {
            float alpha = al[h];
#pragma unroll
            for (int j = 0; j < 8; j++) acc[h][j] *= alpha;
            if (!QE_ATTN_HOIST) {
#pragma unroll
                for (int u = 0; u < NP; u++) add_pv(acc[h], sc[h * PC + r + u * RS], v[u]);
            }
        }
    }
    if (QE_ATTN_HOIST) {
#pragma unroll
        for (int u = 0; u < NP; u++) {
            row_floats<C>(v[u], f);
#pragma unroll
            for (int h = 0; h < GQ; h++)
                if (h < g) add_pv(acc[h], sc[h * PC + r + u * RS], f);
        }
    }
}
// L lanes hold a position's row, 8 elements each (L = hd / 8); RS = NS / L row slots; a chunk is
// U passes of the slots (PC positions), their K and V rows loaded before any arithmetic. U = 6
// makes a chunk hold a block's share at the splits the engine picks up to ≈ 96 · 132 / nkv
// positions (6 k at two KV heads), so most blocks wait on memory once.
// QE_ATTN_U and QE_ATTN_BLOCKS_PER_SM (the split blocks' `__launch_bounds__`) come from the engine's
// knobs of the same names (`kernels::source`); these are their defaults, for nvcc's build check.
#ifndef QE_ATTN_U
#define QE_ATTN_U 6
#endif
#ifndef QE_ATTN_BLOCKS_PER_SM
#define QE_ATTN_BLOCKS_PER_SM 1
#endif
// QE_ATTN_PREFETCH 1: a share of several chunks loads the next chunk's rows into a second set of
// registers before this chunk's arithmetic, so its memory wait overlaps the arithmetic instead of
// following it (a block holds its SM alone: nothing else hides the wait). 48 more registers.
#ifndef QE_ATTN_PREFETCH
#define QE_ATTN_PREFETCH 0
#endif
// A chunk's K and V rows of this thread's slot: positions t0 + u · RS of its U passes.
template <int C, int U, int RS> __device__ __forceinline__ void chunk_rows(Row8<C> (&k)[U], Row8<C> (&v)[U],
        const void* buf, const AttnHead& a, unsigned int t0, unsigned int t_end, unsigned int own,
        unsigned int hd, unsigned int e, const unsigned int* kown, const unsigned int* vown) {
#pragma unroll
    for (int u = 0; u < U; u++) k[u] = row8<C>(buf, a.kb, t0 + u * RS, t_end, own, hd, e, kown);
#pragma unroll
    for (int u = 0; u < U; u++) v[u] = row8<C>(buf, a.vb, t0 + u * RS, t_end, own, hd, e, vown);
}
template <int A, int C, int L> __device__ void decode_attn_group(void* out, const void* qkv,
        void* buf, const float* step, unsigned int b, unsigned int nh, unsigned int nkv,
        unsigned int hd, unsigned int ctx, int bias, int inter, float scale, void* q8, int fold,
        unsigned int splits, float* part, unsigned int* cnt) {
    constexpr int U = QE_ATTN_U, RS = NS / L, PC = U * RS;
    __shared__ __align__(16) float qs[GQ * 256];
    __shared__ __align__(16) float red[NS * 8];
    __shared__ __align__(16) unsigned int kown[256], vown[256];
    __shared__ float sc[GQ * PC], ms[GQ], ls[GQ], al[GQ];
    __shared__ unsigned int last;
    unsigned int bi = blockIdx.y, sp = blockIdx.z, tid = threadIdx.x, g = nh / nkv;
    unsigned int r = tid / L, e = (tid % L) * 8, warp = tid >> 5, lane = tid & 31;
    AttnHead a = group_rows(step, b, nkv, hd, ctx, fold);
    unsigned int per = (a.len + splits - 1) / splits;
    unsigned int t_begin = sp * per < a.len ? sp * per : a.len;
    unsigned int t_end = t_begin + per < a.len ? t_begin + per : a.len;
    // The first chunk's rows are in flight while the q rows are computed; the block's own row
    // (being written by split 0) is read from shared memory once group_q has put it there.
    Row8<C> k[U], v[U];
    chunk_rows<C, U, RS>(k, v, buf, a, t_begin + r, t_end, 0xffffffffu, hd, e, kown, vown);
    group_q<A, C>(a, qkv, buf, step, b, nh, nkv, hd, ctx, bias, inter, sp == 0, qs, kown, vown);
#pragma unroll
    for (int u = 0; u < U; u++) {
        if (t_begin + r + u * RS == a.own && a.own < t_end) {
            k[u] = row8<C>(buf, a.kb, a.own, t_end, a.own, hd, e, kown);
            v[u] = row8<C>(buf, a.vb, a.own, t_end, a.own, hd, e, vown);
        }
    }
    if (tid < GQ) {
        ms[tid] = NEG_INF;
        ls[tid] = 0.0f;
    }
    float acc[GQ][8];
#pragma unroll
    for (int h = 0; h < GQ; h++)
#pragma unroll
        for (int j = 0; j < 8; j++) acc[h][j] = 0.0f;
    // The next chunk's rows (QE_ATTN_PREFETCH, half caches: an F32 cache's second set spills).
    constexpr bool PF = QE_ATTN_PREFETCH && C != 0;
    Row8<C> kn[U], vn[U];
    for (unsigned int c0 = t_begin; c0 < t_end; c0 += PC) {
        // Passes of the chunk that hold a position (block-uniform): a short share skips the rest
        // of the U passes' arithmetic, whose rows are zeros and whose weights would be 0.
        unsigned int live = (t_end - c0 + RS - 1) / RS, c1 = c0 + PC;
        if (PF && c1 < t_end)
            chunk_rows<C, U, RS>(kn, vn, buf, a, c1 + r, t_end, a.own, hd, e, kown, vown);
        else if (!PF && c0 != t_begin)
            chunk_rows<C, U, RS>(k, v, buf, a, c0 + r, t_end, a.own, hd, e, kown, vown);
        // The chunk's arithmetic over its first two passes when no more hold a position (a
        // short share: 1 k positions over 34 splits), else over all U. Each version has no branch
        // between its passes: a `break` there serialized their shuffle sums (the H200's 16 k
        // decode lost 4.6 µs a layer to it), and a version per count tripled the module's PTX.
        if (live <= 2)
            chunk<C, L, U, 2 < U ? 2 : U>(k, v, acc, qs, sc, ms, ls, al, g, hd, e, r, c0, t_end, scale);
        else
            chunk<C, L, U, U>(k, v, acc, qs, sc, ms, ls, al, g, hd, e, r, c0, t_end, scale);
        __syncthreads();
        if (PF && c1 < t_end) {
#pragma unroll
            for (int u = 0; u < U; u++) {
                k[u] = kn[u];
                v[u] = vn[u];
            }
        }
    }
    // Each head's share: the row slots' partials summed (the slots of a warp by shuffles, the
    // warps through `red`, HR heads a round), then [·V row (hd)] at rows[(bi · nh + head) · splits
    // + sp] and [max, sum] at ml[the same], the two arrays apart so rows stay 16-byte aligned.
    constexpr int W = NS / 32, HR = 32 / L;
    static_assert(HR * 8 * L == NS, "a round's heads × hd is one element a thread");
    unsigned int h0 = blockIdx.x * g;
    unsigned long long hs0 = ((unsigned long long)bi * nh + h0) * splits;
    float* rows = part;
    float* ml = part + (unsigned long long)b * nh * splits * hd;
#pragma unroll
    for (int hr = 0; hr < GQ; hr += HR) {
        if (hr < (int)g) {
#pragma unroll
            for (int k = 0; k < HR; k++) {
                if (hr + k < GQ && hr + k < (int)g) {
                    float s[8];
#pragma unroll
                    for (int j = 0; j < 8; j++) {
                        s[j] = acc[hr + k < GQ ? hr + k : 0][j];
#pragma unroll
                        for (int o = L; o < 32; o <<= 1) s[j] += __shfl_xor_sync(0xffffffffu, s[j], o);
                    }
                    if (lane < L) {
                        float4* dst = (float4*)(red + (k * W + warp) * hd + e);
                        dst[0] = make_float4(s[0], s[1], s[2], s[3]);
                        dst[1] = make_float4(s[4], s[5], s[6], s[7]);
                    }
                }
            }
            __syncthreads();
            // HR · hd = NS: a thread per (head of the round, element).
            unsigned int k = tid / hd, d = tid % hd, h = hr + k;
            if (h < g) {
                float o = 0.0f;
#pragma unroll
                for (int w = 0; w < W; w++) o += red[(k * W + w) * hd + d];
                unsigned long long hs = hs0 + (unsigned long long)h * splits + sp;
                rows[hs * hd + d] = o;
                if (d == 0) {
                    ml[2 * hs] = ms[h];
                    ml[2 * hs + 1] = ls[h];
                }
            }
            __syncthreads();
        }
    }
    unsigned int* count = cnt + bi * nh + h0;
    if (last_share(count, splits, last))
        combine_shares<A>(out, q8, nh, g, hd, splits, h0, hs0, rows, ml, count, red, ls, qs);
}

// One group kernel per head width: decode_attn_split<hd>_<a>_<c>, L = hd / 8 lanes a row.
#define QE_DECODE_ATTN_GROUP_CALL(ac, cc, lanes)                                               \
    decode_attn_group<ac, cc, lanes>(out, qkv, (void*)buf, step, b, nh, nkv, hd, ctx, bias,    \
                                     inter, scale, q8, fold, splits, part, cnt)
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
    extern "C" __global__ void __launch_bounds__(NS, QE_ATTN_BLOCKS_PER_SM)                  \
            decode_attn_split64_##a##_##c(QE_DECODE_ATTN_GROUP_ARGS) {                        \
        QE_DECODE_ATTN_GROUP_CALL(ac, cc, 8);                                                 \
    }                                                                                         \
    extern "C" __global__ void __launch_bounds__(NS, QE_ATTN_BLOCKS_PER_SM)                  \
            decode_attn_split128_##a##_##c(QE_DECODE_ATTN_GROUP_ARGS) {                       \
        QE_DECODE_ATTN_GROUP_CALL(ac, cc, 16);                                                \
    }                                                                                         \
    extern "C" __global__ void __launch_bounds__(NS, QE_ATTN_BLOCKS_PER_SM)                  \
            decode_attn_split256_##a##_##c(QE_DECODE_ATTN_GROUP_ARGS) {                       \
        QE_DECODE_ATTN_GROUP_CALL(ac, cc, 32);                                                \
    }
QE_FOR_DTYPE_PAIRS(QE_DECODE_ATTN)
