// attention_fwd_mfma.hip - flash-attention forward on AMD CDNA matrix cores (gfx90a / gfx942,
// wave64, v_mfma_f32_32x32x8 f16 / bf16_1k; hdn_mfma.h): the algorithm of attention_fwd.hip
// (FlashAttention-2: online softmax in fp32 on the exp2 scale, the same masks, the same Philox
// dropout stream, the same outputs), computed transposed so that each lane owns one query row.
// COMPILED OFFLINE BY `make check-amd`, NEVER RUN (no AMD GPU in this project's CI).
//
// One block = AM_NW wavefronts = 32 * AM_NW query rows of one (b, h); wavefront w takes rows
// q0 + 32 w .. + 31, lane (hi, lq) the row i = q0 + 32 w + lq.  Per 64-key tile (K row-major and
// V transposed in LDS, the next tile's global loads in flight during this tile's math):
//   Sᵀ (64 keys x 32 queries) = K Qᵀ   - A: K rows from LDS, B: this lane's Q row (registers)
//   lane (hi, lq) holds Sᵀ[8 g + 4 hi + e][lq] of both 32-key halves: its row's 32 of the 64
//   keys (the partner lane lq + 32 the other 32: the row maximum is one exchange);
//   Oᵀ (D x 32) += Vᵀ Pᵀ               - A: Vᵀ rows from LDS, B: P packed from the S registers
// so the rescale of O by the new maximum and the final 1 / l are per lane.  Partial row sums
// stay per lane (both lanes of a row use the same maximum) and are added at the end.
#ifndef HDN_GENERATED
#define HDN_BF16_IO 0
#define HD 128
#define GRP 1
#define HQ 1
#define SQ 128
#define SKV 128
#define QSB 16384
#define QSH 16384
#define QSS 128
#define KSB 16384
#define KSH 16384
#define KSS 128
#define VSB 16384
#define VSH 16384
#define VSS 128
#define OSB 16384
#define OSH 16384
#define OSS 128
#define HAS_STATS 1
#define LSB 128
#define LSH 128
#define LSS 1
#define CAUSAL 1
#define CAUSAL_BR 0
#define BR_ALIGN 0
#define HAS_RB 0
#define RB 0
#define HAS_LB 0
#define LB 0
#define PADDING 0
#define DROPOUT 1
#define DTHR 1073741824u
#define DSCALE 1.3333334f
#define SCALE_MODE 0
#define SCALE_VALUE 0.088388f
#define HDN_ATTN_LEN_PARAMS
#define HDN_ATTN_LEN_ARGS
#define HDN_ATTN_FWD_PARAMS const hdn_u16* __restrict__ Q, const hdn_u16* __restrict__ K, \
    const hdn_u16* __restrict__ V, hdn_u16* __restrict__ O, float* __restrict__ LSE, \
    const long long* __restrict__ seedp, const long long* __restrict__ offp
#endif
#include "hdn_attention.h"

#if HDN_HIP && (defined(__gfx90a__) || defined(__gfx940__) || defined(__gfx941__) || defined(__gfx942__))
#include "hdn_mfma.h"

#define AM_NW 4                       // wavefronts per block
#define AM_NT (64 * AM_NW)
#define AM_BM (32 * AM_NW)            // query rows per block
#define AM_BN 64                      // keys per tile
#define AM_DCH (HD / 8)               // 16-byte chunks per row
#define AM_KP (HD + 4)                // LDS pitch (16-bit units) of the K tile rows
#define AM_VP (AM_BN + 4)             // LDS pitch of the transposed V tile rows
#define AM_LD (AM_BN * AM_DCH / AM_NT)   // 16-byte chunks of K (and of V) per thread and tile

// four consecutive words n0 .. n0 + 3 of the dropout stream (hdn_philox.h): two Philox blocks
// (the key as two words, k0 / k1)
__device__ __forceinline__ void am_philox4(unsigned k0, unsigned k1, unsigned long long sub,
                                           unsigned long long n0, unsigned (&w)[4]) {
    const unsigned long long q = n0 >> 2;
    const uint4 a = hdn_philox(make_uint4((unsigned)q, (unsigned)(q >> 32), (unsigned)sub,
                                          (unsigned)(sub >> 32)), k0, k1);
    const unsigned long long q1 = q + 1;
    const uint4 c = hdn_philox(make_uint4((unsigned)q1, (unsigned)(q1 >> 32), (unsigned)sub,
                                          (unsigned)(sub >> 32)), k0, k1);
    const unsigned o = (unsigned)(n0 & 3);
    const unsigned x0 = a.x, x1 = a.y, x2 = a.z, x3 = a.w, x4 = c.x, x5 = c.y, x6 = c.z;
    w[0] = o == 0 ? x0 : o == 1 ? x1 : o == 2 ? x2 : x3;
    w[1] = o == 0 ? x1 : o == 1 ? x2 : o == 2 ? x3 : x4;
    w[2] = o == 0 ? x2 : o == 1 ? x3 : o == 2 ? x4 : x5;
    w[3] = o == 0 ? x3 : o == 1 ? x4 : o == 2 ? x5 : x6;
}

extern "C" __global__ void __launch_bounds__(AM_NT) hdn_attn_fwd_mfma(HDN_ATTN_FWD_PARAMS) {
    __shared__ __align__(16) hdn_u16 Ks[AM_BN * AM_KP];
    __shared__ __align__(16) hdn_u16 Vt[HD * AM_VP];
    const int tid = threadIdx.x, lane = tid & 63, w = tid >> 6, lq = lane & 31, hi = lane >> 5;
    const int q0 = blockIdx.x * AM_BM, h = blockIdx.y, b = blockIdx.z, hk = h / GRP;
    const HdnAttnLim L = hdn_attn_limits(b HDN_ATTN_LEN_ARGS);
#if SCALE_MODE == 0
    const float scale = SCALE_VALUE;
#elif SCALE_MODE == 1
    const float scale = scale_rt;
#else
    const float scale = *scale_p;
#endif
    const float sl2 = scale * HDN_LOG2E;
    const hdn_u16* Kb = K + (long long)b * KSB + (long long)hk * KSH;
    const hdn_u16* Vb = V + (long long)b * VSB + (long long)hk * VSH;
#if DROPOUT
    const unsigned long long seed = (unsigned long long)(long long)*seedp;
    const unsigned long long doff = (unsigned long long)(long long)*offp;
    const unsigned long long dsub = (unsigned long long)b * HQ + h;
    // the Philox key in VGPRs: its 10-round schedule, hoisted out of the loop, would take 20 of
    // the wavefront's ~100 SGPRs
    unsigned sk0 = (unsigned)seed, sk1 = (unsigned)(seed >> 32);
    am_vgpr(sk0);
    am_vgpr(sk1);
#endif
    const int i = q0 + 32 * w + lq;                 // this lane's query row
    const HdnAttnSpan sp = hdn_attn_row(L, i);      // its keys: sp.lo <= j < sp.hi
    // this lane's Q row as the B operand of Sᵀ = K Qᵀ: d = 8 ds + 4 hi + 0..3 of each k-step ds
    am_u2 qf[HD / 8];
    {
        const hdn_u16* Qr = Q + (long long)b * QSB + (long long)h * QSH + (long long)(i < SQ ? i : 0) * QSS;
#pragma unroll
        for (int ds = 0; ds < HD / 8; ++ds) {
            qf[ds] = am_ld4(Qr + 8 * ds + 4 * hi);
            if (i >= SQ) qf[ds] = am_u2{0u, 0u};
        }
    }
    // key range of this block (as attention_fwd.hip)
    const int ihi = hdn_imin(q0 + AM_BM, L.sq) - 1;
    int kbeg = 0, kend = L.skv;
    if (L.llim > -HDN_BIG) kbeg = hdn_imax(0, q0 + L.llim);
    if (L.rlim < HDN_BIG) kend = hdn_imin(kend, ihi + L.rlim + 1);
    if (ihi < q0) kend = kbeg;
    const int nb0 = kbeg / AM_BN, nb1 = kend > kbeg ? (kend + AM_BN - 1) / AM_BN : nb0;

    uint4 kr[AM_LD], vr[AM_LD];                     // the next tile in flight
    auto fetch = [&](int kv0) {
#pragma unroll
        for (int u = 0; u < AM_LD; ++u) {
            const int c = tid + u * AM_NT, r = c / AM_DCH, ch = c % AM_DCH;
            // keys past the sequence (or its padding length) are masked: zeros, never NaN * 0
            const bool in = kv0 + r < L.skv;
            const long long rr = in ? kv0 + r : 0;
            kr[u] = *reinterpret_cast<const uint4*>(Kb + rr * KSS + ch * 8);
            vr[u] = *reinterpret_cast<const uint4*>(Vb + rr * VSS + ch * 8);
            if (!in) kr[u] = vr[u] = make_uint4(0u, 0u, 0u, 0u);
        }
    };
    if (nb0 < nb1) fetch(nb0 * AM_BN);

    am_f16x16 acc[HD / 32];
#pragma unroll
    for (int c = 0; c < HD / 32; ++c) acc[c] = am_zero();
    float mrow = -INFINITY, lpart = 0.f;

    for (int nb = nb0; nb < nb1; ++nb) {
        const int kv0 = nb * AM_BN;
#pragma unroll
        for (int u = 0; u < AM_LD; ++u) {           // registers -> LDS (K rows, V transposed)
            const int c = tid + u * AM_NT, r = c / AM_DCH, ch = c % AM_DCH;
            *reinterpret_cast<am_u2*>(Ks + r * AM_KP + ch * 8) = am_u2{kr[u].x, kr[u].y};
            *reinterpret_cast<am_u2*>(Ks + r * AM_KP + ch * 8 + 4) = am_u2{kr[u].z, kr[u].w};
            const unsigned vw[4] = {vr[u].x, vr[u].y, vr[u].z, vr[u].w};
#pragma unroll
            for (int e = 0; e < 8; ++e)
                Vt[(ch * 8 + e) * AM_VP + r] = (hdn_u16)(vw[e >> 1] >> (16 * (e & 1)));
        }
        __syncthreads();
        if (nb + 1 < nb1) fetch(kv0 + AM_BN);
        // Sᵀ for the two 32-key halves t
        am_f16x16 s[2] = {am_zero(), am_zero()};
#pragma unroll
        for (int ds = 0; ds < HD / 8; ++ds) {
#pragma unroll
            for (int t = 0; t < 2; ++t)
                s[t] = am_mfma(am_ld4(Ks + (32 * t + lq) * AM_KP + 8 * ds + 4 * hi), qf[ds], s[t]);
        }
        // scale, mask (key j = kv0 + 32 t + 8 g + 4 hi + e), row maximum
        float mx = -INFINITY;
#pragma unroll
        for (int t = 0; t < 2; ++t) {
#pragma unroll
            for (int r = 0; r < 16; ++r) {
                const int j = kv0 + 32 * t + 8 * (r >> 2) + 4 * hi + (r & 3);
                const float v = (j >= sp.lo && j < sp.hi) ? s[t][r] * sl2 : -INFINITY;
                s[t][r] = v;
                mx = fmaxf(mx, v);
            }
        }
        mx = fmaxf(mx, __shfl_xor(mx, 32));
        const float mn = fmaxf(mrow, mx);
        const float base = mn == -INFINITY ? 0.f : mn;
        const float alpha = hdn_exp2(mrow - base);
        mrow = mn;
        float sum = 0.f;
#pragma unroll
        for (int t = 0; t < 2; ++t) {
#pragma unroll
            for (int g = 0; g < 4; ++g) {
#if DROPOUT
                unsigned dw[4];
                am_philox4(sk0, sk1, dsub, doff + (unsigned long long)i * SKV + (kv0 + 32 * t + 8 * g + 4 * hi), dw);
#endif
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    float p = hdn_exp2(s[t][4 * g + e] - base);
                    sum += p;
#if DROPOUT
                    p = dw[e] >= DTHR ? p * DSCALE : 0.f;
#endif
                    s[t][4 * g + e] = p;
                }
            }
        }
        lpart = lpart * alpha + sum;
#pragma unroll
        for (int c = 0; c < HD / 32; ++c)
#pragma unroll
            for (int r = 0; r < 16; ++r) acc[c][r] *= alpha;
        // Oᵀ += Vᵀ Pᵀ over the 8 k-steps of 8 keys
#pragma unroll
        for (int t = 0; t < 2; ++t) {
#pragma unroll
            for (int g = 0; g < 4; ++g) {
                const am_u2 pb = am_pack(s[t], g, 1.f);
#pragma unroll
                for (int c = 0; c < HD / 32; ++c)
                    acc[c] = am_mfma(am_ld4(Vt + (32 * c + lq) * AM_VP + 32 * t + 8 * g + 4 * hi), pb, acc[c]);
            }
        }
        __syncthreads();
    }
    // epilogue: O = acc / l (0 for rows without keys), stats = ln(sum exp(s))
    const float l = lpart + __shfl_xor(lpart, 32);
    if (i < SQ) {
        const float inv = l > 0.f ? 1.f / l : 0.f;
        hdn_u16* Or = O + (long long)b * OSB + (long long)h * OSH + (long long)i * OSS;
#pragma unroll
        for (int c = 0; c < HD / 32; ++c)
#pragma unroll
            for (int g = 0; g < 4; ++g)
                *reinterpret_cast<am_u2*>(Or + 32 * c + 8 * g + 4 * hi) = am_pack(acc[c], g, inv);
#if HAS_STATS
        if (hi == 0)
            LSE[(long long)b * LSB + (long long)h * LSH + (long long)i * LSS] =
                l > 0.f ? mrow * HDN_LN2 + logf(l) : INFINITY;
#endif
    }
}
#else
// not a CDNA compile: the symbol exists, the plan builder never launches it
extern "C" __global__ void hdn_attn_fwd_mfma() {}
#endif
