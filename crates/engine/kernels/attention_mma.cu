// Split decode attention on tensor cores: attention.cu's split kernel (same grid, shares and
// combine) with the scores and the ·V sums as mma.sync m16n8k16 products, for F16 and BF16
// caches on sm_80 and newer (the launcher picks it there; the kernels are empty for older
// targets). Where the CUDA-core kernel spends a multiply-add a head per cache element and a
// shuffle sum a head per position, a warp here turns 16 positions of K and V into two score
// products a 16-dim step and two ·V products a 16-dim row slice.
//
// Each warp of a block takes every NW-th tile of 16 positions of the block's share, with its own
// online softmax, and the 8 warps' results are merged in shared memory into the block's share.
// No rounding is added: q and the softmax weights are split into a high and a low half
// (x = hi + lo, each in the cache's type), so the products see ≈ 22 (F16) / 16 (BF16) bits of
// them, not 11 / 8, and the sums are F32. (An F16 cache's q must fit F16's range, ±65 504, as
// the prefill's F16 scores already need.) The q halves fill the m16 tile's two 8-row halves
// (the group has at most 8 heads); the weights' take a second ·V product.
#include "common.cuh"
#include "attention.cuh"

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
#define QE_MMA 1
#else
#define QE_MMA 0
#endif

// D += A · B, m16n8k16, A row-major and B column-major halves of the cache's type (C = 1 F16,
// 2 BF16), F32 accumulators. A's four registers: rows r and r + 8 (r = lane / 4) at columns
// k = 2 (lane % 4) + {0, 1}, then the same rows at k + 8; B's two: rows k and k + 8 of column r;
// D's four: rows r and r + 8 at columns 2 (lane % 4) + {0, 1}.
template <int C> __device__ __forceinline__ void mma16816(float (&d)[4], const uint4& a, unsigned int b0,
                                                          unsigned int b1) {
#if QE_MMA
    if (C == 1)
        asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
            "{%8, %9}, {%0, %1, %2, %3};"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b0), "r"(b1));
    else
        asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
            "{%8, %9}, {%0, %1, %2, %3};"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b0), "r"(b1));
#endif
}
// Two floats as one word of the cache's type, `lo` in the low half (the lower column or row).
template <int C> __device__ __forceinline__ unsigned int pack2(float lo, float hi) {
    unsigned short l = C == 1 ? f2h(lo) : f2b(lo), h = C == 1 ? f2h(hi) : f2b(hi);
    return (unsigned int)l | ((unsigned int)h << 16);
}
template <int C> __device__ __forceinline__ float half_at(unsigned int w, int k) {
    unsigned short h = (unsigned short)(k ? w >> 16 : w & 0xffffu);
    return C == 1 ? h2f(h) : b2f(h);
}
// x0, x1 ≈ hi + lo, each pair packed as the cache's type.
template <int C> __device__ __forceinline__ void split2(float x0, float x1, unsigned int& hi, unsigned int& lo) {
    hi = pack2<C>(x0, x1);
    lo = pack2<C>(x0 - half_at<C>(hi, 0), x1 - half_at<C>(hi, 1));
}
// A warp's tile: 16 positions' K and V rows, as loaded. Lane (r = lane / 4, c = lane % 4) holds
// K rows t0 + r and t0 + 8 + r at dims 32 i + 8 c (KB = hd / 32 words of 8), the score product's
// B operands with its k index mapped to dims so that one 16-byte load feeds two k-steps; and V
// rows t0 + 2c + {0, 1, 8, 9} at dims 64 i + 8 r (VB = hd / 64 words), which byte permutes turn
// into the ·V product's A operands (a column of V^T holds two positions of one dim).
template <int KB, int VB> struct Tile {
    uint4 k[2][KB], v[4][VB];
};
// 8 elements from dim e of row t of a K or V cache at `base` (the block's own row from `mine`);
// past the share the share's last row, whose weight is 0 (a finite row: the cache past the
// context may hold anything), so that the loads need no branch.
__device__ __forceinline__ uint4 row_word(const void* buf, unsigned long long base,
        unsigned int t, unsigned int t_last, unsigned int own, unsigned int hd, unsigned int e,
        const unsigned int* mine) {
    t = t < t_last ? t : t_last;
    const uint4* p = t == own ? (const uint4*)(mine + e / 2)
                              : (const uint4*)((const unsigned short*)buf + base + (unsigned long long)t * hd + e);
    return *p;
}
template <int KB, int VB> __device__ __forceinline__ void load_tile(Tile<KB, VB>& x, const void* buf,
        const AttnHead& a, unsigned int t0, unsigned int t_last, unsigned int hd, unsigned int r,
        unsigned int c, const unsigned int* kown, const unsigned int* vown) {
#pragma unroll
    for (int j = 0; j < 2; j++)
#pragma unroll
        for (int i = 0; i < KB; i++)
            x.k[j][i] = row_word(buf, a.kb, t0 + 8 * j + r, t_last, a.own, hd, 32 * i + 8 * c, kown);
#pragma unroll
    for (int p = 0; p < 4; p++)
#pragma unroll
        for (int i = 0; i < VB; i++)
            x.v[p][i] = row_word(buf, a.vb, t0 + 8 * (p >> 1) + 2 * c + (p & 1), t_last, a.own, hd,
                                    64 * i + 8 * r, vown);
}
// One tile into the warp's running softmax (head r's max m; this lane's share of its sum l) and
// ·V columns o: o[4 i + q] holds dims 64 i + 8 r + 2 q (+1 for elements 2, 3) of heads 2 c and
// 2 c + 1 (elements 0, 2 and 1, 3). qf: the q operands, one 16-byte word a lane and k-step.
template <int C, int KB, int VB> __device__ __forceinline__ void tile(const Tile<KB, VB>& x,
        const uint4* qf, float (&o)[4 * VB][4], float& m, float& l, unsigned int t0,
        unsigned int t_end, float scale, unsigned int lane) {
    unsigned int c = lane & 3;
    // Scores: rows r (q's high half) and r + 8 (its low half) of head r; columns the positions.
    float s[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
    for (int ks = 0; ks < 2 * KB; ks++) {
        uint4 qa = qf[ks * 32 + lane];
#pragma unroll
        for (int j = 0; j < 2; j++)
            mma16816<C>(s[j], qa, word(x.k[j][ks / 2], 2 * (ks % 2)), word(x.k[j][ks / 2], 2 * (ks % 2) + 1));
    }
    // Head r's scores at positions t0 + 8 j + 2 c + i (−inf past the share); the tile's max over
    // the four lanes of the head, the running max, and the weights.
    float p[4], mx = NEG_INF;
#pragma unroll
    for (int j = 0; j < 2; j++)
#pragma unroll
        for (int i = 0; i < 2; i++) {
            float v = t0 + 8 * j + 2 * c + i < t_end ? (s[j][i] + s[j][i + 2]) * scale : NEG_INF;
            p[2 * j + i] = v;
            mx = fmaxf(mx, v);
        }
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    // Position t0 is in the share, so mn is finite; alpha is 0 at the first tile (m = −inf).
    float mn = fmaxf(m, mx), alpha = expf(m - mn);
#pragma unroll
    for (int k = 0; k < 4; k++) p[k] = expf(p[k] - mn);
    l = l * alpha + ((p[0] + p[1]) + (p[2] + p[3]));
    m = mn;
    // The weights as the ·V product's B operand: column r (head r), rows the tile's positions, as
    // its high and low halves.
    unsigned int ph0, pl0, ph1, pl1;
    split2<C>(p[0], p[1], ph0, pl0);
    split2<C>(p[2], p[3], ph1, pl1);
    // The rescale of heads 2 c and 2 c + 1, whose columns this lane holds (their lanes 8 c, 8 c + 4).
    float ae = __shfl_sync(0xffffffffu, alpha, 8 * c), ao = __shfl_sync(0xffffffffu, alpha, 8 * c + 4);
#pragma unroll
    for (int i = 0; i < VB; i++)
#pragma unroll
        for (int q = 0; q < 4; q++) {
            float(&oi)[4] = o[4 * i + q];
            oi[0] *= ae;
            oi[1] *= ao;
            oi[2] *= ae;
            oi[3] *= ao;
            unsigned int w0 = word(x.v[0][i], q), w1 = word(x.v[1][i], q);
            unsigned int w2 = word(x.v[2][i], q), w3 = word(x.v[3][i], q);
            uint4 va = make_uint4(__byte_perm(w0, w1, 0x5410), __byte_perm(w0, w1, 0x7632),
                                  __byte_perm(w2, w3, 0x5410), __byte_perm(w2, w3, 0x7632));
            mma16816<C>(oi, va, ph0, ph1);
            mma16816<C>(oi, va, pl0, pl1);
        }
}
// A head's weight for a warp's share: exp(m_w − max), 0 for a warp with no positions.
__device__ __forceinline__ float warp_weight(float mw, float mx) { return mw == NEG_INF ? 0.0f : expf(mw - mx); }

template <int A, int C, int HD> __device__ void decode_attn_mma(QE_DECODE_ATTN_GROUP_ARGS) {
    constexpr int KB = HD / 32, VB = HD / 64, NW = NS / 32;
    static_assert(NW == 8, "the warps' columns merge in two rounds of 4");
    // The next tile's rows load while this one computes where registers allow (hd ≤ 128).
    constexpr bool PF = HD <= 128;
    // Shared floats: the q rows, then the warps' ·V columns (4 buffers), then the combine's.
    constexpr int SB = 4 * GQ * HD > GQ * 256 + GQ * HD ? 4 * GQ * HD : GQ * 256 + GQ * HD;
    __shared__ __align__(16) uint4 qf[HD / 16 * 32];
    __shared__ __align__(16) float sb[SB];
    __shared__ __align__(16) unsigned int kown[HD / 2], vown[HD / 2];
    __shared__ float wm[NW][GQ], wl[NW][GQ], ls[GQ];
    __shared__ unsigned int last;
    unsigned int bi = blockIdx.y, sp = blockIdx.z, tid = threadIdx.x, g = nh / nkv;
    unsigned int warp = tid >> 5, lane = tid & 31, r = lane >> 2, c = lane & 3;
    AttnHead a = group_rows(step, b, nkv, hd, ctx, fold);
    unsigned int per = (a.len + splits - 1) / splits;
    unsigned int t_begin = sp * per < a.len ? sp * per : a.len;
    unsigned int t_end = t_begin + per < a.len ? t_begin + per : a.len;
    group_q<A, C>(a, qkv, (void*)buf, step, b, nh, nkv, hd, ctx, bias, inter, sp == 0, sb, kown, vown);
    // q's operands: k-step ks of lane (r, c) holds head r's dims d0 + {0, 1} and d0 + {2, 3},
    // d0 = 32 (ks / 2) + 8 c + 4 (ks % 2), the dims its K words hold; high halves in rows 0–7,
    // low halves in rows 8–15; zeros for rows past the group.
    for (unsigned int i = tid; i < HD / 16 * 32; i += NS) {
        unsigned int ks = i / 32, h = (i % 32) >> 2, d0 = 32 * (ks / 2) + 8 * (i & 3) + 4 * (ks % 2);
        uint4 f = make_uint4(0u, 0u, 0u, 0u);
        if (h < g) {
            const float* q = sb + h * HD + d0;
            split2<C>(q[0], q[1], f.x, f.y);
            split2<C>(q[2], q[3], f.z, f.w);
        }
        qf[i] = f;
    }
    __syncthreads();
    float o[4 * VB][4];
#pragma unroll
    for (int i = 0; i < 4 * VB; i++)
#pragma unroll
        for (int k = 0; k < 4; k++) o[i][k] = 0.0f;
    float m = NEG_INF, l = 0.0f;
    Tile<KB, VB> x, xn;
    unsigned int t0 = t_begin + 16 * warp;
    if (t0 < t_end) load_tile(x, buf, a, t0, t_end - 1, hd, r, c, kown, vown);
    for (; t0 < t_end; t0 += 16 * NW) {
        unsigned int t1 = t0 + 16 * NW;
        if (PF && t1 < t_end) load_tile(xn, buf, a, t1, t_end - 1, hd, r, c, kown, vown);
        tile<C>(x, qf, o, m, l, t0, t_end, scale, lane);
        if (PF) x = xn;
        else if (t1 < t_end) load_tile(x, buf, a, t1, t_end - 1, hd, r, c, kown, vown);
    }
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    if (c == 0) {
        wm[warp][r] = m;
        wl[warp][r] = l;
    }
    __syncthreads();
    // The warps' columns, each weighted to the block's max of its head, summed into 4 buffers in a
    // fixed order (warps 4–7 write, 0–3 add), then the block's share of each head.
    float mx0 = NEG_INF, mx1 = NEG_INF;
#pragma unroll
    for (int w = 0; w < NW; w++) {
        mx0 = fmaxf(mx0, wm[w][2 * c]);
        mx1 = fmaxf(mx1, wm[w][2 * c + 1]);
    }
    float f0 = warp_weight(wm[warp][2 * c], mx0), f1 = warp_weight(wm[warp][2 * c + 1], mx1);
    float* cols = sb + (warp % 4) * GQ * HD;
#pragma unroll
    for (int half = 1; half >= 0; half--) {
        if ((int)(warp / 4) == half) {
#pragma unroll
            for (int i = 0; i < 4 * VB; i++)
#pragma unroll
                for (int k = 0; k < 4; k++) {
                    unsigned int h = 2 * c + (k & 1), d = 64 * (i / 4) + 8 * r + 2 * (i % 4) + (k >> 1);
                    if (h < g) {
                        float v = o[i][k] * (k & 1 ? f1 : f0);
                        cols[h * HD + d] = half ? v : cols[h * HD + d] + v;
                    }
                }
        }
        __syncthreads();
    }
    unsigned int h0 = blockIdx.x * g;
    unsigned long long hs0 = ((unsigned long long)bi * nh + h0) * splits;
    float* rows = part;
    float* ml = part + (unsigned long long)b * nh * splits * hd;
    for (unsigned int i = tid; i < g * HD; i += NS) {
        unsigned int h = i / HD, d = i % HD;
        unsigned long long hs = hs0 + (unsigned long long)h * splits + sp;
        rows[hs * HD + d] = (sb[i] + sb[GQ * HD + i]) + (sb[2 * GQ * HD + i] + sb[3 * GQ * HD + i]);
        if (d == 0) {
            float mx = NEG_INF, sum = 0.0f;
            for (int w = 0; w < NW; w++) mx = fmaxf(mx, wm[w][h]);
            for (int w = 0; w < NW; w++) sum += warp_weight(wm[w][h], mx) * wl[w][h];
            ml[2 * hs] = mx;
            ml[2 * hs + 1] = sum;
        }
    }
    unsigned int* count = cnt + bi * nh + h0;
    if (last_share(count, splits, last))
        combine_shares<A>(out, q8, nh, g, hd, splits, h0, hs0, rows, ml, count, sb, ls, sb + GQ * 256);
}

// One kernel per head width and (activation, half cache) pair: decode_attn_mma<hd>_<a>_<c>.
#define QE_DECODE_ATTN_MMA_CALL(ac, cc, width)                                                 \
    if (QE_MMA)                                                                               \
        decode_attn_mma<ac, cc, width>(out, qkv, buf, step, b, nh, nkv, hd, ctx, bias, inter, \
                                       scale, q8, fold, splits, part, cnt)
#define QE_DECODE_ATTN_MMA(a, ac, c, cc)                                                      \
    extern "C" __global__ void __launch_bounds__(NS, 1)                                       \
            decode_attn_mma64_##a##_##c(QE_DECODE_ATTN_GROUP_ARGS) {                          \
        QE_DECODE_ATTN_MMA_CALL(ac, cc, 64);                                                  \
    }                                                                                         \
    extern "C" __global__ void __launch_bounds__(NS, 1)                                       \
            decode_attn_mma128_##a##_##c(QE_DECODE_ATTN_GROUP_ARGS) {                         \
        QE_DECODE_ATTN_MMA_CALL(ac, cc, 128);                                                 \
    }                                                                                         \
    extern "C" __global__ void __launch_bounds__(NS, 1)                                       \
            decode_attn_mma256_##a##_##c(QE_DECODE_ATTN_GROUP_ARGS) {                         \
        QE_DECODE_ATTN_MMA_CALL(ac, cc, 256);                                                 \
    }
QE_FOR_HALF_CACHE_PAIRS(QE_DECODE_ATTN_MMA)
