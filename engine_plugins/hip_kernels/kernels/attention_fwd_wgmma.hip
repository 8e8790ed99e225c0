// attention_fwd_wgmma.hip - flash-attention forward on Hopper (sm_90a): wgmma + tensor copy engine.
// One CTA = 128 query rows of one (b, h), 3 warpgroups (384 threads):
//   warpgroup 0  producer: one thread loads the Q tile once and the AW_BN-key K / V tiles into an
//                AW_ST-stage shared-memory ring (cp.async.bulk.tensor, 128-byte swizzle, one
//                mbarrier "full" per K and per V stage, "empty" ones to reuse a stage);
//   warpgroups 1, 2  consumers, 64 query rows each (wgmma M = 64):
//                S = Q Kᵀ (m64nAW_BNk16, both operands K-major in shared memory), online softmax in
//                registers on the exp2 scale (the attention scale folded into log2 e), P rounded
//                to f16 / bf16 in registers is the register A operand of O += P V (m64nHDVPk16, V
//                the transposed - N-major - B operand), O rescaled in registers.  Software
//                pipelined inside the warpgroup: S(n) = Q K(n)ᵀ and O += P(n-1) V(n-1) are in
//                flight together while the softmax of tile n runs.
// Masks (padding, causal, bottom-right, bands) are evaluated only on tiles that cross a
// boundary.  Outputs O (row / l; rows without keys: 0) and the log-sum-exp statistics (+inf for
// those rows).  Same configuration prelude as attention_fwd.hip (attention.py), plus the
// parameter list HDN_ATTN_FWD_WG_PARAMS (tensor maps tmQ / tmK / tmV: 4-d (D, S, H, B) views
// with a 64 x 128 x 1 x 1 box for Q, 64 x AW_BN x 1 x 1 for K / V).  No dropout here
// (attention_fwd.hip runs those graphs).  Ragged (packed) Q / K / V / O / stats and paged K / V
// pools: the tile loads (AW_TILE_Q / _K / _V) go through the per-batch / per-page tensor maps
// hdn_attn_wg_maps.h's prep kernel writes (rows past a batch's length read as zeros); O and
// stats rows are stored at O_BOFF / L_BOFF, only rows below O_ROWS / L_ROWS (hdn_attention.h).
// Head sizes (hdn_attention.h): the tiles are HDP (Q / K) and HDVP (V) columns wide, 64-column
// atoms; the tensor maps' innermost extents are HD / HDV, so the copy engine fills the columns
// past them with zeros (Q Kᵀ unchanged; the P V columns past HDV are not stored).  AW_BN = 64
// for heads wider than 128 (registers: O is HDVP / 2 floats per consumer thread; shared
// memory), P V at HDVP = 192 as an n128 and an n64 product.
#ifndef HDN_GENERATED
#include "hdn_compat.h"
#define HDN_MMA_TYPE "f16"
#define HD 128
#define HDV 128
#define HDP 128
#define HDVP 128
#define AW_BN 128
#define GRP 1
#define HQ 1
#define SQ 256
#define SKV 256
#define OSB 32768
#define OSH 32768
#define OSS 128
#define HAS_STATS 1
#define LSB 256
#define LSH 256
#define LSS 1
#define CAUSAL 1
#define CAUSAL_BR 0
#define BR_ALIGN 0
#define HAS_RB 0
#define RB 0
#define HAS_LB 0
#define LB 0
#define PADDING 0
#define SCALE_MODE 0
#define SCALE_VALUE 0.088388f
#define HDN_ATTN_LEN_PARAMS
#define HDN_ATTN_LEN_ARGS
#define HDN_ATTN_FWD_WG_PARAMS const __grid_constant__ hdn_tmap tmQ, const __grid_constant__ hdn_tmap tmK, \
    const __grid_constant__ hdn_tmap tmV, hdn_u16* __restrict__ O, float* __restrict__ LSE
#endif
#include "hdn_tma.h"
#include "hdn_wgmma.h"
#include "hdn_attention.h"
#include "hdn_attn_wg_maps.h"

#define AW_BM 128                      // query rows per CTA (2 consumer warpgroups x 64)
#ifndef AW_BN
#define AW_BN 128                      // keys per tile
#endif
#define AW_NK (HDP / 64)               // 128-byte column atoms per Q / K row (64 elements each)
#define AW_NV (HDVP / 64)              // per V row
#define AW_QATOM (AW_BM * 128)         // bytes of one atom of the Q tile
#define AW_ATOM (AW_BN * 128)          // bytes of one atom of a K / V tile
#define AW_QTILE (AW_NK * AW_QATOM)    // bytes of the Q tile
#define AW_KTILE (AW_NK * AW_ATOM)     // of one K tile
#define AW_VTILE (AW_NV * AW_ATOM)     // of one V tile
#define AW_KS ((HD + 15) / 16)         // 16-column steps of Q Kᵀ that hold data
#ifndef AW_ST
#define AW_ST (HDP + HDVP <= 128 ? 4 : 2)   // K / V ring depth
#endif
#define AW_BARS (AW_QTILE + AW_ST * (AW_KTILE + AW_VTILE))
#define AW_SMEM_BYTES (AW_BARS + 8 * (1 + 4 * AW_ST) + 1024)

#if HDN_CUDA && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#if HDN_BF16_IO
#define AW_SS(n) hdn_wgmma_m64n##n##k16_bf16<0, 0>
#define AW_RS(n) hdn_wgmma_rs_m64n##n##k16_bf16<1>
#else
#define AW_SS(n) hdn_wgmma_m64n##n##k16_f16<0, 0>
#define AW_RS(n) hdn_wgmma_rs_m64n##n##k16_f16<1>
#endif
#define AW_XSS(n) AW_SS(n)
#define AW_XRS(n) AW_RS(n)


extern "C" __global__ void __launch_bounds__(384, 1) hdn_attn_fwd_wg(HDN_ATTN_FWD_WG_PARAMS) {
    extern __shared__ __align__(16) unsigned char aw_smem_raw[];
    const unsigned raw_s = wg_saddr(aw_smem_raw);
    const unsigned sb = (raw_s + 1023u) & ~1023u;
    const unsigned sQ = sb, sK = sb + AW_QTILE, sV = sK + AW_ST * AW_KTILE;
    // barriers: q_full, k_full[ST], k_empty[ST], v_full[ST], v_empty[ST]
    const unsigned bq = sb + AW_BARS;
    const unsigned bkf = bq + 8, bke = bkf + 8 * AW_ST, bvf = bke + 8 * AW_ST, bve = bvf + 8 * AW_ST;
    const int tid = threadIdx.x, wg = tid >> 7;
#if CAUSAL || CAUSAL_BR || HAS_RB
    const int mb = gridDim.x - 1 - blockIdx.x;       // the longest rows first
#else
    const int mb = blockIdx.x;
#endif
    const int q0 = mb * AW_BM, h = blockIdx.y, b = blockIdx.z, hk = h / GRP;
    if (tid == 0) {
        wg_bar_init(bq, 1);
#pragma unroll 1
        for (int s = 0; s < AW_ST; ++s) {
            wg_bar_init(bkf + 8 * s, 1);
            wg_bar_init(bke + 8 * s, 256);
            wg_bar_init(bvf + 8 * s, 1);
            wg_bar_init(bve + 8 * s, 256);
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    const HdnAttnLim L = hdn_attn_limits(b HDN_ATTN_LEN_ARGS);
    // key range of this CTA (all 128 rows)
    const int ihi = hdn_imin(q0 + AW_BM, L.sq) - 1;
    int kbeg = 0, kend = L.skv;
    if (L.llim > -HDN_BIG) kbeg = hdn_imax(0, q0 + L.llim);
    if (L.rlim < HDN_BIG) kend = hdn_imin(kend, ihi + L.rlim + 1);
    if (ihi < q0 || AW_BAD(b)) kend = kbeg;
#if ATT_BLKSKIP   // the key tiles the block mask keeps for the CTA's rows (hdn_attention.h)
    const unsigned char* bkrow = HDN_ATTN_BLK(b, h);
    const int nb1 = kend > kbeg ? (kend + AW_BN - 1) / AW_BN : kbeg / AW_BN;
    const int nb0 = hdn_attn_blk_next(bkrow, q0, AW_BM, kbeg / AW_BN, nb1, AW_BN);
#else
    const int nb0 = kbeg / AW_BN, nb1 = kend > kbeg ? (kend + AW_BN - 1) / AW_BN : nb0;
#endif

    if (wg == 0) {
        // ------------------------------------------------------------------ producer
        asm volatile("setmaxnreg.dec.sync.aligned.u32 24;");
        if (tid != 0 || nb1 <= nb0) return;
        wg_bar_expect_tx(bq, AW_QTILE);
        AW_TILE_Q(sQ, q0, bq);
        int it = 0;
#pragma unroll 1
        for (int n = nb0; n < nb1; ++n, ++it) {
#if ATT_BLKSKIP   // (the consumers walk the same live tiles)
            n = hdn_attn_blk_next(bkrow, q0, AW_BM, n, nb1, AW_BN);
            if (n >= nb1) break;
#endif
            const int st = it % AW_ST;
            const unsigned ph = (unsigned)(it / AW_ST) & 1u;
            wg_bar_wait(bke + 8 * st, ph ^ 1u);
            wg_bar_expect_tx(bkf + 8 * st, AW_KTILE);
            AW_TILE_K(sK + st * AW_KTILE, n * AW_BN, bkf + 8 * st);
            wg_bar_wait(bve + 8 * st, ph ^ 1u);
            wg_bar_expect_tx(bvf + 8 * st, AW_VTILE);
            AW_TILE_V(sV + st * AW_VTILE, n * AW_BN, bvf + 8 * st);
        }
        return;
    }
    // ---------------------------------------------------------------------- consumers
    asm volatile("setmaxnreg.inc.sync.aligned.u32 240;");
#if SCALE_MODE == 0
    const float scale = SCALE_VALUE;
#elif SCALE_MODE == 1
    const float scale = scale_rt;
#else
    const float scale = *scale_p;
#endif
    const float sl2 = scale * HDN_LOG2E;
    HDN_ATTN_MOD_INIT(b, h);
    const int wgc = wg - 1, tw = tid - 128 * wg, w4 = tw >> 5, lane = tw & 31;
    const int g = lane >> 2, t4 = lane & 3;
    const int q0w = q0 + 64 * wgc;
    const int r0 = q0w + 16 * w4 + g;              // this thread's rows: r0, r0 + 8
    float o[HDVP / 2];
    float s[AW_BN / 2];
    unsigned pa[AW_BN / 16][4];
    float mrow[2] = {-INFINITY, -INFINITY}, lrow[2] = {0.f, 0.f};
    HDN_ATTN_SINK_INIT(h, mrow, lrow);
#pragma unroll
    for (int i = 0; i < HDVP / 2; ++i) o[i] = 0.f;
    const unsigned qa = sQ + wgc * 8192;
#if AW_XCH
    // AW_XCH: the rows' max / sum go between the four threads of a row through shared memory
    // (aw_xch), not by shuffles: ptxas waits for every wgmma in flight before a shuffle, so
    // with shuffles the softmax of S(n) would wait for P(n-1) V(n-1) too.  The same values in
    // the shuffles' order: max exact in any order, the sum (v + v^1) + (v^2 + v^3).  Without
    // AW_OVL (the loop below) the wait for P(n-1) V(n-1) then sits after the exp2s (the sum's
    // exchange), before P(n) is rounded into pa.
    __shared__ float aw_xch[256];           // one value per consumer thread
    const int ct = tid - 128;
    auto quad_max = [&](float v) {
        aw_xch[ct] = v;
        __syncwarp();
        const float a = aw_xch[ct ^ 1], b = aw_xch[ct ^ 2], c = aw_xch[ct ^ 3];
        __syncwarp();
        return fmaxf(fmaxf(v, a), fmaxf(b, c));
    };
    auto quad_sum = [&](float v) {
        aw_xch[ct] = v;
        __syncwarp();
        const float a = aw_xch[ct ^ 1], b = aw_xch[ct ^ 2], c = aw_xch[ct ^ 3];
        __syncwarp();
        return (v + a) + (b + c);
    };
#endif

    auto issue_s = [&](int st) {
        const unsigned kb = sK + st * AW_KTILE;
        hdn_wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < AW_KS; ++kk) {
            const unsigned off = (kk & 3) * 32;
            AW_XSS(AW_BN)(s, wg_desc(qa + (kk >> 2) * AW_QATOM + off, 16, 1024),
                          wg_desc(kb + (kk >> 2) * AW_ATOM + off, 16, 1024), kk != 0);
        }
        hdn_wgmma_commit();
    };
#if AW_OVL
    // (O += P V with P in pa, the parameter: either register set of the overlapped loop)
    auto issue_pv2 = [&](int st, unsigned (&pa)[AW_BN / 16][4]) {
#else
    auto issue_pv = [&](int st) {
#endif
        const unsigned vb = sV + st * AW_VTILE;
        hdn_wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < AW_BN / 16; ++ks) {
#if HDVP == 192
            AW_XRS(128)(o, pa[ks], wg_desc(vb + ks * 2048, AW_ATOM, 1024), 1);
            AW_XRS(64)(o + 64, pa[ks], wg_desc(vb + 2 * AW_ATOM + ks * 2048, AW_ATOM, 1024), 1);
#else
            AW_XRS(HDVP)(o, pa[ks], wg_desc(vb + ks * 2048, AW_ATOM, 1024), 1);
#endif
        }
        hdn_wgmma_commit();
    };
    // softmax of the tile in s (keys kv0..): s <- p (fp32), returns the rescale factors
    auto softmax = [&](int kv0, float* alpha) {
        const bool full = kv0 + AW_BN <= L.skv && q0w + 64 <= L.sq &&
                          (L.rlim >= HDN_BIG || kv0 + AW_BN - 1 - q0w <= L.rlim) &&
                          (L.llim <= -HDN_BIG || kv0 - (q0w + 63) >= L.llim);
        float mx[2] = {-INFINITY, -INFINITY};
#if AW_FOLD
        // AW_FOLD (no score roles, a positive baked scale): the row max of the raw scores, put
        // on the exp2 scale once per row; p = exp2(s sl2 - base) below is one FFMA per score
        // (max(s) sl2 = max(s sl2): rounding is monotone and sl2 > 0).
        if (full) {
#pragma unroll
            for (int j = 0; j < AW_BN / 8; ++j) {
#pragma unroll
                for (int e = 0; e < 4; ++e) mx[e >> 1] = fmaxf(mx[e >> 1], s[4 * j + e]);
            }
        } else {
            const HdnAttnSpan sp0 = hdn_attn_row(L, r0), sp1 = hdn_attn_row(L, r0 + 8);
#pragma unroll
            for (int j = 0; j < AW_BN / 8; ++j) {
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int jj = kv0 + 8 * j + 2 * t4 + (e & 1);
                    const HdnAttnSpan& sp = (e >> 1) ? sp1 : sp0;
                    const float v = (jj >= sp.lo && jj < sp.hi) ? s[4 * j + e] : -INFINITY;
                    s[4 * j + e] = v;
                    mx[e >> 1] = fmaxf(mx[e >> 1], v);
                }
            }
        }
#else
        if (full) {
#pragma unroll
            for (int j = 0; j < AW_BN / 8; ++j) {
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const float v = HDN_ATTN_SCORE(s[4 * j + e] * sl2, r0 + 8 * (e >> 1),
                                                   kv0 + 8 * j + 2 * t4 + (e & 1));
                    s[4 * j + e] = v;
                    mx[e >> 1] = fmaxf(mx[e >> 1], v);
                }
            }
        } else {
            const HdnAttnSpan sp0 = hdn_attn_row(L, r0), sp1 = hdn_attn_row(L, r0 + 8);
#pragma unroll
            for (int j = 0; j < AW_BN / 8; ++j) {
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int jj = kv0 + 8 * j + 2 * t4 + (e & 1);
                    const HdnAttnSpan& sp = (e >> 1) ? sp1 : sp0;
                    const float v = (jj >= sp.lo && jj < sp.hi) ? HDN_ATTN_SCORE(s[4 * j + e] * sl2, r0 + 8 * (e >> 1), jj)
                                                                : -INFINITY;
                    s[4 * j + e] = v;
                    mx[e >> 1] = fmaxf(mx[e >> 1], v);
                }
            }
        }
#endif
        float base[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
#if AW_XCH
            mx[r] = quad_max(mx[r]);
#else
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
#endif
#if AW_FOLD
            mx[r] *= sl2;
#endif
            const float mn = fmaxf(mrow[r], mx[r]);
            base[r] = mn == -INFINITY ? 0.f : mn;
            alpha[r] = hdn_exp2(mrow[r] - base[r]);
            mrow[r] = mn;
        }
        float sum[2] = {0.f, 0.f};
#pragma unroll
        for (int j = 0; j < AW_BN / 8; ++j) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
#if AW_FOLD
                const float p = hdn_exp2(fmaf(s[4 * j + e], sl2, -base[e >> 1]));
#else
                const float p = hdn_exp2(s[4 * j + e] - base[e >> 1]);
#endif
                sum[e >> 1] += p;
                s[4 * j + e] = p;
            }
        }
#pragma unroll
        for (int r = 0; r < 2; ++r) {
#if AW_XCH
            sum[r] = quad_sum(sum[r]);
#else
            sum[r] += __shfl_xor_sync(0xffffffffu, sum[r], 1);
            sum[r] += __shfl_xor_sync(0xffffffffu, sum[r], 2);
#endif
            lrow[r] = lrow[r] * alpha[r] + sum[r];
        }
    };
#if AW_OVL
    // (P -> pa, the parameter)
    auto pack_into = [&](unsigned (&pa)[AW_BN / 16][4]) {
#else
    auto pack_p = [&]() {
#endif
#pragma unroll
        for (int ks = 0; ks < AW_BN / 16; ++ks) {
            pa[ks][0] = hdn_pack2(s[8 * ks + 0], s[8 * ks + 1]);
            pa[ks][1] = hdn_pack2(s[8 * ks + 2], s[8 * ks + 3]);
            pa[ks][2] = hdn_pack2(s[8 * ks + 4], s[8 * ks + 5]);
            pa[ks][3] = hdn_pack2(s[8 * ks + 6], s[8 * ks + 7]);
        }
    };
#if AW_OVL
    auto pack_p = [&]() { pack_into(pa); };
#endif
#define AW_FENCE_S() _Pragma("unroll") for (int i_ = 0; i_ < AW_BN / 2; ++i_) asm volatile("" : "+f"(s[i_]) :: "memory")
#define AW_FENCE_O() _Pragma("unroll") for (int i_ = 0; i_ < HDVP / 2; ++i_) asm volatile("" : "+f"(o[i_]) :: "memory")
#define AW_FENCE_P() _Pragma("unroll") for (int i_ = 0; i_ < AW_BN / 16; ++i_) \
    asm volatile("" : "+r"(pa[i_][0]), "+r"(pa[i_][1]), "+r"(pa[i_][2]), "+r"(pa[i_][3]) :: "memory")

#if AW_PP
    // AW_PP: ping-pong between the two consumer warpgroups (named barrier 1 + wgc over 256
    // threads: the warpgroup's turn to issue its GEMMs).  A warpgroup waits for its turn, issues
    // S(n) and O += P(n-1) V(n-1), then hands the turn to the other one, so one warpgroup's
    // softmax runs while the other's GEMMs keep the tensor cores busy.  Both walk the same
    // tiles: K turns each; warpgroup 0's first turn is its own arrival, warpgroup 1 does not
    // hand its last turn back, so every barrier phase completes and none is left open.
#define AW_PP_SYNC() asm volatile("bar.sync %0, 256;" :: "r"(1 + wgc) : "memory")
#define AW_PP_PASS() asm volatile("bar.arrive %0, 256;" :: "r"(2 - wgc) : "memory")
#endif
#if AW_OVL
#if !AW_XCH
#error "AW_OVL takes AW_XCH's row exchange (ops/sdpa.py sets both)"
#endif
    // AW_OVL (with AW_XCH; 128-key tiles without score roles: registers), step n (K / V ring
    // item it): S(n) and O += P(n-1) V(n-1) (P(n-1) in pin) in flight, the wait for S(n) only,
    // the softmax of S(n) and P(n) rounded into pout while P(n-1) V(n-1) is on the tensor
    // cores, then the wait for it and O's rescale.  The loop alternates pa / pb (two steps an
    // iteration), so no register of the P in flight is written.  A shared-memory round trip of
    // a word made of every P(n) register keeps the wait for P(n-1) V(n-1) below the
    // conversions (ptxas hoists a wait above arithmetic it does not depend on).  The
    // operations of the loop without AW_OVL, in its order.
#define AW_FENCE_PX(p) _Pragma("unroll") for (int i_ = 0; i_ < AW_BN / 16; ++i_) \
    asm volatile("" : "+r"(p[i_][0]), "+r"(p[i_][1]), "+r"(p[i_][2]), "+r"(p[i_][3]) :: "memory")
#if ATT_BLKSKIP
#define AW_NEXT(n) hdn_attn_blk_next(bkrow, q0, AW_BM, n, nb1, AW_BN)
#else
#define AW_NEXT(n) (n)
#endif
    unsigned pb[AW_BN / 16][4];
    auto step = [&](int n, int it, unsigned (&pin)[AW_BN / 16][4], unsigned (&pout)[AW_BN / 16][4]) {
        const int st = it % AW_ST, pst = (it - 1) % AW_ST;
        const unsigned ph = (unsigned)(it / AW_ST) & 1u, pph = (unsigned)((it - 1) / AW_ST) & 1u;
        wg_bar_wait(bkf + 8 * st, ph);
#if AW_PP
        AW_PP_SYNC();
#endif
        issue_s(st);
        wg_bar_wait(bvf + 8 * pst, pph);
        issue_pv2(pst, pin);
#if AW_PP
        AW_PP_PASS();
#endif
        hdn_wgmma_wait<1>();
        AW_FENCE_S();
        wg_bar_arrive(bke + 8 * st);
        float alpha[2];
        softmax(n * AW_BN, alpha);
        pack_into(pout);
        AW_FENCE_PX(pout);
        unsigned pw = 0;
#pragma unroll
        for (int ks = 0; ks < AW_BN / 16; ++ks) pw ^= pout[ks][0] ^ pout[ks][1] ^ pout[ks][2] ^ pout[ks][3];
        aw_xch[ct] = __uint_as_float(pw);
        __syncwarp();
        const float pz = *reinterpret_cast<volatile float*>(&aw_xch[ct ^ 1]);
        hdn_wgmma_wait<0>();
        asm volatile("" :: "f"(pz));
        __syncwarp();
        AW_FENCE_O();
        AW_FENCE_PX(pin);
        wg_bar_arrive(bve + 8 * pst);
#if AW_FOLD
        // no row max of the warp grew (alpha = exp2(0) = 1 exactly): O needs no rescale
        if (__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) {
#endif
#pragma unroll
        for (int j = 0; j < HDVP / 8; ++j) {
            o[4 * j + 0] *= alpha[0]; o[4 * j + 1] *= alpha[0];
            o[4 * j + 2] *= alpha[1]; o[4 * j + 3] *= alpha[1];
        }
#if AW_FOLD
        }
#endif
    };
    // the last P V (P in p) after it tiles
    auto last_pv = [&](int it, unsigned (&p)[AW_BN / 16][4]) {
        const int pst = (it - 1) % AW_ST;
        wg_bar_wait(bvf + 8 * pst, (unsigned)((it - 1) / AW_ST) & 1u);
#if AW_PP
        AW_PP_SYNC();
#endif
        issue_pv2(pst, p);
#if AW_PP
        if (wgc == 0) AW_PP_PASS();
#endif
        hdn_wgmma_wait<0>();
        AW_FENCE_O();
        AW_FENCE_PX(p);
        wg_bar_arrive(bve + 8 * pst);
    };
#endif
    if (nb1 > nb0) {
        wg_bar_wait(bq, 0);
        // tile nb0: S, softmax, P
        wg_bar_wait(bkf, 0);
#if AW_PP
        if (wgc == 0) asm volatile("bar.arrive 1, 256;" ::: "memory");
        AW_PP_SYNC();
#endif
        issue_s(0);
#if AW_PP
        AW_PP_PASS();
#endif
        hdn_wgmma_wait<0>();
        AW_FENCE_S();
        wg_bar_arrive(bke);
        {
            float alpha[2];
            softmax(nb0 * AW_BN, alpha);
        }
        pack_p();
#if AW_OVL
        int n = nb0 + 1, it = 1;
#pragma unroll 1
        for (;;) {          // two tiles an iteration: P into pb, then into pa
            n = AW_NEXT(n);
            if (n >= nb1) break;
            step(n, it, pa, pb);
            ++n, ++it;
            n = AW_NEXT(n);
            if (n >= nb1) break;
            step(n, it, pb, pa);
            ++n, ++it;
        }
        if (it & 1) last_pv(it, pa);        // (P of the it-th tile: pa for odd it, else pb)
        else last_pv(it, pb);
#else
        int it = 1;
#pragma unroll 1
        for (int n = nb0 + 1; n < nb1; ++n, ++it) {
#if ATT_BLKSKIP
            n = hdn_attn_blk_next(bkrow, q0, AW_BM, n, nb1, AW_BN);
            if (n >= nb1) break;
#endif
            const int st = it % AW_ST, pst = (it - 1) % AW_ST;
            const unsigned ph = (unsigned)(it / AW_ST) & 1u, pph = (unsigned)((it - 1) / AW_ST) & 1u;
            wg_bar_wait(bkf + 8 * st, ph);
#if AW_PP
            AW_PP_SYNC();
#endif
            issue_s(st);
            wg_bar_wait(bvf + 8 * pst, pph);
            issue_pv(pst);
#if AW_PP
            AW_PP_PASS();
#endif
            hdn_wgmma_wait<1>();
            AW_FENCE_S();
            wg_bar_arrive(bke + 8 * st);
            float alpha[2];
            softmax(n * AW_BN, alpha);
            hdn_wgmma_wait<0>();
            AW_FENCE_O();
            AW_FENCE_P();
            wg_bar_arrive(bve + 8 * pst);
#if AW_FOLD
            // no row max of the warp grew (alpha = exp2(0) = 1 exactly): O needs no rescale
            if (__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) {
#endif
#pragma unroll
            for (int j = 0; j < HDVP / 8; ++j) {
                o[4 * j + 0] *= alpha[0]; o[4 * j + 1] *= alpha[0];
                o[4 * j + 2] *= alpha[1]; o[4 * j + 3] *= alpha[1];
            }
#if AW_FOLD
            }
#endif
            pack_p();
        }
        const int pst = (it - 1) % AW_ST;
        wg_bar_wait(bvf + 8 * pst, (unsigned)((it - 1) / AW_ST) & 1u);
#if AW_PP
        AW_PP_SYNC();
#endif
        issue_pv(pst);
#if AW_PP
        if (wgc == 0) AW_PP_PASS();
#endif
        hdn_wgmma_wait<0>();
        AW_FENCE_O();
        AW_FENCE_P();
        wg_bar_arrive(bve + 8 * pst);
#endif
    }
    // epilogue: O = acc / l (0 for rows without keys), stats = ln(sum exp(s))
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const int i = r0 + 8 * r;
        if (i >= SQ) continue;
        const bool emp = HDN_ATTN_EMPTY(L, i, lrow[r]);
        const float inv = emp ? 0.f : 1.f / lrow[r];
        hdn_u16* Ob = O + O_BOFF(b) + (long long)h * OSH + (long long)i * OSS;
#if AW_MAPS
        if (AW_BAD(b)) {        // NaN rows (2-byte stores: the batch's offset may be unaligned)
#pragma unroll 1
            for (int j = 0; j < HDV / 8 && i < O_ROWS; ++j) Ob[8 * j + 2 * t4] = Ob[8 * j + 2 * t4 + 1] = HDN_NAN16;
#if HAS_STATS
            if (t4 == 0 && i < L_ROWS)
                LSE[L_BOFF(b) + (long long)h * LSH + (long long)i * LSS] = __int_as_float(0x7fffffff);
#endif
            continue;
        }
#endif
#pragma unroll
        for (int j = 0; j < HDV / 8; ++j) {
            const unsigned v = hdn_pack2(o[4 * j + 2 * r] * inv, o[4 * j + 2 * r + 1] * inv);
            if (i < O_ROWS) *reinterpret_cast<unsigned*>(Ob + 8 * j + 2 * t4) = v;
        }
#if HAS_STATS
        if (t4 == 0 && i < L_ROWS)
            LSE[L_BOFF(b) + (long long)h * LSH + (long long)i * LSS] =
                emp ? INFINITY : mrow[r] * HDN_LN2 + logf(lrow[r]);
#endif
        if (t4 == 0) hdn_attn_row_out(b, h, i, emp, mrow[r], lrow[r], HDN_ATTN_MXO, HDN_ATTN_SEO);
    }
}
#else
// not an sm_90a compile: the symbol exists, attention.py never launches it there
extern "C" __global__ void hdn_attn_fwd_wg() {}
#endif
