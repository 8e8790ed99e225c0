// attention_fwd.hip - flash-attention forward (FlashAttention-2 schedule) on mma.sync m16n8k16:
// one block = BM = 16 * NW query rows of one (b, h); each warp keeps its 16 rows' Q fragments in
// registers and streams 64-key K/V tiles through swizzled shared memory (cp.async: the next K
// tile loads during P·V, the V tile during Q·Kᵀ and the softmax); online softmax in fp32 on the
// exp2 scale; no S x S matrix in memory.  Masks (padding, causal, bottom-right, bands) are
// evaluated only on tiles that cross a boundary; dropout draws the shared Philox stream.
// Outputs O (row / l; rows without keys: 0) and the log-sum-exp statistics (+inf for them).
// Head sizes (hdn_attention.h): Q / K rows of HD, V / O rows of HDV, computed on tiles HDP / HDVP
// wide (multiples of 64; the padding columns load as zeros, are skipped by the products where a
// whole 16-column step is padding, and are not stored).  HDP > 128: the Q fragments are read from
// shared memory at each use instead of being held in registers.
#ifndef HDN_GENERATED
#define HDN_MMA_TYPE "f16"
#define HD 128
#define HDV 128
#define HDP 128
#define HDVP 128
#define NW 4
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
#if HDN_CUDA   // mma.sync: NVIDIA only (AMD CDNA: attention_fwd_mfma.hip)

#define BM (16 * NW)
#define BN 64
#define DCH (HDP / 8)             // 16-byte chunks of a Q / K tile row
#define DCHV (HDVP / 8)           // of a V tile row
#define KSQK ((HD + 15) / 16)     // 16-column steps of Q Kᵀ that hold data
#define KSPV ((HDV + 15) / 16)    // 16-column steps of P V that hold data
#define QREG (HDP <= 128)
#define NT (NW * 32)
// GQA_PACK (decode: GRP * SQ <= BM): one block per (kv head, batch) whose rows are the
// (query head, query) pairs of the group - block row r is query r % SQ of head hk * GRP + r / SQ
// (rows past GRP * SQ load zeros and are not stored) - so K / V stream once per kv head
#ifndef GQA_PACK
#define GQA_PACK 0
#endif
// KV_SPLIT > 1 (GQA_PACK decode with few blocks): blockIdx.x = s takes the s-th of KV_SPLIT
// slices of the key tiles and writes its rows' normalised partial O and log-sum-exp (fp32, -inf
// without keys) to the workspace OP / LP at row ((s * NB + b) * HQ + h) * SQ + i;
// hdn_attn_fwd_combine merges the slices into O and the statistics
#ifndef KV_SPLIT
#define KV_SPLIT 1
#endif
#if GQA_PACK
#define HDN_ROW_H(r) (hk * GRP + (r) / SQ)
#define HDN_ROW_I(r) ((r) % SQ)
#define HDN_ROW_OK(r) ((r) < GRP * SQ)
#else
#define HDN_ROW_H(r) h
#define HDN_ROW_I(r) (q0 + (r))
#define HDN_ROW_OK(r) true
#endif
// the K / V tile loads: through the page table for a paged pool (generated K_PAGED / V_PAGED =
// log2 of the page size; kpt / vpt the tables, <P>PT_SB / <P>PT_SS their batch / page strides,
// KV_PAGES the pages of each pool)
#ifdef K_PAGED
#define HDN_LOAD_K(dst, r0) hdn_attn_tile_paged<BN, DCH, NT>(dst, Kb, KSB, KSS, kpt + (long long)b * KPT_SB, \
    KPT_SS, K_PAGED, KV_PAGES, r0, L.skv, HD, tid)
#else
#define HDN_LOAD_K(dst, r0) hdn_attn_tile<BN, DCH, NT>(dst, Kb, KSS, r0, K_ROWS, HD, tid)
#endif
#ifdef V_PAGED
#define HDN_LOAD_V(dst, r0) hdn_attn_tile_paged<BN, DCHV, NT>(dst, Vb, VSB, VSS, vpt + (long long)b * VPT_SB, \
    VPT_SS, V_PAGED, KV_PAGES, r0, L.skv, HDV, tid)
#else
#define HDN_LOAD_V(dst, r0) hdn_attn_tile<BN, DCHV, NT>(dst, Vb, VSS, r0, V_ROWS, HDV, tid)
#endif

#if ATT_DECODE
// ATT_DECODE (ops/sdpa.py decode_ok; HIPDNN_CABI_HIP_ATTN_DECODE): the GQA-packed decode forward
// (GRP * SQ <= 16 rows: the query heads x queries of one kv head, GQA_PACK's row map, rows past
// GRP * SQ load zeros and are not stored) streaming K / V at memory bandwidth.  One block of NW
// warps per (key slice, kv head, batch); every warp runs the whole 16-row m16n8k16 product over
// its own share of the slice's 16-key tiles (tile t0 + warp + NW j) through its own ring of
// DEC_ST K / V stages (cp.async, one commit group per tile, only __syncwarp between the lanes),
// so each warp keeps DEC_ST - 1 tiles (DEC_ST - 1 x 16 x (HDP + HDVP) x 2 bytes: 16 KB at
// D = Dv = 128, DEC_ST 3) in flight while it computes one; the online softmax state (row max,
// sum, O) of the warps is merged through shared memory at the end.  Paged pools: a 16-key tile
// lies in one page (pages >= 16 rows), whose table entries are read one tile ahead of the copy
// that needs them.  Rows at or past the batch's length load as zeros (no read); a page outside
// the pool reads as NaN (as hdn_attn_tile_paged).  KV_SPLIT > 1: the slices' partial O / LSE go
// to OP / LP as GQA_PACK's and hdn_attn_fwd_combine merges them.
#define DEC_BN 16
#define DEC_TK (DEC_BN * HDP)              // elements of a warp's K tile
#define DEC_TILE (DEC_BN * (HDP + HDVP))   // a K tile and its V tile
#define DEC_RING (DEC_ST * DEC_TILE)       // a warp's ring
// 16 rows [kv0, kv0 + 16) of K or V into a swizzled tile (src: the tile's first row, row stride
// ss); rows at or past nrows and chunks past w / 8 fill with zeros, rows of a page outside the
// pool (!ok) with NaN
template <int NCH>
__device__ __forceinline__ void hdn_dec_tile(hdn_u16* dst, const hdn_u16* src, long long ss, int kv0,
                                             int nrows, int w, int lane, bool ok) {
#pragma unroll
    for (int i = 0; i < DEC_BN * NCH / 32; ++i) {
        const int c = lane + 32 * i, r = c / NCH, ch = c % NCH;
        const bool in = kv0 + r < nrows && ch < w / 8;
        if (in && !ok) {
            *reinterpret_cast<uint4*>(dst + hdn_swz<NCH>(r, ch)) = make_uint4(~0u, ~0u, ~0u, ~0u);
            continue;
        }
        hdn_cp16(dst + hdn_swz<NCH>(r, ch), src + (in ? (long long)r * ss + ch * 8 : 0LL), in && ok);
    }
}
// the page-table entries of the tile at key kv0 (dense: 0)
#ifdef K_PAGED
#define DEC_PK(kv0) ((long long)kpt[(long long)b * KPT_SB + (long long)((kv0) >> K_PAGED) * KPT_SS])
#else
#define DEC_PK(kv0) 0LL
#endif
#ifdef V_PAGED
#define DEC_PV(kv0) ((long long)vpt[(long long)b * VPT_SB + (long long)((kv0) >> V_PAGED) * VPT_SS])
#else
#define DEC_PV(kv0) 0LL
#endif
// a warp's K and V tiles at key kv0 into stage st (Kh / Vh: the batch's kv head, pk / pv the
// tiles' pages when paged)
__device__ __forceinline__ void hdn_dec_load(hdn_u16* st, const hdn_u16* Kh, const hdn_u16* Vh, int kv0,
                                             long long pk, long long pv, int nrows, int lane) {
#ifdef K_PAGED
    const bool kok = pk >= 0 && pk < KV_PAGES;
    const hdn_u16* ks = Kh + (kok ? pk : 0LL) * KSB + (long long)(kv0 & ((1 << K_PAGED) - 1)) * KSS;
#else
    const bool kok = true;
    const hdn_u16* ks = Kh + (long long)kv0 * KSS;
    (void)pk;
#endif
#ifdef V_PAGED
    const bool vok = pv >= 0 && pv < KV_PAGES;
    const hdn_u16* vs = Vh + (vok ? pv : 0LL) * VSB + (long long)(kv0 & ((1 << V_PAGED) - 1)) * VSS;
#else
    const bool vok = true;
    const hdn_u16* vs = Vh + (long long)kv0 * VSS;
    (void)pv;
#endif
    hdn_dec_tile<DCH>(st, ks, KSS, kv0, nrows, HD, lane, kok);
    hdn_dec_tile<DCHV>(st + DEC_TK, vs, VSS, kv0, nrows, HDV, lane, vok);
}

extern "C" __global__ void __launch_bounds__(NT) hdn_attn_fwd(HDN_ATTN_FWD_PARAMS) {
    extern __shared__ __align__(16) hdn_u16 hdn_smem[];
    hdn_u16* Qs = hdn_smem;                                   // 16 x HDP
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    hdn_u16* ring = Qs + 16 * HDP + warp * DEC_RING;
    const int hk = blockIdx.y, b = blockIdx.z;
    const HdnAttnLim L = hdn_attn_limits(b HDN_ATTN_LEN_ARGS);
#if SCALE_MODE == 0
    const float scale = SCALE_VALUE;
#elif SCALE_MODE == 1
    const float scale = scale_rt;
#else
    const float scale = *scale_p;
#endif
    const float sl2 = scale * HDN_LOG2E;
    for (int c = tid; c < 16 * DCH; c += NT) {
        const int r = c / DCH, ch = c % DCH, i = HDN_ROW_I(r);
        const bool in = HDN_ROW_OK(r) && i < Q_ROWS && ch < HD / 8;
        hdn_cp16(Qs + hdn_swz<DCH>(r, ch), Q + Q_BOFF(b) + (long long)(in ? HDN_ROW_H(r) : 0) * QSH +
                 (long long)(in ? i : 0) * QSS + (in ? ch : 0) * 8, in);
    }
    hdn_cp_commit();
    // the key tiles of this block's slice; this warp's: t0 + warp + NW j, j < nj
    const HdnAttnSpan kr = hdn_attn_block_keys(L, 0, SQ);
    const int tba = kr.lo / DEC_BN, tbz = kr.hi > kr.lo ? (kr.hi + DEC_BN - 1) / DEC_BN : tba;
#if KV_SPLIT > 1
    const int per = (tbz - tba + KV_SPLIT - 1) / KV_SPLIT;
    const int t0 = hdn_imin(tbz, tba + (int)blockIdx.x * per), t1 = hdn_imin(tbz, t0 + per);
#else
    const int t0 = tba, t1 = tbz;
#endif
    const int nj = t1 - t0 > warp ? (t1 - t0 - warp + NW - 1) / NW : 0;
    const hdn_u16* Kh = K + K_BOFF(b) + (long long)hk * KSH;
    const hdn_u16* Vh = V + V_BOFF(b) + (long long)hk * VSH;
    const int nrows = L.skv;
#define DEC_KV0(j) ((t0 + warp + NW * (j)) * DEC_BN)
#pragma unroll
    for (int j = 0; j < DEC_ST - 1; ++j) {
        if (j < nj) hdn_dec_load(ring + j * DEC_TILE, Kh, Vh, DEC_KV0(j), DEC_PK(DEC_KV0(j)), DEC_PV(DEC_KV0(j)),
                                 nrows, lane);
        hdn_cp_commit();
    }
    long long pkn = 0, pvn = 0;          // the pages of the next tile to load (DEC_ST - 1)
    if (DEC_ST - 1 < nj) {
        pkn = DEC_PK(DEC_KV0(DEC_ST - 1));
        pvn = DEC_PV(DEC_KV0(DEC_ST - 1));
    }
    hdn_cp_wait<DEC_ST - 1>();           // Q (the first group)
    __syncthreads();
#if QREG
    unsigned qf[KSQK][4];
#pragma unroll
    for (int ks = 0; ks < KSQK; ++ks) hdn_ldsm4(qf[ks], Qs + hdn_swz<DCH>(lane & 15, 2 * ks + (lane >> 4)));
#endif
    float acc[HDVP / 8][4];
#pragma unroll
    for (int t = 0; t < HDVP / 8; ++t) acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = 0.f;
    float mrow[2] = {-INFINITY, -INFINITY}, lrow[2] = {0.f, 0.f};   // lrow: this thread's columns
    const int ra = lane >> 2;            // this thread's rows: ra, ra + 8
    const HdnAttnSpan sp0 = hdn_attn_row(L, HDN_ROW_I(ra)), sp1 = hdn_attn_row(L, HDN_ROW_I(ra + 8));
#pragma unroll 1
    for (int j = 0; j < nj; ++j) {
        const int jn = j + DEC_ST - 1;
        if (jn < nj) {
            hdn_dec_load(ring + (jn % DEC_ST) * DEC_TILE, Kh, Vh, DEC_KV0(jn), pkn, pvn, nrows, lane);
            if (jn + 1 < nj) {           // (read while this tile is computed)
                pkn = DEC_PK(DEC_KV0(jn + 1));
                pvn = DEC_PV(DEC_KV0(jn + 1));
            }
        }
        hdn_cp_commit();
        hdn_cp_wait<DEC_ST - 1>();       // tile j
        __syncwarp();
        const hdn_u16* Ks = ring + (j % DEC_ST) * DEC_TILE;
        const hdn_u16* Vs = Ks + DEC_TK;
        const int kv0 = DEC_KV0(j);
        float s[2][4];
#pragma unroll
        for (int t = 0; t < 2; ++t) s[t][0] = s[t][1] = s[t][2] = s[t][3] = 0.f;
#pragma unroll
        for (int ks = 0; ks < KSQK; ++ks) {
#if QREG
            const unsigned* qa = qf[ks];
#else
            unsigned qa[4];
            hdn_ldsm4(qa, Qs + hdn_swz<DCH>(lane & 15, 2 * ks + (lane >> 4)));
#endif
            unsigned kb[4];
            hdn_ldsm4(kb, Ks + hdn_swz<DCH>((lane & 7) + ((lane >> 4) << 3), 2 * ks + ((lane >> 3) & 1)));
            hdn_mma16816(s[0], qa, kb);
            hdn_mma16816(s[1], qa, kb + 2);
        }
        float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int t = 0; t < 2; ++t) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int jj = kv0 + 8 * t + 2 * (lane & 3) + (e & 1);
                const HdnAttnSpan& sp = (e >> 1) ? sp1 : sp0;
                const float v = (jj >= sp.lo && jj < sp.hi) ? s[t][e] * sl2 : -INFINITY;
                s[t][e] = v;
                mx[e >> 1] = fmaxf(mx[e >> 1], v);
            }
        }
        float alpha[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
            const float mn = fmaxf(mrow[r], mx[r]);
            const float base = mn == -INFINITY ? 0.f : mn;
            alpha[r] = hdn_exp2(mrow[r] - base);
            mrow[r] = mn;
            mx[r] = base;
        }
        float sum[2] = {0.f, 0.f};
#pragma unroll
        for (int t = 0; t < 2; ++t) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const float p = hdn_exp2(s[t][e] - mx[e >> 1]);
                sum[e >> 1] += p;
                s[t][e] = p;
            }
        }
        lrow[0] = lrow[0] * alpha[0] + sum[0];
        lrow[1] = lrow[1] * alpha[1] + sum[1];
#pragma unroll
        for (int t = 0; t < HDVP / 8; ++t) {
            acc[t][0] *= alpha[0]; acc[t][1] *= alpha[0];
            acc[t][2] *= alpha[1]; acc[t][3] *= alpha[1];
        }
        const unsigned pa[4] = {hdn_pack2(s[0][0], s[0][1]), hdn_pack2(s[0][2], s[0][3]),
                                hdn_pack2(s[1][0], s[1][1]), hdn_pack2(s[1][2], s[1][3])};
#pragma unroll
        for (int dp = 0; dp < KSPV; ++dp) {
            unsigned vb[4];
            hdn_ldsm4t(vb, Vs + hdn_swz<DCHV>((lane & 7) + (((lane >> 3) & 1) << 3), 2 * dp + (lane >> 4)));
            hdn_mma16816(acc[2 * dp], pa, vb);
            hdn_mma16816(acc[2 * dp + 1], pa, vb + 2);
        }
        __syncwarp();                    // the stage is free for the load of tile j + DEC_ST
    }
#undef DEC_KV0
    hdn_cp_wait<0>();
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        lrow[r] += __shfl_xor_sync(0xffffffffu, lrow[r], 1);
        lrow[r] += __shfl_xor_sync(0xffffffffu, lrow[r], 2);
    }
    // merge the warps: (max, sum, O) of each through shared memory (the rings, now idle)
    __syncthreads();
    float* Ms = reinterpret_cast<float*>(Qs + 16 * HDP);      // NW x 16 row maxima (exp2 scale)
    float* Ls = Ms + NW * 16;                                 // NW x 16 sums
    float* As = Ls + NW * 16;                                 // NW x 16 x HDVP unnormalised O
    if ((lane & 3) == 0) {
        Ms[warp * 16 + ra] = mrow[0];
        Ms[warp * 16 + ra + 8] = mrow[1];
        Ls[warp * 16 + ra] = lrow[0];
        Ls[warp * 16 + ra + 8] = lrow[1];
    }
#pragma unroll
    for (int t = 0; t < HDVP / 8; ++t) {
        *reinterpret_cast<float2*>(As + (warp * 16 + ra) * HDVP + 8 * t + 2 * (lane & 3)) = make_float2(acc[t][0], acc[t][1]);
        *reinterpret_cast<float2*>(As + (warp * 16 + ra + 8) * HDVP + 8 * t + 2 * (lane & 3)) = make_float2(acc[t][2], acc[t][3]);
    }
    __syncthreads();
    for (int c = tid; c < GRP * SQ * (HDV / 2); c += NT) {
        const int r = c / (HDV / 2), d = 2 * (c % (HDV / 2));
        const int i = HDN_ROW_I(r), hh = HDN_ROW_H(r);
        float m = -INFINITY;
#pragma unroll
        for (int w = 0; w < NW; ++w) m = fmaxf(m, Ms[w * 16 + r]);
        float l = 0.f, o0 = 0.f, o1 = 0.f;
#pragma unroll
        for (int w = 0; w < NW; ++w) {
            const float f = m == -INFINITY ? 0.f : hdn_exp2(Ms[w * 16 + r] - m);
            const float2 a = *reinterpret_cast<const float2*>(As + (w * 16 + r) * HDVP + d);
            l += Ls[w * 16 + r] * f;
            o0 += a.x * f;
            o1 += a.y * f;
        }
        const bool emp = HDN_ATTN_EMPTY(L, i, l);
        const float inv = emp ? 0.f : 1.f / l;
#if KV_SPLIT > 1
        const long long R = (((long long)blockIdx.x * NB + b) * HQ + hh) * SQ + i;
        *reinterpret_cast<float2*>(OP + R * HDV + d) = make_float2(o0 * inv, o1 * inv);
        if (d == 0) LP[R] = l > 0.f ? m * HDN_LN2 + logf(l) : -INFINITY;
#else
        if (i < O_ROWS)
            *reinterpret_cast<unsigned*>(O + O_BOFF(b) + (long long)hh * OSH + (long long)i * OSS + d) =
                hdn_pack2(o0 * inv, o1 * inv);
#if HAS_STATS
        if (d == 0 && i < L_ROWS)
            LSE[L_BOFF(b) + (long long)hh * LSH + (long long)i * LSS] = emp ? INFINITY : m * HDN_LN2 + logf(l);
#endif
#endif
    }
}
#else
extern "C" __global__ void __launch_bounds__(NT) hdn_attn_fwd(HDN_ATTN_FWD_PARAMS) {
    extern __shared__ __align__(16) hdn_u16 hdn_smem[];
    hdn_u16* Qs = hdn_smem;
    hdn_u16* Ks = Qs + BM * HDP;
    hdn_u16* Vs = Ks + BN * HDP;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
#if GQA_PACK
    const int q0 = 0, hk = blockIdx.y, b = blockIdx.z, h = hk * GRP;
#else
    const int q0 = blockIdx.x * BM, h = blockIdx.y, b = blockIdx.z, hk = h / GRP;
#endif
    const HdnAttnLim L = hdn_attn_limits(b HDN_ATTN_LEN_ARGS);
    HDN_ATTN_MOD_INIT(b, h);
#if SCALE_MODE == 0
    const float scale = SCALE_VALUE;
#elif SCALE_MODE == 1
    const float scale = scale_rt;
#else
    const float scale = *scale_p;
#endif
    const float sl2 = scale * HDN_LOG2E;
#if HDN_RAGGED_ROWS
    if (!HDN_RAGGED_OK(b)) {   // a ragged batch offset off 16-byte alignment: NaN rows, no loads
        for (int c = tid; c < BM * HDV; c += NT) {
            const int i = HDN_ROW_I(c / HDV);
            if (HDN_ROW_OK(c / HDV) && i < SQ && i < O_ROWS)
                O[O_BOFF(b) + (long long)HDN_ROW_H(c / HDV) * OSH + (long long)i * OSS + c % HDV] = HDN_NAN16;
        }
#if HAS_STATS
        for (int c = tid; c < BM; c += NT)
            if (HDN_ROW_OK(c) && HDN_ROW_I(c) < SQ && HDN_ROW_I(c) < L_ROWS)
                LSE[L_BOFF(b) + (long long)HDN_ROW_H(c) * LSH + (long long)HDN_ROW_I(c) * LSS] = __int_as_float(0x7fffffff);
#endif
        return;
    }
#endif
    const hdn_u16* Qb = Q + Q_BOFF(b) + (long long)h * QSH;
    const hdn_u16* Kb = K + K_BOFF(b) + (long long)hk * KSH;
    const hdn_u16* Vb = V + V_BOFF(b) + (long long)hk * VSH;
#if DROPOUT
    const unsigned long long seed = (unsigned long long)(long long)*seedp;
    const unsigned long long doff = (unsigned long long)(long long)*offp;
    const unsigned long long dsub = (unsigned long long)b * HQ + h;
#endif
    // Q tile
#if GQA_PACK
    (void)Qb;
    for (int c = tid; c < BM * DCH; c += NT) {
        const int r = c / DCH, ch = c % DCH, i = HDN_ROW_I(r);
        const bool in = HDN_ROW_OK(r) && i < Q_ROWS && ch < HD / 8;
        hdn_cp16(Qs + hdn_swz<DCH>(r, ch), Q + Q_BOFF(b) + (long long)(in ? HDN_ROW_H(r) : 0) * QSH +
                 (long long)(in ? i : 0) * QSS + (in ? ch : 0) * 8, in);
    }
#else
    hdn_attn_tile<BM, DCH, NT>(Qs, Qb, QSS, q0, Q_ROWS, HD, tid);
#endif
    hdn_cp_commit();
    // key range of this block
    const int ihi = hdn_imin(q0 + BM, L.sq) - 1;
    int kbeg = 0, kend = L.skv;
    if (L.llim > -HDN_BIG) kbeg = hdn_imax(0, q0 + L.llim);
    if (L.rlim < HDN_BIG) kend = hdn_imin(kend, ihi + L.rlim + 1);
    if (ihi < q0) kend = kbeg;
#if KV_SPLIT > 1
    const int nba = kbeg / BN, nbz = kend > kbeg ? (kend + BN - 1) / BN : nba;
    const int per = (nbz - nba + KV_SPLIT - 1) / KV_SPLIT;
    const int nb0 = hdn_imin(nbz, nba + (int)blockIdx.x * per), nb1 = hdn_imin(nbz, nb0 + per);
#else
#if ATT_BLKSKIP   // the key tiles the block mask keeps for rows [q0, q0 + BM) (hdn_attention.h)
    const unsigned char* bkrow = HDN_ATTN_BLK(b, h);
    const int nb1 = kend > kbeg ? (kend + BN - 1) / BN : kbeg / BN;
    const int nb0 = hdn_attn_blk_next(bkrow, q0, BM, kbeg / BN, nb1, BN);
    int nbn = nb0;                    // the next live tile (found while its K tile is loaded)
#else
    const int nb0 = kbeg / BN, nb1 = kend > kbeg ? (kend + BN - 1) / BN : nb0;
#endif
#endif

    if (nb0 < nb1) HDN_LOAD_K(Ks, nb0 * BN);
    hdn_cp_commit();
    hdn_cp_wait<1>();
    __syncthreads();
#if QREG
    unsigned qf[KSQK][4];
#pragma unroll
    for (int ks = 0; ks < KSQK; ++ks)
        hdn_ldsm4(qf[ks], Qs + hdn_swz<DCH>(warp * 16 + (lane & 15), 2 * ks + (lane >> 4)));
#endif

    float acc[HDVP / 8][4];
#pragma unroll
    for (int t = 0; t < HDVP / 8; ++t) acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = 0.f;
    float mrow[2] = {-INFINITY, -INFINITY}, lrow[2] = {0.f, 0.f};
    HDN_ATTN_SINK_INIT(h, mrow, lrow);
    const int r0 = q0 + warp * 16 + (lane >> 2);   // this thread's rows: r0, r0 + 8

    for (int nb = nb0; nb < nb1; ++nb) {
#if ATT_BLKSKIP
        nb = nbn;
        if (nb >= nb1) break;
#endif
        const int kv0 = nb * BN;
        HDN_LOAD_V(Vs, kv0);
        hdn_cp_commit();
        hdn_cp_wait<1>();
        __syncthreads();
        float s[8][4];
#pragma unroll
        for (int t = 0; t < 8; ++t) s[t][0] = s[t][1] = s[t][2] = s[t][3] = 0.f;
#pragma unroll
        for (int ks = 0; ks < KSQK; ++ks) {
#if QREG
            const unsigned* qa = qf[ks];
#else
            unsigned qa[4];
            hdn_ldsm4(qa, Qs + hdn_swz<DCH>(warp * 16 + (lane & 15), 2 * ks + (lane >> 4)));
#endif
#pragma unroll
            for (int jp = 0; jp < 4; ++jp) {
                unsigned kb[4];
                hdn_ldsm4(kb, Ks + hdn_swz<DCH>(jp * 16 + (lane & 7) + ((lane >> 4) << 3),
                                                2 * ks + ((lane >> 3) & 1)));
                hdn_mma16816(s[2 * jp], qa, kb);
                hdn_mma16816(s[2 * jp + 1], qa, kb + 2);
            }
        }
        __syncthreads();
#if ATT_BLKSKIP
        nbn = hdn_attn_blk_next(bkrow, q0, BM, nb + 1, nb1, BN);
        if (nbn < nb1) HDN_LOAD_K(Ks, nbn * BN);
#else
        if (nb + 1 < nb1) HDN_LOAD_K(Ks, kv0 + BN);
#endif
        hdn_cp_commit();
        const bool full = kv0 + BN <= L.skv && q0 + BM <= L.sq &&
                          (L.rlim >= HDN_BIG || kv0 + BN - 1 - q0 <= L.rlim) &&
                          (L.llim <= -HDN_BIG || kv0 - (q0 + BM - 1) >= L.llim);
        float mx[2] = {-INFINITY, -INFINITY};
        if (full) {
#pragma unroll
            for (int t = 0; t < 8; ++t) {
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const float v = HDN_ATTN_SCORE(s[t][e] * sl2, r0 + 8 * (e >> 1),
                                                   kv0 + 8 * t + 2 * (lane & 3) + (e & 1));
                    s[t][e] = v;
                    mx[e >> 1] = fmaxf(mx[e >> 1], v);
                }
            }
        } else {
            const HdnAttnSpan sp0 = hdn_attn_row(L, HDN_ROW_I(r0 - q0)), sp1 = hdn_attn_row(L, HDN_ROW_I(r0 - q0 + 8));
#pragma unroll
            for (int t = 0; t < 8; ++t) {
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int j = kv0 + 8 * t + 2 * (lane & 3) + (e & 1);
                    const HdnAttnSpan& sp = (e >> 1) ? sp1 : sp0;
                    const float v = (j >= sp.lo && j < sp.hi) ? HDN_ATTN_SCORE(s[t][e] * sl2, r0 + 8 * (e >> 1), j)
                                                              : -INFINITY;
                    s[t][e] = v;
                    mx[e >> 1] = fmaxf(mx[e >> 1], v);
                }
            }
        }
        float alpha[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
            float mn = fmaxf(mrow[r], mx[r]);
            float base = mn == -INFINITY ? 0.f : mn;
            alpha[r] = hdn_exp2(mrow[r] - base);
            mrow[r] = mn;
            mx[r] = base;
        }
        float sum[2] = {0.f, 0.f};
#pragma unroll
        for (int t = 0; t < 8; ++t) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                float p = hdn_exp2(s[t][e] - mx[e >> 1]);
                sum[e >> 1] += p;
#if DROPOUT
                {
                    int i = r0 + 8 * (e >> 1), j = kv0 + 8 * t + 2 * (lane & 3) + (e & 1);
                    unsigned w = hdn_philox_word(seed, dsub, doff + (unsigned long long)i * SKV + j);
                    p = w >= DTHR ? p * DSCALE : 0.f;
                }
#endif
                s[t][e] = p;
            }
        }
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            sum[r] += __shfl_xor_sync(0xffffffffu, sum[r], 1);
            sum[r] += __shfl_xor_sync(0xffffffffu, sum[r], 2);
            lrow[r] = lrow[r] * alpha[r] + sum[r];
        }
#pragma unroll
        for (int t = 0; t < HDVP / 8; ++t) {
            acc[t][0] *= alpha[0]; acc[t][1] *= alpha[0];
            acc[t][2] *= alpha[1]; acc[t][3] *= alpha[1];
        }
        hdn_cp_wait<1>();
        __syncthreads();
#pragma unroll
        for (int ks = 0; ks < BN / 16; ++ks) {
            unsigned a[4] = {hdn_pack2(s[2 * ks][0], s[2 * ks][1]), hdn_pack2(s[2 * ks][2], s[2 * ks][3]),
                             hdn_pack2(s[2 * ks + 1][0], s[2 * ks + 1][1]),
                             hdn_pack2(s[2 * ks + 1][2], s[2 * ks + 1][3])};
#pragma unroll
            for (int dp = 0; dp < KSPV; ++dp) {
                unsigned vb[4];
                hdn_ldsm4t(vb, Vs + hdn_swz<DCHV>(ks * 16 + (lane & 7) + (((lane >> 3) & 1) << 3),
                                                 2 * dp + (lane >> 4)));
                hdn_mma16816(acc[2 * dp], a, vb);
                hdn_mma16816(acc[2 * dp + 1], a, vb + 2);
            }
        }
        __syncthreads();
    }
    hdn_cp_wait<0>();
    // epilogue: O = acc / l (0 for rows without keys), stats = ln(sum exp(s))
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const int i = HDN_ROW_I(r0 - q0 + 8 * r), hh = HDN_ROW_H(r0 - q0 + 8 * r);
        if (i >= SQ || !HDN_ROW_OK(r0 - q0 + 8 * r)) continue;
        const bool emp = HDN_ATTN_EMPTY(L, i, lrow[r]);
        const float inv = emp ? 0.f : 1.f / lrow[r];
#if KV_SPLIT > 1
        {
            const long long R = (((long long)blockIdx.x * NB + b) * HQ + hh) * SQ + i;
#pragma unroll
            for (int t = 0; t < HDV / 8; ++t)
                *reinterpret_cast<float2*>(OP + R * HDV + 8 * t + 2 * (lane & 3)) =
                    make_float2(acc[t][2 * r] * inv, acc[t][2 * r + 1] * inv);
            if ((lane & 3) == 0) LP[R] = lrow[r] > 0.f ? mrow[r] * HDN_LN2 + logf(lrow[r]) : -INFINITY;
            continue;
        }
#endif
        hdn_u16* Ob = O + O_BOFF(b) + (long long)hh * OSH + (long long)i * OSS;
#pragma unroll
        for (int t = 0; t < HDV / 8 && i < O_ROWS; ++t) {
            unsigned v = hdn_pack2(acc[t][2 * r] * inv, acc[t][2 * r + 1] * inv);
            *reinterpret_cast<unsigned*>(Ob + 8 * t + 2 * (lane & 3)) = v;
        }
#if HAS_STATS
        if ((lane & 3) == 0 && i < L_ROWS)
            LSE[L_BOFF(b) + (long long)hh * LSH + (long long)i * LSS] =
                emp ? INFINITY : mrow[r] * HDN_LN2 + logf(lrow[r]);
#endif
        if ((lane & 3) == 0) hdn_attn_row_out(b, hh, i, emp, mrow[r], lrow[r], HDN_ATTN_MXO, HDN_ATTN_SEO);
    }
}
#endif  // ATT_DECODE

#if KV_SPLIT > 1
// one warp per row (b, h, i): O = sum_s w_s o_s / sum_s w_s, w_s = exp(lse_s - max lse),
// stats = max + log(sum w); a row no slice has keys for: O = 0, stats = +inf
extern "C" __global__ void __launch_bounds__(256) hdn_attn_fwd_combine(HDN_ATTN_CMB_PARAMS) {
    const int lane = threadIdx.x & 31;
    const long long row = (long long)blockIdx.x * 8 + (threadIdx.x >> 5);   // (b, h, i) flat
    if (row >= (long long)NB * HQ * SQ) return;
    const int i = (int)(row % SQ), h = (int)((row / SQ) % HQ), b = (int)(row / ((long long)SQ * HQ));
#if HDN_RAGGED_ROWS
    const HdnAttnLim L = hdn_attn_limits(b HDN_ATTN_LEN_ARGS);
    if (!HDN_RAGGED_OK(b)) return;      // (the slices wrote NaN rows)
#endif
    const long long slice = (long long)NB * HQ * SQ;
    float m = -INFINITY;
#pragma unroll 1
    for (int sp = 0; sp < KV_SPLIT; ++sp) m = fmaxf(m, LP[sp * slice + row]);
    float w[KV_SPLIT], wsum = 0.f;
#pragma unroll
    for (int sp = 0; sp < KV_SPLIT; ++sp) {
        w[sp] = m == -INFINITY ? 0.f : __expf(LP[sp * slice + row] - m);
        wsum += w[sp];
    }
    const float inv = wsum > 0.f ? 1.f / wsum : 0.f;
    if (i < O_ROWS) {
        hdn_u16* Ob = O + O_BOFF(b) + (long long)h * OSH + (long long)i * OSS;
        for (int d = lane; d < HDV; d += 32) {
            float o = 0.f;
#pragma unroll
            for (int sp = 0; sp < KV_SPLIT; ++sp) o += w[sp] * OP[(sp * slice + row) * HDV + d];
            Ob[d] = hdn_pack2(o * inv, 0.f) & 0xFFFFu;
        }
    }
#if HAS_STATS
    if (lane == 0 && i < L_ROWS)
        LSE[L_BOFF(b) + (long long)h * LSH + (long long)i * LSS] = wsum > 0.f ? m + logf(wsum) : INFINITY;
#endif
}
#endif
#endif  // HDN_CUDA

#if HAS_RNG_DUMP
// the dropout keep mask (1 kept, 0 dropped) of every (b, h, i, j), as the forward draws it
// (portable: outside the mma.sync guard)
extern "C" __global__ void __launch_bounds__(256) hdn_attn_rng_dump(HDN_ATTN_RNG_PARAMS) {
#ifdef RD_SQ   // a dump of RD_SQ x RD_SKV per head (broadcast along i or j: index 0 of it)
    const long long m = (long long)blockIdx.x * 256 + threadIdx.x;
    if (m >= (long long)RD_SQ * RD_SKV) return;
    const int h = blockIdx.y, b = blockIdx.z, i = (int)(m / RD_SKV), j = (int)(m % RD_SKV);
    const long long n = (long long)i * SKV + j;
#else
    const long long n = (long long)blockIdx.x * 256 + threadIdx.x;
    if (n >= (long long)SQ * SKV) return;
    const int h = blockIdx.y, b = blockIdx.z, i = (int)(n / SKV), j = (int)(n % SKV);
#endif
    const unsigned long long seed = (unsigned long long)(long long)*seedp;
    const unsigned long long doff = (unsigned long long)(long long)*offp;
    const unsigned w = hdn_philox_word(seed, (unsigned long long)b * HQ + h, doff + (unsigned long long)n);
    reinterpret_cast<RD_T*>(att_rng)[(long long)b * RDSB + (long long)h * RDSH + (long long)i * RDSS +
                                      (long long)j * RDSJ] = hdn_from_float<RD_T>(w >= DTHR ? 1.f : 0.f);
}
#endif
