// attention_bwd_mfma.hip - flash-attention backward on AMD CDNA matrix cores (gfx90a / gfx942,
// wave64, v_mfma_f32_32x32x8 f16 / bf16_1k; hdn_mfma.h): the algorithm of attention_bwd.hip
// (FlashAttention-2, P recomputed from the forward statistics, the same masks and Philox
// dropout stream, dQ accumulated in fp32 in the workspace).
// COMPILED OFFLINE BY `make check-amd`, NEVER RUN (no AMD GPU in this project's CI).
//  hdn_attn_bwd_pre  : Dsum[b][h][i] = sum_d dO * O (32 lanes per row)
//  hdn_attn_bwd_mfma : one block = 64 keys of one (b, kv head), AM_NW = 2 wavefronts of 32 keys;
//                      loops over the query heads of its group and the 32-row query tiles its
//                      masks reach.  Wavefront w, lane (hi, lq): key j = kv0 + 32 w + lq.
//                        S  (32 queries x 32 keys) = Q Kᵀ,  dP = dO Vᵀ   (A: Q / dO rows from
//                          LDS, B: K / V rows from LDS); lane holds rows 8 g + 4 hi + e of its
//                          key's column;
//                        P = exp2(S sl2 - lse log2e) (masked), dropout z, dS = P (dP z - Dsum);
//                        dVᵀ (D x 32 keys) += dOᵀ (P z),  dKᵀ += Qᵀ dS   (A: columns of the dO /
//                          Q tiles, B: P z / dS packed from the S / dP registers), in registers
//                          for the whole kernel (no atomics: GQA's sum stays in the block);
//                        dS goes to LDS, then dQ (32 x D) += dS (32 x 64) K (64 x D), the D
//                          columns split over the wavefronts, added into dQacc with atomics.
//  hdn_attn_bwd_dq   : dq = scale * dQacc in dq's type and strides.
#ifndef HDN_GENERATED
#define HDN_BF16_IO 0
#define HD 128
#define GRP 2
#define NB 1
#define HQ 2
#define SQ 128
#define SKV 128
#define QSB 32768
#define QSH 16384
#define QSS 128
#define KSB 16384
#define KSH 16384
#define KSS 128
#define VSB 16384
#define VSH 16384
#define VSS 128
#define OSB 32768
#define OSH 16384
#define OSS 128
#define GSB 32768
#define GSH 16384
#define GSS 128
#define DQSB 32768
#define DQSH 16384
#define DQSS 128
#define DKSB 16384
#define DKSH 16384
#define DKSS 128
#define DVSB 16384
#define DVSH 16384
#define DVSS 128
#define LSB 256
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
#define DTHR 858993459u
#define DSCALE 1.25f
#define SCALE_MODE 0
#define SCALE_VALUE 0.088388f
#define HDN_ATTN_LEN_PARAMS
#define HDN_ATTN_LEN_ARGS
#define HDN_ATTN_BWD_PARAMS const hdn_u16* __restrict__ Q, const hdn_u16* __restrict__ K, \
    const hdn_u16* __restrict__ V, const hdn_u16* __restrict__ dO, const float* __restrict__ LSE, \
    hdn_u16* __restrict__ dK, hdn_u16* __restrict__ dV, const float* __restrict__ Dsum, \
    float* __restrict__ dQacc, const long long* __restrict__ seedp, const long long* __restrict__ offp
#define HDN_ATTN_PRE_PARAMS const hdn_u16* __restrict__ O, const hdn_u16* __restrict__ dO, \
    float* __restrict__ Dsum
#define HDN_ATTN_DQ_PARAMS const float* __restrict__ dQacc, hdn_u16* __restrict__ dQ
#define HDN_TO_FLOAT(x) hdn_half_bits_to_float(x)
#define HDN_FROM_FLOAT(x) hdn_from_float<hdn_half>(x).bits
#endif
#include "hdn_attention.h"

#if HDN_HIP && (defined(__gfx90a__) || defined(__gfx940__) || defined(__gfx941__) || defined(__gfx942__))
#include "hdn_mfma.h"

#define AM_NW 2                  // wavefronts per block, 32 keys each
#define AM_NT (64 * AM_NW)
#define AM_BN (32 * AM_NW)       // keys per block
#define AM_BM 32                 // query rows per tile
#define AM_DCH (HD / 8)
#define AM_P (HD + 4)            // LDS pitch (16-bit units) of the K / V / Q / dO rows
#define AM_SP (AM_BN + 4)        // LDS pitch of the dS rows

#if SCALE_MODE == 0
#define HDN_SCALE SCALE_VALUE
#elif SCALE_MODE == 1
#define HDN_SCALE scale_rt
#else
#define HDN_SCALE (*scale_p)
#endif

// rows [r0, r0 + n) of a row-major 16-bit matrix (row stride ss) into an LDS tile of pitch AM_P;
// rows at or past lim read zeros
__device__ __forceinline__ void am_tile(hdn_u16* dst, const hdn_u16* src, long long ss, int r0,
                                        int n, int lim, int tid) {
    for (int c = tid; c < n * AM_DCH; c += AM_NT) {
        const int r = c / AM_DCH, ch = c % AM_DCH;
        uint4 v = make_uint4(0u, 0u, 0u, 0u);
        if (r0 + r < lim) v = *reinterpret_cast<const uint4*>(src + (long long)(r0 + r) * ss + ch * 8);
        *reinterpret_cast<am_u2*>(dst + r * AM_P + ch * 8) = am_u2{v.x, v.y};
        *reinterpret_cast<am_u2*>(dst + r * AM_P + ch * 8 + 4) = am_u2{v.z, v.w};
    }
}

// hdn_philox_word with the key (seed) already split in two words
__device__ __forceinline__ unsigned am_philox_word(unsigned k0, unsigned k1, unsigned long long sub,
                                                   unsigned long long n) {
    const unsigned long long q = n >> 2;
    const uint4 w = hdn_philox(make_uint4((unsigned)q, (unsigned)(q >> 32), (unsigned)sub,
                                          (unsigned)(sub >> 32)), k0, k1);
    const unsigned k = (unsigned)(n & 3);
    return k == 0 ? w.x : k == 1 ? w.y : k == 2 ? w.z : w.w;
}

// 32 lanes per row: Dsum = sum_d dO * O (the lanes of one row stay in one half-wavefront)
extern "C" __global__ void __launch_bounds__(256) hdn_attn_bwd_pre(HDN_ATTN_PRE_PARAMS) {
    const int lane = threadIdx.x & 31;
    const long long row = (long long)blockIdx.x * 8 + (threadIdx.x >> 5);   // (b, h, i) flat
    if (row >= (long long)HQ * SQ * NB) return;
    const int i = (int)(row % SQ), h = (int)((row / SQ) % HQ), b = (int)(row / ((long long)SQ * HQ));
    const hdn_u16* o = O + (long long)b * OSB + (long long)h * OSH + (long long)i * OSS;
    const hdn_u16* g = dO + (long long)b * GSB + (long long)h * GSH + (long long)i * GSS;
    float s = 0.f;
    for (int d = lane; d < HD; d += 32) s += HDN_TO_FLOAT(o[d]) * HDN_TO_FLOAT(g[d]);
#pragma unroll
    for (int m = 16; m > 0; m >>= 1) s += __shfl_xor(s, m);
    if (lane == 0) Dsum[row] = s;
}

extern "C" __global__ void __launch_bounds__(256) hdn_attn_bwd_dq(HDN_ATTN_DQ_PARAMS) {
    const long long n = (long long)blockIdx.x * 256 + threadIdx.x;
    if (n >= (long long)NB * HQ * SQ * HD) return;
    const int d = (int)(n % HD);
    const long long row = n / HD;
    const int i = (int)(row % SQ), h = (int)((row / SQ) % HQ), b = (int)(row / ((long long)SQ * HQ));
    dQ[(long long)b * DQSB + (long long)h * DQSH + (long long)i * DQSS + d] =
        HDN_FROM_FLOAT(dQacc[n] * HDN_SCALE);
}

extern "C" __global__ void __launch_bounds__(AM_NT) hdn_attn_bwd_mfma(HDN_ATTN_BWD_PARAMS) {
    __shared__ __align__(16) hdn_u16 Ks[AM_BN * AM_P];
    __shared__ __align__(16) hdn_u16 Vs[AM_BN * AM_P];
    __shared__ __align__(16) hdn_u16 Qs[AM_BM * AM_P];
    __shared__ __align__(16) hdn_u16 Gs[AM_BM * AM_P];
    __shared__ __align__(16) hdn_u16 Ss[AM_BM * AM_SP];     // dS [query][key]
    __shared__ float lse_s[AM_BM], dsum_s[AM_BM];
    const int tid = threadIdx.x, lane = tid & 63, w = tid >> 6, lq = lane & 31, hi = lane >> 5;
    const int kv0 = blockIdx.x * AM_BN, hk = blockIdx.y, b = blockIdx.z;
    const HdnAttnLim L = hdn_attn_limits(b HDN_ATTN_LEN_ARGS);
    const float scale = HDN_SCALE;
    const float sl2 = scale * HDN_LOG2E;
#if DROPOUT
    const unsigned long long seed = (unsigned long long)(long long)*seedp;
    const unsigned long long doff = (unsigned long long)(long long)*offp;
    // the Philox key in VGPRs: its 10-round schedule, hoisted out of the loops, would take 20 of
    // the wavefront's ~100 SGPRs and make them spill
    unsigned sk0 = (unsigned)seed, sk1 = (unsigned)(seed >> 32);
    am_vgpr(sk0);
    am_vgpr(sk1);
#endif
    // rows past the sequences (or their padding lengths) only meet masked elements: zeros
    // there keep NaN * 0 out of the products
    am_tile(Ks, K + (long long)b * KSB + (long long)hk * KSH, KSS, kv0, AM_BN, L.skv, tid);
    am_tile(Vs, V + (long long)b * VSB + (long long)hk * VSH, VSS, kv0, AM_BN, L.skv, tid);
    // query rows these keys can see: llim <= j - i <= rlim  =>  j - rlim <= i <= j - llim
    int ibeg = 0, iend = L.sq;
    if (L.rlim < HDN_BIG) ibeg = hdn_imax(0, kv0 - L.rlim);
    if (L.llim > -HDN_BIG) iend = hdn_imin(iend, kv0 + AM_BN - 1 - L.llim + 1);
    if (kv0 >= L.skv) iend = ibeg;
    const int qb0 = ibeg / AM_BM, qb1 = iend > ibeg ? (iend + AM_BM - 1) / AM_BM : qb0;

    const int kl = 32 * w + lq, j = kv0 + kl;       // this lane's key
    const HdnAttnSpan cs = hdn_attn_col(L, j);      // the queries that see it: cs.lo <= i < cs.hi
    am_f16x16 dk[HD / 32], dv[HD / 32];
#pragma unroll
    for (int c = 0; c < HD / 32; ++c) dk[c] = dv[c] = am_zero();

    const int nqb = qb1 - qb0, nit = GRP * nqb;
    for (int it = 0; it < nit; ++it) {
        const int h = hk * GRP + it / nqb, q0 = (qb0 + it % nqb) * AM_BM;
        am_tile(Qs, Q + (long long)b * QSB + (long long)h * QSH, QSS, q0, AM_BM, L.sq, tid);
        am_tile(Gs, dO + (long long)b * GSB + (long long)h * GSH, GSS, q0, AM_BM, L.sq, tid);
        if (tid < AM_BM) {   // rows past SQ read 0 (their elements are masked)
            const int i = q0 + tid;
            lse_s[tid] = i < SQ ? LSE[(long long)b * LSB + (long long)h * LSH + (long long)i * LSS] : 0.f;
            dsum_s[tid] = i < SQ ? Dsum[((long long)b * HQ + h) * SQ + i] : 0.f;
        }
        __syncthreads();
        // S = Q Kᵀ and dP = dO Vᵀ for this wavefront's 32 keys
        am_f16x16 s = am_zero(), dp = am_zero();
#pragma unroll
        for (int ds = 0; ds < HD / 8; ++ds) {
            const int o = 8 * ds + 4 * hi;
            s = am_mfma(am_ld4(Qs + lq * AM_P + o), am_ld4(Ks + kl * AM_P + o), s);
            dp = am_mfma(am_ld4(Gs + lq * AM_P + o), am_ld4(Vs + kl * AM_P + o), dp);
        }
        // P, dropout, dS (in place: s <- P z for dV, dp <- dS); query il = 8 g + 4 hi + e
#if DROPOUT
        const unsigned long long dsub = (unsigned long long)b * HQ + h;
#endif
#pragma unroll
        for (int r = 0; r < 16; ++r) {
            const int il = 8 * (r >> 2) + 4 * hi + (r & 3), ii = q0 + il;
            const bool ok = ii >= cs.lo && ii < cs.hi;
            const float p = ok ? hdn_exp2(s[r] * sl2 - lse_s[il] * HDN_LOG2E) : 0.f;
            float z = 1.f;
#if DROPOUT
            z = am_philox_word(sk0, sk1, dsub, doff + (unsigned long long)ii * SKV + j) >= DTHR ? DSCALE : 0.f;
#endif
            dp[r] = p * (dp[r] * z - dsum_s[il]);
            s[r] = p * z;
        }
        // dVᵀ += dOᵀ (P z) ; dKᵀ += Qᵀ dS   (A: the d = 32 c + lq column of the dO / Q tile)
#pragma unroll
        for (int g = 0; g < AM_BM / 8; ++g) {
            const am_u2 pb = am_pack(s, g, 1.f), sb = am_pack(dp, g, 1.f);
            const int qr = 8 * g + 4 * hi;
#pragma unroll
            for (int c = 0; c < HD / 32; ++c) {
                dv[c] = am_mfma(am_ld4s(Gs + qr * AM_P + 32 * c + lq, AM_P), pb, dv[c]);
                dk[c] = am_mfma(am_ld4s(Qs + qr * AM_P + 32 * c + lq, AM_P), sb, dk[c]);
            }
            // dS (16-bit, as the products use it) to LDS for dQ: Ss[query][key]
            const am_u2 sv = sb;
            Ss[(qr + 0) * AM_SP + kl] = (hdn_u16)(sv.x & 0xffffu);
            Ss[(qr + 1) * AM_SP + kl] = (hdn_u16)(sv.x >> 16);
            Ss[(qr + 2) * AM_SP + kl] = (hdn_u16)(sv.y & 0xffffu);
            Ss[(qr + 3) * AM_SP + kl] = (hdn_u16)(sv.y >> 16);
        }
        __syncthreads();
        // dQ[q0 + m][d] += sum over the block's keys of dS[m][key] K[key][d]; wavefront w: the
        // 32-column groups c = w, w + AM_NW, ...
        float* dQb = dQacc + ((long long)b * HQ + h) * SQ * HD;
#pragma unroll
        for (int c = w; c < HD / 32; c += AM_NW) {
            am_f16x16 aq = am_zero();
#pragma unroll
            for (int g = 0; g < AM_BN / 8; ++g)
                aq = am_mfma(am_ld4(Ss + lq * AM_SP + 8 * g + 4 * hi),
                             am_ld4s(Ks + (8 * g + 4 * hi) * AM_P + 32 * c + lq, AM_P), aq);
#pragma unroll
            for (int r = 0; r < 16; ++r) {
                const int i = q0 + 8 * (r >> 2) + 4 * hi + (r & 3);
                if (i < SQ) atomicAdd(dQb + (long long)i * HD + 32 * c + lq, aq[r]);
            }
        }
        __syncthreads();
    }
    // dK = scale * dKᵀ, dV = dVᵀ: this lane's key row, d = 32 c + 8 g + 4 hi + 0..3
    if (j < SKV) {
        hdn_u16* dkr = dK + (long long)b * DKSB + (long long)hk * DKSH + (long long)j * DKSS;
        hdn_u16* dvr = dV + (long long)b * DVSB + (long long)hk * DVSH + (long long)j * DVSS;
#pragma unroll
        for (int c = 0; c < HD / 32; ++c)
#pragma unroll
            for (int g = 0; g < 4; ++g) {
                *reinterpret_cast<am_u2*>(dkr + 32 * c + 8 * g + 4 * hi) = am_pack(dk[c], g, scale);
                *reinterpret_cast<am_u2*>(dvr + 32 * c + 8 * g + 4 * hi) = am_pack(dv[c], g, 1.f);
            }
    }
}
#else
// not a CDNA compile: the symbols exist, the plan builder never launches them
extern "C" __global__ void hdn_attn_bwd_pre() {}
extern "C" __global__ void hdn_attn_bwd_dq() {}
extern "C" __global__ void hdn_attn_bwd_mfma() {}
#endif
