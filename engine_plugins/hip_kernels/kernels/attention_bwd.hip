// attention_bwd.hip - flash-attention backward (FlashAttention-2 schedule) on mma.sync m16n8k16,
// recomputing P from the forward statistics; three kernels:
//  hdn_attn_bwd_pre : Dsum[b][h][i] = sum_d dO * O (fp32, workspace)
//  hdn_attn_bwd     : one block = 64 keys of one (b, kv head); loops over the query heads of its
//                     group and the query tiles its masks reach.  Each warp owns 16 keys: it
//                     computes Sᵀ = K Qᵀ and dPᵀ = V dOᵀ for its keys, P = exp(S - lse), dV += Pᵀ dO,
//                     dSᵀ = Pᵀ (dPᵀ - Dsum), dK += dSᵀ Q in registers (no atomics: GQA's dK/dV
//                     sum stays inside the block), then dSᵀ goes through shared memory and every
//                     warp computes its 16 query rows of dS K; the 64 x D fp32 tile is staged in
//                     shared memory and added into the fp32 dQ accumulator by the copy engine
//                     (cp.reduce.async.bulk .add.f32, sm_90; red.add atomics before Hopper).
//                     Masks are applied (branch-free) only on tiles that cross a boundary.
//  hdn_attn_bwd_dq  : dq = scale * dQacc in dq's type and strides.
// Head sizes (hdn_attention.h): Q / K / dQ / dK rows of HD, V / O / dO / dV rows of HDV, tiles
// HDP / HDVP wide (multiples of 64, padding columns zero-filled, never stored; dQacc rows are HDP
// wide).  NSPLIT > 1 (wide heads): the dK / dQ and dV columns are split over NSPLIT blocks per
// 64 keys (DKC / DVC columns each), every block recomputing S and dP, so that the dK / dV
// accumulators fit the registers.
#ifndef HDN_GENERATED
#define HDN_MMA_TYPE "f16"
#define HD 128
#define HDV 128
#define HDP 128
#define HDVP 128
#define NSPLIT 1
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
#define DROPOUT 0
#define DTHR 0u
#define DSCALE 1.0f
#define SCALE_MODE 0
#define SCALE_VALUE 0.088388f
#define HDN_ATTN_LEN_PARAMS
#define HDN_ATTN_LEN_ARGS
#define HDN_ATTN_BWD_PARAMS const hdn_u16* __restrict__ Q, const hdn_u16* __restrict__ K, \
    const hdn_u16* __restrict__ V, const hdn_u16* __restrict__ dO, const float* __restrict__ LSE, \
    hdn_u16* __restrict__ dK, hdn_u16* __restrict__ dV, const float* __restrict__ Dsum, \
    float* __restrict__ dQacc
#define HDN_ATTN_PRE_PARAMS const hdn_u16* __restrict__ O, const hdn_u16* __restrict__ dO, \
    float* __restrict__ Dsum
#define HDN_ATTN_DQ_PARAMS const float* __restrict__ dQacc, hdn_u16* __restrict__ dQ
#define HDN_TO_FLOAT(x) hdn_half_bits_to_float(x)
#define HDN_FROM_FLOAT(x) hdn_from_float<hdn_half>(x).bits
#endif
#include "hdn_attention.h"
#if HDN_CUDA   // mma.sync: NVIDIA only (AMD CDNA: attention_bwd_mfma.hip)

#define BM 64
#define BN 64
#define NW 4
#define NT 128
#define DCH (HDP / 8)             // 16-byte chunks of a Q / K tile row
#define DCHV (HDVP / 8)           // of a V / dO tile row
#define KSQK ((HD + 15) / 16)     // 16-column steps of K Qᵀ that hold data
#define KSPV ((HDV + 15) / 16)    // of V dOᵀ
#ifndef NSPLIT
#define NSPLIT 1
#endif
#define DKC (HDP / NSPLIT)        // dK / dQ columns of one block
#define DVC (HDVP / NSPLIT)       // dV columns of one block
#define QGT (BM * (HDP + HDVP))   // elements of one (Q tile, dO tile) buffer
#if HDP + HDVP <= 128
#define NBUF 2       // Q / dO double-buffered (shared memory allows it at D = Dv = 64)
#else
#define NBUF 1
#endif
// sm_90: dQ tiles go to the fp32 accumulator as bulk reduce-adds of the copy engine (else: atomics)
#if HDN_CUDA && defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
#define HDN_BULK_DQ 1
#else
#define HDN_BULK_DQ 0
#endif

#if SCALE_MODE == 0
#define HDN_SCALE SCALE_VALUE
#elif SCALE_MODE == 1
#define HDN_SCALE scale_rt
#else
#define HDN_SCALE (*scale_p)
#endif

// one warp per row: Dsum = sum_d dO * O
extern "C" __global__ void __launch_bounds__(256) hdn_attn_bwd_pre(HDN_ATTN_PRE_PARAMS) {
    const int lane = threadIdx.x & 31;
    const long long row = (long long)blockIdx.x * 8 + (threadIdx.x >> 5);   // (b, h, i) flat
    if (row >= (long long)HQ * SQ * NB) return;
    const int i = (int)(row % SQ), h = (int)((row / SQ) % HQ), b = (int)(row / ((long long)SQ * HQ));
#if HDN_RAGGED_ROWS
    const HdnAttnLim L = hdn_attn_limits(b HDN_ATTN_LEN_ARGS);
#endif
    const hdn_u16* o = O + O_BOFF(b) + (long long)h * OSH + (long long)i * OSS;
    const hdn_u16* g = dO + G_BOFF(b) + (long long)h * GSH + (long long)i * GSS;
    float s = 0.f;
#if HDN_RAGGED_ROWS
    if (!HDN_RAGGED_OK(b)) s = __int_as_float(0x7fffffff);
    else
#endif
    if (i < O_ROWS && i < G_ROWS)
        for (int d = lane; d < HDV; d += 32) s += HDN_TO_FLOAT(o[d]) * HDN_TO_FLOAT(g[d]);
#pragma unroll
    for (int m = 16; m > 0; m >>= 1) s += __shfl_xor_sync(0xffffffffu, s, m);
    if (lane == 0) Dsum[row] = s;
}

extern "C" __global__ void __launch_bounds__(256) hdn_attn_bwd_dq(HDN_ATTN_DQ_PARAMS) {
    const long long n = (long long)blockIdx.x * 256 + threadIdx.x;
    if (n >= (long long)NB * HQ * SQ * HD) return;
    const int d = (int)(n % HD);
    const long long row = n / HD;
    const int i = (int)(row % SQ), h = (int)((row / SQ) % HQ), b = (int)(row / ((long long)SQ * HQ));
#if HDN_RAGGED_ROWS
    const HdnAttnLim L = hdn_attn_limits(b HDN_ATTN_LEN_ARGS);
#endif
    if (i >= DQ_ROWS) return;
    dQ[DQ_BOFF(b) + (long long)h * DQSH + (long long)i * DQSS + d] =
        HDN_RAGGED_OK(b) ? HDN_FROM_FLOAT(dQacc[row * HDP + d] * HDN_SCALE) : HDN_NAN16;
}

extern "C" __global__ void __launch_bounds__(NT) hdn_attn_bwd(HDN_ATTN_BWD_PARAMS) {
    extern __shared__ __align__(16) hdn_u16 hdn_smem[];
    hdn_u16* Ks = hdn_smem;
    hdn_u16* Vs = Ks + BN * HDP;
    hdn_u16* Qs0 = Vs + BN * HDVP;       // NBUF x (Q tile, dO tile)
    hdn_u16* Ss = Qs0 + NBUF * QGT;      // dSᵀ [key][query]
    float* ls0 = reinterpret_cast<float*>(Ss + BN * BM);   // NBUF x (lse, Dsum)
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int kv0 = (blockIdx.x / NSPLIT) * BN, hk = blockIdx.y, b = blockIdx.z;
    const int c0k = (blockIdx.x % NSPLIT) * DKC, c0v = (blockIdx.x % NSPLIT) * DVC;   // column slices
    const HdnAttnLim L = hdn_attn_limits(b HDN_ATTN_LEN_ARGS);
    const float scale = HDN_SCALE;
    const float sl2 = scale * HDN_LOG2E;
#if HDN_RAGGED_ROWS
    if (!HDN_RAGGED_OK(b)) {   // a ragged batch offset off 16-byte alignment: NaN rows, no loads
        for (int c = tid; c < BN * (HD + HDV); c += NT) {
            const int j = kv0 + c / (HD + HDV), d = c % (HD + HDV);
            if (j < SKV && d < HD && j < DK_ROWS) dK[DK_BOFF(b) + (long long)hk * DKSH + (long long)j * DKSS + d] = HDN_NAN16;
            if (j < SKV && d >= HD && j < DV_ROWS) dV[DV_BOFF(b) + (long long)hk * DVSH + (long long)j * DVSS + d - HD] = HDN_NAN16;
        }
        return;
    }
#endif
    const hdn_u16* Kb = K + K_BOFF(b) + (long long)hk * KSH;
    const hdn_u16* Vb = V + V_BOFF(b) + (long long)hk * VSH;
#if DROPOUT
    const unsigned long long seed = (unsigned long long)(long long)*seedp;
    const unsigned long long doff = (unsigned long long)(long long)*offp;
#endif
    hdn_attn_tile<BN, DCH, NT>(Ks, Kb, KSS, kv0, K_ROWS, HD, tid);
    hdn_attn_tile<BN, DCHV, NT>(Vs, Vb, VSS, kv0, V_ROWS, HDV, tid);
    hdn_cp_commit();
    // query rows these keys can see: llim <= j - i <= rlim  =>  j - rlim <= i <= j - llim
    int ibeg = 0, iend = L.sq;
    if (L.rlim < HDN_BIG) ibeg = hdn_imax(0, kv0 - L.rlim);
    if (L.llim > -HDN_BIG) iend = hdn_imin(iend, kv0 + BN - 1 - L.llim + 1);
    if (kv0 >= L.skv) iend = ibeg;
    const int qb0 = ibeg / BM, qb1 = iend > ibeg ? (iend + BM - 1) / BM : qb0;

    float dk[DKC / 8][4], dv[DVC / 8][4];
#pragma unroll
    for (int t = 0; t < DKC / 8; ++t)
#pragma unroll
        for (int e = 0; e < 4; ++e) dk[t][e] = 0.f;
#pragma unroll
    for (int t = 0; t < DVC / 8; ++t)
#pragma unroll
        for (int e = 0; e < 4; ++e) dv[t][e] = 0.f;
    const int j0 = kv0 + warp * 16 + (lane >> 2);   // this thread's keys: j0, j0 + 8
    const HdnAttnSpan cs0 = hdn_attn_col(L, j0), cs1 = hdn_attn_col(L, j0 + 8);
#if HDN_BULK_DQ
    float* dqs = ls0 + NBUF * 2 * BM;     // dQ tile staging [BM][DKC + 8]
    const unsigned dqs_a = hdn_saddr(dqs);
#endif

    // the (query head, query tile) pairs this block visits, in order; Q / dO / lse / Dsum tiles
    // through NBUF shared-memory buffers (NBUF 2: the next tile loads during this one)
    const int nqb = qb1 - qb0, nit = GRP * nqb;
    auto load_tile = [&](int it) {
        const int h = hk * GRP + it / nqb, q0 = (qb0 + it % nqb) * BM, bf = it % NBUF;
        const hdn_u16* Qb = Q + Q_BOFF(b) + (long long)h * QSH;
        const hdn_u16* Gb = dO + G_BOFF(b) + (long long)h * GSH;
        hdn_u16* Qd = Qs0 + bf * QGT;
        hdn_u16* Gd = Qd + BM * HDP;
        hdn_attn_tile<BM, DCH, NT>(Qd, Qb, QSS, q0, Q_ROWS, HD, tid);
        hdn_attn_tile<BM, DCHV, NT>(Gd, Gb, GSS, q0, G_ROWS, HDV, tid);
        if (tid < BM) {   // rows past SQ read 0 (their tiles are boundary tiles: masked)
            const int i = q0 + tid;
            const bool in = i < SQ, inl = i < L_ROWS;
            float* ld = ls0 + bf * (2 * BM);
            hdn_cp4(ld + tid, LSE + L_BOFF(b) + (long long)h * LSH + (long long)(inl ? i : 0) * LSS, inl);
            hdn_cp4(ld + BM + tid, Dsum + ((long long)b * HQ + h) * SQ + (in ? i : 0), in);
        }
    };
#if NBUF == 2
    if (nit > 0) load_tile(0);
    hdn_cp_commit();
#endif
    for (int it = 0; it < nit; ++it) {
        const int h = hk * GRP + it / nqb, q0 = (qb0 + it % nqb) * BM, bf = it % NBUF;
        const hdn_u16* Qs = Qs0 + bf * QGT;
        const hdn_u16* Gs = Qs + BM * HDP;
        const float* lse_s = ls0 + bf * (2 * BM);
        const float* dsum_s = lse_s + BM;
        float* dQb = dQacc + ((long long)b * HQ + h) * SQ * HDP + c0k;
#if DROPOUT
        const unsigned long long dsub = (unsigned long long)b * HQ + h;
#endif
        HDN_ATTN_MOD_INIT(b, h);
#if NBUF == 2
        if (it + 1 < nit) load_tile(it + 1);
        hdn_cp_commit();
        hdn_cp_wait<1>();
#else
        load_tile(it);
        hdn_cp_commit();
        hdn_cp_wait<0>();
#endif
        __syncthreads();
        // Sᵀ = K Qᵀ and dPᵀ = V dOᵀ for this warp's 16 keys x 64 queries
        float st[8][4], dp[8][4];
#pragma unroll
        for (int t = 0; t < 8; ++t)
#pragma unroll
            for (int e = 0; e < 4; ++e) st[t][e] = dp[t][e] = 0.f;
        // the 16-column steps both products take together (tiles of one width), then the rest
#if HDP == HDVP
#define KSC (KSQK < KSPV ? KSQK : KSPV)
#else
#define KSC 0
#endif
#pragma unroll
        for (int ks = 0; ks < KSC; ++ks) {
            unsigned ka[4], va[4];
            hdn_ldsm4(ka, Ks + hdn_swz<DCH>(warp * 16 + (lane & 15), 2 * ks + (lane >> 4)));
            hdn_ldsm4(va, Vs + hdn_swz<DCH>(warp * 16 + (lane & 15), 2 * ks + (lane >> 4)));
#pragma unroll
            for (int jp = 0; jp < 4; ++jp) {
                unsigned qf[4], gf[4];
                const int rr = jp * 16 + (lane & 7) + ((lane >> 4) << 3), cc = 2 * ks + ((lane >> 3) & 1);
                hdn_ldsm4(qf, Qs + hdn_swz<DCH>(rr, cc));
                hdn_ldsm4(gf, Gs + hdn_swz<DCH>(rr, cc));
                hdn_mma16816(st[2 * jp], ka, qf);
                hdn_mma16816(st[2 * jp + 1], ka, qf + 2);
                hdn_mma16816(dp[2 * jp], va, gf);
                hdn_mma16816(dp[2 * jp + 1], va, gf + 2);
            }
        }
#pragma unroll
        for (int ks = KSC; ks < KSQK; ++ks) {
            unsigned ka[4];
            hdn_ldsm4(ka, Ks + hdn_swz<DCH>(warp * 16 + (lane & 15), 2 * ks + (lane >> 4)));
#pragma unroll
            for (int jp = 0; jp < 4; ++jp) {
                unsigned qf[4];
                hdn_ldsm4(qf, Qs + hdn_swz<DCH>(jp * 16 + (lane & 7) + ((lane >> 4) << 3),
                                                2 * ks + ((lane >> 3) & 1)));
                hdn_mma16816(st[2 * jp], ka, qf);
                hdn_mma16816(st[2 * jp + 1], ka, qf + 2);
            }
        }
#pragma unroll
        for (int ks = KSC; ks < KSPV; ++ks) {
            unsigned va[4];
            hdn_ldsm4(va, Vs + hdn_swz<DCHV>(warp * 16 + (lane & 15), 2 * ks + (lane >> 4)));
#pragma unroll
            for (int jp = 0; jp < 4; ++jp) {
                unsigned gf[4];
                hdn_ldsm4(gf, Gs + hdn_swz<DCHV>(jp * 16 + (lane & 7) + ((lane >> 4) << 3),
                                                 2 * ks + ((lane >> 3) & 1)));
                hdn_mma16816(dp[2 * jp], va, gf);
                hdn_mma16816(dp[2 * jp + 1], va, gf + 2);
            }
        }
        const bool full = kv0 + BN <= L.skv && q0 + BM <= L.sq &&
                          (L.rlim >= HDN_BIG || kv0 + BN - 1 - q0 <= L.rlim) &&
                          (L.llim <= -HDN_BIG || kv0 - (q0 + BM - 1) >= L.llim);
        // P, dropout, dS (in place: st <- P (dropped) for dV, dp <- dS); masks only on
        // boundary tiles, branch-free (rows without keys have lse = +inf: P = 0)
        auto elem = [&](int t, int e, bool ok) {
            const int il = 8 * t + 2 * (lane & 3) + (e & 1);
            const float p = ok ? hdn_exp2(HDN_ATTN_SCORE(st[t][e] * sl2, q0 + il, j0 + 8 * (e >> 1)) -
                                          lse_s[il] * HDN_LOG2E)
                               : 0.f;
            float z = 1.f;
#if DROPOUT
            {
                const int jj = j0 + 8 * (e >> 1), ii = q0 + il;
                unsigned w = hdn_philox_word(seed, dsub, doff + (unsigned long long)ii * SKV + jj);
                z = w >= DTHR ? DSCALE : 0.f;
            }
#endif
            const float dpv = dp[t][e] * z;
            dp[t][e] = p * (dpv - dsum_s[il]);
            st[t][e] = p * z;
#if ATT_DBIAS
            // dbias: dS summed over the broadcast dimensions (one block of each column split adds)
            if (ok && c0k == 0)
                atomicAdd(att_dbias + (long long)b * DBW_B + (long long)h * DBW_H + (long long)(q0 + il) * DBW_I +
                              (long long)(j0 + 8 * (e >> 1)) * DBW_J,
                          dp[t][e]);
#endif
        };
        if (full) {
#pragma unroll
            for (int t = 0; t < 8; ++t)
#pragma unroll
                for (int e = 0; e < 4; ++e) elem(t, e, true);
        } else {
#pragma unroll
            for (int t = 0; t < 8; ++t)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int ii = q0 + 8 * t + 2 * (lane & 3) + (e & 1);
                    const HdnAttnSpan& cs = (e >> 1) ? cs1 : cs0;
                    elem(t, e, ii >= cs.lo && ii < cs.hi);
                }
        }
        // dV += Pᵀ dO ; dK += dSᵀ Q   (A = the C fragments, B = dO / Q transposed)
#pragma unroll
        for (int ks = 0; ks < BM / 16; ++ks) {
            unsigned pa[4] = {hdn_pack2(st[2 * ks][0], st[2 * ks][1]), hdn_pack2(st[2 * ks][2], st[2 * ks][3]),
                              hdn_pack2(st[2 * ks + 1][0], st[2 * ks + 1][1]),
                              hdn_pack2(st[2 * ks + 1][2], st[2 * ks + 1][3])};
            unsigned sa[4] = {hdn_pack2(dp[2 * ks][0], dp[2 * ks][1]), hdn_pack2(dp[2 * ks][2], dp[2 * ks][3]),
                              hdn_pack2(dp[2 * ks + 1][0], dp[2 * ks + 1][1]),
                              hdn_pack2(dp[2 * ks + 1][2], dp[2 * ks + 1][3])};
            {
                // stage dSᵀ for the dQ product: rows = keys, chunks = queries
                const int kr = warp * 16 + (lane >> 2);
                const int qc = 16 * ks + 2 * (lane & 3);
                *reinterpret_cast<unsigned*>(Ss + hdn_swz<BM / 8>(kr, qc >> 3) + (qc & 7)) = sa[0];
                *reinterpret_cast<unsigned*>(Ss + hdn_swz<BM / 8>(kr + 8, qc >> 3) + (qc & 7)) = sa[1];
                *reinterpret_cast<unsigned*>(Ss + hdn_swz<BM / 8>(kr, (qc + 8) >> 3) + (qc & 7)) = sa[2];
                *reinterpret_cast<unsigned*>(Ss + hdn_swz<BM / 8>(kr + 8, (qc + 8) >> 3) + (qc & 7)) = sa[3];
            }
            const int rr = ks * 16 + (lane & 7) + (((lane >> 3) & 1) << 3);
#if HDP == HDVP   // one column slice for dK and dV
#pragma unroll
            for (int dpi = 0; dpi < DKC / 16; ++dpi) {
                unsigned gb[4], qbf[4];
                const int cc = c0k / 8 + 2 * dpi + (lane >> 4);
                hdn_ldsm4t(gb, Gs + hdn_swz<DCH>(rr, cc));
                hdn_ldsm4t(qbf, Qs + hdn_swz<DCH>(rr, cc));
                hdn_mma16816(dv[2 * dpi], pa, gb);
                hdn_mma16816(dv[2 * dpi + 1], pa, gb + 2);
                hdn_mma16816(dk[2 * dpi], sa, qbf);
                hdn_mma16816(dk[2 * dpi + 1], sa, qbf + 2);
            }
#else
#pragma unroll
            for (int dpi = 0; dpi < DVC / 16; ++dpi) {
                unsigned gb[4];
                hdn_ldsm4t(gb, Gs + hdn_swz<DCHV>(rr, c0v / 8 + 2 * dpi + (lane >> 4)));
                hdn_mma16816(dv[2 * dpi], pa, gb);
                hdn_mma16816(dv[2 * dpi + 1], pa, gb + 2);
            }
#pragma unroll
            for (int dpi = 0; dpi < DKC / 16; ++dpi) {
                unsigned qbf[4];
                hdn_ldsm4t(qbf, Qs + hdn_swz<DCH>(rr, c0k / 8 + 2 * dpi + (lane >> 4)));
                hdn_mma16816(dk[2 * dpi], sa, qbf);
                hdn_mma16816(dk[2 * dpi + 1], sa, qbf + 2);
            }
#endif
        }
#if HDN_BULK_DQ
        if (warp == 0) asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");   // staging free
#endif
        __syncthreads();
        // dQ[q][d] += sum over this block's keys of dS[q][key] K[key][d] (d in this block's
        // slice c0k..c0k + DKC); warp w: queries 16w..
        unsigned af[BN / 16][4];
#pragma unroll
        for (int ks = 0; ks < BN / 16; ++ks)
            hdn_ldsm4t(af[ks], Ss + hdn_swz<BM / 8>(ks * 16 + (lane & 7) + ((lane >> 4) << 3),
                                                    2 * warp + ((lane >> 3) & 1)));
#pragma unroll
        for (int dc = 0; dc < DKC / 32; ++dc) {
            float aq[4][4];
#pragma unroll
            for (int t = 0; t < 4; ++t) aq[t][0] = aq[t][1] = aq[t][2] = aq[t][3] = 0.f;
#pragma unroll
            for (int ks = 0; ks < BN / 16; ++ks) {
#pragma unroll
                for (int dpi = 0; dpi < 2; ++dpi) {
                    unsigned kb[4];
                    hdn_ldsm4t(kb, Ks + hdn_swz<DCH>(ks * 16 + (lane & 7) + (((lane >> 3) & 1) << 3),
                                                     c0k / 8 + 4 * dc + 2 * dpi + (lane >> 4)));
                    hdn_mma16816(aq[2 * dpi], af[ks], kb);
                    hdn_mma16816(aq[2 * dpi + 1], af[ks], kb + 2);
                }
            }
#pragma unroll
            for (int t = 0; t < 4; ++t) {
#pragma unroll
                for (int r = 0; r < 2; ++r) {
                    const int il = warp * 16 + (lane >> 2) + 8 * r;
#if HDN_BULK_DQ
                    *reinterpret_cast<float2*>(dqs + il * (DKC + 8) + 32 * dc + 8 * t + 2 * (lane & 3)) =
                        make_float2(aq[t][2 * r], aq[t][2 * r + 1]);
#else
                    const int i = q0 + il;
                    if (i < SQ) {
                        float* dst = dQb + (long long)i * HDP + 32 * dc + 8 * t + 2 * (lane & 3);
                        atomicAdd(dst, aq[t][2 * r]);
                        atomicAdd(dst + 1, aq[t][2 * r + 1]);
                    }
#endif
                }
            }
        }
#if HDN_BULK_DQ
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
        __syncthreads();
#if HDN_BULK_DQ
        // the tile's rows added into the fp32 accumulator by the copy engine (one bulk
        // reduce per row; the staging rows are padded against bank conflicts)
        if (warp == 0) {
#pragma unroll
            for (int h2 = 0; h2 < 2; ++h2) {
                const int rr = lane + 32 * h2;
                if (q0 + rr < SQ)
                    asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;"
                                 :: "l"(dQb + (long long)(q0 + rr) * HDP), "r"(dqs_a + rr * (DKC + 8) * 4),
                                    "n"(DKC * 4) : "memory");
            }
            asm volatile("cp.async.bulk.commit_group;" ::: "memory");
        }
#endif
    }
#if HDN_BULK_DQ
    if (warp == 0) asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
#endif
    hdn_cp_wait<0>();
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const int j = j0 + 8 * r;
        if (j >= SKV) continue;
        hdn_u16* dkr = dK + DK_BOFF(b) + (long long)hk * DKSH + (long long)j * DKSS;
        hdn_u16* dvr = dV + DV_BOFF(b) + (long long)hk * DVSH + (long long)j * DVSS;
#pragma unroll
        for (int t = 0; t < DKC / 8; ++t) {
            const int d = c0k + 8 * t + 2 * (lane & 3);
            if (c0k + 8 * t < HD && j < DK_ROWS)
                *reinterpret_cast<unsigned*>(dkr + d) = hdn_pack2(dk[t][2 * r] * scale, dk[t][2 * r + 1] * scale);
        }
#pragma unroll
        for (int t = 0; t < DVC / 8; ++t) {
            const int d = c0v + 8 * t + 2 * (lane & 3);
            if (c0v + 8 * t < HDV && j < DV_ROWS)
                *reinterpret_cast<unsigned*>(dvr + d) = hdn_pack2(dv[t][2 * r], dv[t][2 * r + 1]);
        }
    }
}
#endif  // HDN_CUDA

#if ATT_DBIAS
// dbias (its type DB_T, strides DBSB..) from the fp32 sums (dims DB0..DB3, contiguous)
extern "C" __global__ void __launch_bounds__(256) hdn_attn_dbias_out(HDN_ATTN_DBIAS_PARAMS) {
    const long long n = (long long)blockIdx.x * 256 + threadIdx.x;
    if (n >= (long long)DB0 * DB1 * DB2 * DB3) return;
    const long long c3 = n % DB3, c2 = (n / DB3) % DB2, c1 = (n / ((long long)DB3 * DB2)) % DB1,
                    c0 = n / ((long long)DB3 * DB2 * DB1);
    reinterpret_cast<DB_T*>(att_dbias_out)[c0 * DBSB + c1 * DBSH + c2 * DBSI + c3 * DBSJ] =
        hdn_from_float<DB_T>(att_dbias_sum[n]);
}
#endif
