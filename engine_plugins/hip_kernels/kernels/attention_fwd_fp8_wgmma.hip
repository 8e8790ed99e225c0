// attention_fwd_fp8_wgmma.hip - FP8 (e4m3 / e5m2) flash-attention forward on Hopper (sm_90a),
// semantics as the CPU reference (engine_plugins/cpu_reference/kernels/sdpa.py, its fp8 path):
//   s   = (q k^T) * scale * descale_q * descale_k (+ attn_mask, + ALiBi: the score modifiers of
//         hdn_attention.h, on the natural scale after the descales), masked (padding, causal,
//         bands, boolean / block masks); P = softmax(s) by rows, a sink logit joining each row;
//   P'  = P times the dropout keep factor (Philox, hdn_philox.h: the stream of the 16-bit kernels);
//   P8  = fp8(P' * scale_s) (round to nearest even, saturating: hdn_minifloat.h), P's format = q's;
//   O   = (P8 v) * descale_s * descale_v;  amax_s = max |P'|, amax_o = max |O|;  o = O * scale_o.
// Two kernels:
//   hdn_attn_f8_vt   the pre-pass: V [B, Hkv, Skv, Dv] -> Vt [B, Hkv, Dv, F8_SKVP] in the
//                    workspace (keys contiguous: P V's B operand must be K-major for fp8 wgmma),
//                    keys past the batch's length zero, and within every 32 keys the key order
//                    the P register fragment holds (hdn_attn_f8_key), so P goes from the Q K^T
//                    accumulators to the wgmma A registers without a shuffle;
//   hdn_attn_fwd_f8  one CTA = 128 query rows of one (b, h), 3 warpgroups: warpgroup 0 is the
//                    producer (one thread: Q once, 128-key K and Vt tiles into an F8_ST-stage
//                    ring by the tensor copy engine, 128-byte swizzle, full / empty mbarriers);
//                    warpgroups 1, 2 consume 64 rows each: S = Q K^T (wgmma m64n128k32, both
//                    operands K-major), the masks and the softmax in registers (exp2 scale), P
//                    encoded to fp8 in registers, O += P8 Vt (register-A wgmma m64nHDVPk32).
// F8_TWO_PASS 1 (the default): a first sweep over the keys takes the rows' max and sum, so the
//   second quantises exactly the normalised P * scale_s the reference does; 0: one sweep, P
//   relative to the running max (the usual flash-attention form) - O differs from the
//   reference by fp8 rounding of P only.
// amax_s / amax_o: block max per warp, atomicMax on the float bits (non-negative values) of
// the outputs, which the program zeroes first (amax_s: the row's 1 / l, its largest P entry;
// with a sink or dropout the largest P' entry tracked per row).  Q / K tiles are F8_NK
// 128-byte column atoms (D <= 256) wide, the columns past D read as zeros; Vt tiles HDVP rows
// (the rows past Dv read as zeros), P V for HDVP > 128 as an n128 and an n64 / n128 product.
// Dv > 128: each 128-key tile is scored in two 64-key sub-tiles (F8_SUB; m64n64k32, half the
// score registers next to O's HDVP / 2), each sub-tile's P V on its half of the Vt tile.
// Dropout: the keep mask is drawn in the sweep that quantises P (the statistics are those of
// the undropped softmax, as the reference's).
#ifndef HDN_GENERATED
#include "hdn_compat.h"
#define HD 128
#define HDV 128
#define HDP 128
#define HDVP 128
#define GRP 1
#define HQ 1
#define F8_HKV 1
#define NB 1
#define SQ 256
#define SKV 256
#define F8_SKVP 256
#define VSB 32768
#define VSH 32768
#define VSS 128
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
#define F8_FMT 1
#define F8_OUT 1
#define F8_TWO_PASS 1
#define F8_HAS_AMAX_S 1
#define F8_HAS_AMAX_O 1
#define F8_DESCALE_Q 1.0f
#define F8_DESCALE_K 1.0f
#define F8_DESCALE_V 1.0f
#define F8_DESCALE_S 1.0f
#define F8_SCALE_S 1.0f
#define F8_SCALE_O 1.0f
#define HDN_ATTN_LEN_PARAMS
#define HDN_ATTN_LEN_ARGS
#define HDN_ATTN_F8_VT_PARAMS const unsigned char* __restrict__ V, unsigned char* __restrict__ Vt
#define HDN_ATTN_FWD_F8_PARAMS const __grid_constant__ hdn_tmap tmQ, const __grid_constant__ hdn_tmap tmK, \
    const __grid_constant__ hdn_tmap tmV, unsigned char* __restrict__ O, float* __restrict__ LSE, \
    float* __restrict__ amax_s, float* __restrict__ amax_o
#endif
#include "hdn_tma.h"
#include "hdn_wgmma.h"
#include "hdn_attention.h"
#include "hdn_minifloat.h"

#define F8_BM 128                        // query rows per CTA
#define F8_BN 128                        // keys per tile
#define F8_NK ((HD + 127) / 128)         // 128-byte column atoms per Q / K row
#define F8_QATOM (F8_BM * 128)           // bytes of one atom of the Q tile: 128 rows x 128 columns
#define F8_KATOM (F8_BN * 128)           // of one atom of a K tile
#define F8_QTILE (F8_NK * F8_QATOM)
#define F8_KTILE (F8_NK * F8_KATOM)
#define F8_VTILE (HDVP * 128)            // HDVP rows (Dv) x 128 keys
#define F8_KS ((HD + 31) / 32)           // 32-column steps of Q K^T that hold data
#define F8_PMAX (ATT_SINK || DROPOUT)    // amax_s from the P' entries (else the rows' 1 / l)
#define F8_SUB (HDVP > 128 ? 64 : 128)   // keys per S sub-tile (registers: O is HDVP / 2 floats)
#define F8_NSUB (F8_BN / F8_SUB)
#ifndef F8_ST
#define F8_ST 4                          // K / Vt ring depth
#endif
#define F8_BARS (F8_QTILE + F8_ST * (F8_KTILE + F8_VTILE))
#define F8_SMEM_BYTES (F8_BARS + 8 * (1 + 4 * F8_ST) + 1024)

#if HDN_CUDA
#if F8_FMT == 1
#define F8_ENC2(lo, hi) hdn_mini_encode2<4, 3, 7, 1>(lo, hi)
#else
#define F8_ENC2(lo, hi) hdn_mini_encode2<5, 2, 15, 2>(lo, hi)
#endif

// four fp8 codes of one register of the P fragment (byte 0 = the lowest k)
__device__ __forceinline__ unsigned hdn_attn_f8_enc4(float a, float b, float c, float d) {
    return (F8_ENC2(a, b) & 0xffffu) | ((F8_ENC2(c, d) & 0xffffu) << 16);
}

// ------------------------------------------------------------------------ V transpose
// grid (F8_SKVP / 128, ceil(Dv / 64), B * Hkv), 256 threads: 128 keys x 64 columns per block
extern "C" __global__ void __launch_bounds__(256) hdn_attn_f8_vt(HDN_ATTN_F8_VT_PARAMS) {
    __shared__ __align__(4) unsigned char tile[128][68];
    const int k0 = blockIdx.x * 128, d0 = blockIdx.y * 64, bh = blockIdx.z;
    const int b = bh / F8_HKV, hk = bh - b * F8_HKV, tid = threadIdx.x;
    int skv = SKV;
#if PADDING
    skv = hdn_imax(0, hdn_imin(SKV, (int)seq_kv[(long long)b * SLKV_STRIDE]));
#endif
    const unsigned char* Vb = V + (long long)b * VSB + (long long)hk * VSH;
    for (int w = tid; w < 128 * 16; w += 256) {
        const int key = w >> 4, d = d0 + 4 * (w & 15);
        unsigned x = 0;
        if (k0 + key < skv && d < HDV)
            x = *reinterpret_cast<const unsigned*>(Vb + (long long)(k0 + key) * VSS + d);
        *reinterpret_cast<unsigned*>(&tile[key][4 * (w & 15)]) = x;
    }
    __syncthreads();
    unsigned char* Vtb = Vt + (long long)bh * HDV * F8_SKVP;
    for (int w = tid; w < 64 * 32; w += 256) {
        const int dd = w >> 5, kp = 4 * (w & 31);
        if (d0 + dd >= HDV) continue;
        unsigned x = 0;
#pragma unroll
        for (int i = 0; i < 4; ++i) x |= (unsigned)tile[hdn_attn_f8_key(kp + i)][dd] << (8 * i);
        *reinterpret_cast<unsigned*>(Vtb + (long long)(d0 + dd) * F8_SKVP + k0 + kp) = x;
    }
}

// ------------------------------------------------------------------------ forward
#if HDN_CUDA && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#if F8_FMT == 1
#define F8_SS_(n) hdn_wgmma_m64n##n##k32_e4m3<0, 0>
#define F8_RS_(n) hdn_wgmma_rs_m64n##n##k32_e4m3
#else
#define F8_SS_(n) hdn_wgmma_m64n##n##k32_e5m2<0, 0>
#define F8_RS_(n) hdn_wgmma_rs_m64n##n##k32_e5m2
#endif
#if HDVP > 128
#define F8_SS F8_SS_(64)
#else
#define F8_SS F8_SS_(128)
#endif
#define F8_RS(n) F8_RS_(n)

// two output values (columns c, c + 1 of one row) in the output type
__device__ __forceinline__ void hdn_attn_f8_store2(unsigned char* p, float x0, float x1) {
#if F8_OUT == 0
    *reinterpret_cast<unsigned short*>(p) = (unsigned short)(F8_ENC2(x0, x1) & 0xffffu);
#elif F8_OUT == 1
    *reinterpret_cast<unsigned*>(p) = (unsigned)hdn_from_float<hdn_half>(x0).bits |
                                      ((unsigned)hdn_from_float<hdn_half>(x1).bits << 16);
#elif F8_OUT == 2
    *reinterpret_cast<unsigned*>(p) = (unsigned)hdn_from_float<hdn_bf16>(x0).bits |
                                      ((unsigned)hdn_from_float<hdn_bf16>(x1).bits << 16);
#else
    *reinterpret_cast<float2*>(p) = make_float2(x0, x1);
#endif
}
#if F8_OUT == 0
#define F8_OSZ 1
#elif F8_OUT == 3
#define F8_OSZ 4
#else
#define F8_OSZ 2
#endif

extern "C" __global__ void __launch_bounds__(384, 1) hdn_attn_fwd_f8(HDN_ATTN_FWD_F8_PARAMS) {
    extern __shared__ __align__(16) unsigned char f8_smem_raw[];
    const unsigned sb = (wg_saddr(f8_smem_raw) + 1023u) & ~1023u;
    const unsigned sQ = sb, sK = sb + F8_QTILE, sV = sK + F8_ST * F8_KTILE;
    // barriers: q_full, k_full[ST], k_empty[ST], v_full[ST], v_empty[ST]
    const unsigned bq = sb + F8_BARS;
    const unsigned bkf = bq + 8, bke = bkf + 8 * F8_ST, bvf = bke + 8 * F8_ST, bve = bvf + 8 * F8_ST;
    const int tid = threadIdx.x, wg = tid >> 7;
#if CAUSAL || CAUSAL_BR || HAS_RB
    const int mb = gridDim.x - 1 - blockIdx.x;       // the longest rows first
#else
    const int mb = blockIdx.x;
#endif
    const int q0 = mb * F8_BM, h = blockIdx.y, b = blockIdx.z, hk = h / GRP;
    if (tid == 0) {
        wg_bar_init(bq, 1);
#pragma unroll 1
        for (int s = 0; s < F8_ST; ++s) {
            wg_bar_init(bkf + 8 * s, 1);
            wg_bar_init(bke + 8 * s, 256);
            wg_bar_init(bvf + 8 * s, 1);
            wg_bar_init(bve + 8 * s, 256);
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    const HdnAttnLim L = hdn_attn_limits(b HDN_ATTN_LEN_ARGS);
    const HdnAttnSpan kr = hdn_attn_block_keys(L, q0, F8_BM);
    const int nb0 = kr.lo / F8_BN, nb1 = kr.hi > kr.lo ? (kr.hi + F8_BN - 1) / F8_BN : nb0;

    if (wg == 0) {
        // ------------------------------------------------------------------ producer
        asm volatile("setmaxnreg.dec.sync.aligned.u32 24;");
        if (tid != 0 || nb1 <= nb0) return;
        wg_bar_expect_tx(bq, F8_QTILE);
#pragma unroll
        for (int a = 0; a < F8_NK; ++a) wg_tma4(sQ + a * F8_QATOM, &tmQ, 128 * a, q0, h, b, bq);
        int kit = 0, vit = 0;
#pragma unroll 1
        for (int pass = F8_TWO_PASS ? 0 : 1; pass < 2; ++pass) {
#pragma unroll 1
            for (int n = nb0; n < nb1; ++n, ++kit) {
                const int st = kit % F8_ST;
                wg_bar_wait(bke + 8 * st, ((unsigned)(kit / F8_ST) & 1u) ^ 1u);
                wg_bar_expect_tx(bkf + 8 * st, F8_KTILE);
#pragma unroll
                for (int a = 0; a < F8_NK; ++a)
                    wg_tma4(sK + st * F8_KTILE + a * F8_KATOM, &tmK, 128 * a, n * F8_BN, hk, b, bkf + 8 * st);
                if (pass == 1) {
                    const int sv = vit % F8_ST;
                    wg_bar_wait(bve + 8 * sv, ((unsigned)(vit / F8_ST) & 1u) ^ 1u);
                    wg_bar_expect_tx(bvf + 8 * sv, F8_VTILE);
                    wg_tma4(sV + sv * F8_VTILE, &tmV, n * F8_BN, 0, hk, b, bvf + 8 * sv);
                    ++vit;
                }
            }
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
    const float sl2 = scale * (F8_DESCALE_Q) * (F8_DESCALE_K) * HDN_LOG2E;
    const float scale_s = F8_SCALE_S;
    HDN_ATTN_MOD_INIT(b, h);
    const int wgc = wg - 1, tw = tid - 128 * wg, w4 = tw >> 5, lane = tw & 31;
    const int t4 = lane & 3;
    const int q0w = q0 + 64 * wgc;
    const int r0 = q0w + 16 * w4 + (lane >> 2);      // this thread's rows: r0, r0 + 8
    float o[HDVP / 2];
    float s[F8_SUB / 2];
    unsigned pa[F8_SUB / 32][4];
    float mrow[2] = {-INFINITY, -INFINITY}, lrow[2] = {0.f, 0.f};
    HDN_ATTN_SINK_INIT(h, mrow, lrow);
#if F8_PMAX
    float pmx[2] = {0.f, 0.f};      // the rows' largest P' entry relative to the current base
#endif
#pragma unroll
    for (int i = 0; i < HDVP / 2; ++i) o[i] = 0.f;
    const unsigned qa = sQ + wgc * 64 * 128;

    // S = Q K^T of sub-tile u (keys u F8_SUB.. of the tile) of K stage st
    auto issue_s = [&](int st, int u) {
        const unsigned kb = sK + st * F8_KTILE + u * (F8_SUB * 128);
        hdn_wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < F8_KS; ++kk)
            F8_SS(s, wg_desc(qa + (kk >> 2) * F8_QATOM + (kk & 3) * 32, 16, 1024),
                  wg_desc(kb + (kk >> 2) * F8_KATOM + (kk & 3) * 32, 16, 1024), kk != 0);
        hdn_wgmma_commit();
    };
    // O += P8 Vt over the keys of sub-tile u of V stage st
    auto issue_pv = [&](int st, int u) {
        const unsigned vb = sV + st * F8_VTILE + u * F8_SUB;
        hdn_wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < F8_SUB / 32; ++ks) {
#if HDVP <= 128
            F8_RS(HDVP)(o, pa[ks], wg_desc(vb + ks * 32, 16, 1024), 1);
#else
            F8_RS(128)(o, pa[ks], wg_desc(vb + ks * 32, 16, 1024), 1);
#if HDVP == 192
            F8_RS(64)(o + 64, pa[ks], wg_desc(vb + 128 * 128 + ks * 32, 16, 1024), 1);
#else
            F8_RS(128)(o + 64, pa[ks], wg_desc(vb + 128 * 128 + ks * 32, 16, 1024), 1);
#endif
#endif
        }
        hdn_wgmma_commit();
    };
    // S of sub-tile u of K ring item kit into s (the first waits for the tile, the last frees
    // the stage)
    auto scores = [&](int kit, int u) {
        const int st = kit % F8_ST;
        if (u == 0) wg_bar_wait(bkf + 8 * st, (unsigned)(kit / F8_ST) & 1u);
        issue_s(st, u);
        hdn_wgmma_wait<0>();
#pragma unroll
        for (int i = 0; i < F8_SUB / 2; ++i) asm volatile("" : "+f"(s[i]) :: "memory");
        if (u == F8_NSUB - 1) wg_bar_arrive(bke + 8 * st);
    };
    // P V of sub-tile u of V ring item vit (the first waits for the tile, the last frees it)
    auto pv = [&](int vit, int u) {
        const int sv = vit % F8_ST;
        if (u == 0) wg_bar_wait(bvf + 8 * sv, (unsigned)(vit / F8_ST) & 1u);
        issue_pv(sv, u);
        hdn_wgmma_wait<0>();
#pragma unroll
        for (int i = 0; i < HDVP / 2; ++i) asm volatile("" : "+f"(o[i]) :: "memory");
#pragma unroll
        for (int i = 0; i < F8_SUB / 32; ++i)
            asm volatile("" : "+r"(pa[i][0]), "+r"(pa[i][1]), "+r"(pa[i][2]), "+r"(pa[i][3]) :: "memory");
        if (u == F8_NSUB - 1) wg_bar_arrive(bve + 8 * sv);
    };
    // the online row statistics over the sub-tile in s (keys kv0..): s <- exp2(s - max) (fp32)
    auto online = [&](int kv0, float* alpha) {
        float mx[2];
        hdn_attn_wg_mask<F8_SUB>(s, L, kv0, q0w, r0, t4, sl2, mx HDN_ATTN_MOD_REF);
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
        for (int i = 0; i < F8_SUB / 2; ++i) {
            const float p = hdn_exp2(s[i] - mx[(i >> 1) & 1]);
            sum[(i >> 1) & 1] += p;
            s[i] = p;
        }
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            sum[r] += __shfl_xor_sync(0xffffffffu, sum[r], 1);
            sum[r] += __shfl_xor_sync(0xffffffffu, sum[r], 2);
            lrow[r] = lrow[r] * alpha[r] + sum[r];
        }
    };
#if DROPOUT
    // the keep bits of the sub-tile of keys kv0.. (hdn_attention.h), drawn before its scores
    // are live; seed / offset read here, not held in registers across the sweep
    auto keep_bits = [&](int kv0) {
        const unsigned long long seed = (unsigned long long)(long long)*seedp;
        const unsigned long long doff = (unsigned long long)(long long)*offp;
        return hdn_attn_wg_keep_bits<F8_SUB>(seed, (unsigned long long)b * HQ + h, doff, r0, kv0, t4,
                                             DTHR, SKV);
    };
#else
    auto keep_bits = [&](int) { return 0ull; };
#endif
#if F8_PMAX
    // the sub-tile in s (exp2(score - base)) times the dropout keep factor (keep bits kb); pmx:
    // the rows' largest entry
    auto keep = [&](unsigned long long kb) {
        (void)kb;
#pragma unroll
        for (int i = 0; i < F8_SUB / 2; ++i) {
#if DROPOUT
            s[i] = (kb >> i) & 1 ? s[i] * DSCALE : 0.f;
#endif
            pmx[(i >> 1) & 1] = fmaxf(pmx[(i >> 1) & 1], s[i]);
        }
    };
#endif
    // P (s times the row factors ps) -> the fp8 A fragments: register 0 / 2 of a 32-key step
    // hold row r0, 1 / 3 row r0 + 8; keys in the order hdn_attn_f8_key gives Vt
    auto pack_p = [&](const float* ps) {
#pragma unroll
        for (int ks = 0; ks < F8_SUB / 32; ++ks) {
            const float* x = s + 16 * ks;
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                const int r = q & 1, c = 8 * (q >> 1) + 2 * r;
                pa[ks][q] = hdn_attn_f8_enc4(x[c] * ps[r], x[c + 1] * ps[r], x[c + 4] * ps[r],
                                             x[c + 5] * ps[r]);
            }
        }
    };

#if F8_OVL
#if F8_TWO_PASS
#error "F8_OVL is the one-sweep form (ops/sdpa.py sets it only there)"
#endif
    // F8_OVL (one sweep): the sweep is software-pipelined inside the warpgroup: step t
    // (sub-tile t % F8_NSUB of a key tile) issues S(t) = Q K^T and behind it O += P(t-1) Vt(t-1)
    // (the dropout keep bits drawn before), waits for S(t) only, then masks, exponentiates
    // and quantises S(t) into the other P register set while P V(t-1) is on the tensor cores,
    // and waits for P V(t-1) only to rescale O (skipped where no row max of the warp grew).
    // The rows' max / sum go between the four threads of a row through shared memory
    // (f8_xch), not by shuffles: ptxas waits for every wgmma in flight before a shuffle (and
    // hoists a wait above arithmetic it does not depend on: a load after the P codes pins it
    // below them).  O after step t is
    // (O + P(t-1) Vt(t-1)) alpha(t) as in the serial loop, the sums in the shuffles' order: the
    // same operations in the same order as F8_OVL 0.
    // F8_PP: the two consumer warpgroups issue their GEMMs in turns (named barrier 1 + wgc over
    // 256 threads, as attention_fwd_wgmma.hip's AW_PP) from step 1 on, one turn per step and
    // one for the last P V: warpgroup 1 grants warpgroup 0 its first turn and does not hand its
    // last turn back, so every barrier phase completes.
#define F8_FENCE_S() _Pragma("unroll") for (int i_ = 0; i_ < F8_SUB / 2; ++i_) asm volatile("" : "+f"(s[i_]) :: "memory")
#define F8_FENCE_O() _Pragma("unroll") for (int i_ = 0; i_ < HDVP / 2; ++i_) asm volatile("" : "+f"(o[i_]) :: "memory")
#define F8_FENCE_P(p) _Pragma("unroll") for (int i_ = 0; i_ < F8_SUB / 32; ++i_) \
    asm volatile("" : "+r"(p[i_][0]), "+r"(p[i_][1]), "+r"(p[i_][2]), "+r"(p[i_][3]) :: "memory")
#if F8_PP
// (immediate barrier ids: warpgroup-uniform branches, no registers held for the ids)
#define F8_PP_SYNC() do { if (wgc == 0) asm volatile("bar.sync 1, 256;" ::: "memory"); \
                          else asm volatile("bar.sync 2, 256;" ::: "memory"); } while (0)
#define F8_PP_PASS() do { if (wgc == 0) asm volatile("bar.arrive 2, 256;" ::: "memory"); \
                          else asm volatile("bar.arrive 1, 256;" ::: "memory"); } while (0)
#else
#define F8_PP_SYNC()
#define F8_PP_PASS()
#endif
    __shared__ float f8_xch[256];           // one value per consumer thread
    const int ct = tid - 128;
    // max / sum of v over the thread's quad (the four threads of its rows), in the order of
    // the shuffles in online: (v + v^1) + (v^2 + v^3)
    auto quad_max = [&](float v) {
        f8_xch[ct] = v;
        __syncwarp();
        const float a = f8_xch[ct ^ 1], b = f8_xch[ct ^ 2], c = f8_xch[ct ^ 3];
        __syncwarp();
        return fmaxf(fmaxf(v, a), fmaxf(b, c));
    };
    auto quad_sum = [&](float v) {
        f8_xch[ct] = v;
        __syncwarp();
        const float a = f8_xch[ct ^ 1], b = f8_xch[ct ^ 2], c = f8_xch[ct ^ 3];
        __syncwarp();
        return (v + a) + (b + c);
    };
    // online with the quad reductions above
    auto online_x = [&](int kv0, float* alpha) {
        float mx[2];
        hdn_attn_wg_mask<F8_SUB>(s, L, kv0, q0w, r0, t4, sl2, mx HDN_ATTN_MOD_REF);
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            mx[r] = quad_max(mx[r]);
            const float mn = fmaxf(mrow[r], mx[r]);
            const float base = mn == -INFINITY ? 0.f : mn;
            alpha[r] = hdn_exp2(mrow[r] - base);
            mrow[r] = mn;
            mx[r] = base;
        }
        float sum[2] = {0.f, 0.f};
#pragma unroll
        for (int i = 0; i < F8_SUB / 2; ++i) {
            const float p = hdn_exp2(s[i] - mx[(i >> 1) & 1]);
            sum[(i >> 1) & 1] += p;
            s[i] = p;
        }
#pragma unroll
        for (int r = 0; r < 2; ++r) lrow[r] = lrow[r] * alpha[r] + quad_sum(sum[r]);
    };
    // O += P Vt over the keys of sub-tile u of V stage sv, P in p
    auto issue_pv2 = [&](int sv, int u, unsigned (&p)[F8_SUB / 32][4]) {
        const unsigned vb = sV + sv * F8_VTILE + u * F8_SUB;
        hdn_wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < F8_SUB / 32; ++ks) {
#if HDVP <= 128
            F8_RS(HDVP)(o, p[ks], wg_desc(vb + ks * 32, 16, 1024), 1);
#else
            F8_RS(128)(o, p[ks], wg_desc(vb + ks * 32, 16, 1024), 1);
#if HDVP == 192
            F8_RS(64)(o + 64, p[ks], wg_desc(vb + 128 * 128 + ks * 32, 16, 1024), 1);
#else
            F8_RS(128)(o + 64, p[ks], wg_desc(vb + 128 * 128 + ks * 32, 16, 1024), 1);
#endif
#endif
        }
        hdn_wgmma_commit();
    };
    // P (s times the row factors ps) -> the fp8 A fragments p (pack_p's layout)
    auto pack_into = [&](unsigned (&p)[F8_SUB / 32][4], const float* ps) {
#pragma unroll
        for (int ks = 0; ks < F8_SUB / 32; ++ks) {
            const float* x = s + 16 * ks;
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                const int r = q & 1, c = 8 * (q >> 1) + 2 * r;
                p[ks][q] = hdn_attn_f8_enc4(x[c] * ps[r], x[c + 1] * ps[r], x[c + 4] * ps[r],
                                            x[c + 5] * ps[r]);
            }
        }
    };
    if (nb1 > nb0) {
        wg_bar_wait(bq, 0);
        const float ps[2] = {scale_s, scale_s};
        // the scores of the sub-tile in s (keys kv0..; keep bits kb) -> P' (fp32) relative to
        // the running max; alpha: O's rescale factors
        auto softmax = [&](int kv0, unsigned long long kb, float* alpha) {
            (void)kb;
            online_x(kv0, alpha);
#if F8_PMAX
            pmx[0] *= alpha[0];
            pmx[1] *= alpha[1];
            keep(kb);
#endif
        };
        const int nt = (nb1 - nb0) * F8_NSUB, kit0 = 0;       // steps; the first K ring item
        {   // step 0 (nothing else in flight): S(0), its softmax, P(0) -> pa
            const unsigned long long kb = keep_bits(nb0 * F8_BN);
            (void)kb;
            scores(kit0, 0);
            float alpha[2];
            online(nb0 * F8_BN, alpha);
#if F8_PMAX
            pmx[0] *= alpha[0];
            pmx[1] *= alpha[1];
            keep(kb);
#endif
            pack_p(ps);
        }
#if F8_PP
        if (wgc == 1) asm volatile("bar.arrive 1, 256;" ::: "memory");     // warpgroup 0 first
#endif
        // P(t) of the even steps in pa, of the odd ones in pb
        unsigned pb[F8_SUB / 32][4];
        // step t >= 1 (u = t % F8_NSUB): S(t) and P(t-1) V(t-1) (P in pin) in flight, the
        // softmax of S(t), P(t) -> pout, then O's rescale once P V(t-1) has landed
        auto step = [&](int t, int u, unsigned (&pin)[F8_SUB / 32][4], unsigned (&pout)[F8_SUB / 32][4]) {
            const int pu = u == 0 ? F8_NSUB - 1 : u - 1;
            const int ki = kit0 + t / F8_NSUB, vi = (t - 1) / F8_NSUB;   // K / V ring items
            const int st = ki % F8_ST, sv = vi % F8_ST;
            const int kv0 = nb0 * F8_BN + t * F8_SUB;
            const unsigned long long kb = keep_bits(kv0);     // (before S(t) holds registers)
            if (u == 0) wg_bar_wait(bkf + 8 * st, (unsigned)(ki / F8_ST) & 1u);
            F8_PP_SYNC();
            issue_s(st, u);
            if (pu == 0) wg_bar_wait(bvf + 8 * sv, (unsigned)(vi / F8_ST) & 1u);
            issue_pv2(sv, pu, pin);
            F8_PP_PASS();
            hdn_wgmma_wait<1>();
            F8_FENCE_S();
            if (u == F8_NSUB - 1) wg_bar_arrive(bke + 8 * st);
            float alpha[2];
            softmax(kv0, kb, alpha);
            pack_into(pout, ps);
            F8_FENCE_P(pout);
            // a shared-memory round trip of a word made of every P code: ptxas keeps the wait
            // for P V(t-1) below the load (it would hoist the wait above the exp2s otherwise)
            unsigned pw = 0;
#pragma unroll
            for (int ks = 0; ks < F8_SUB / 32; ++ks) pw ^= pout[ks][0] ^ pout[ks][1] ^ pout[ks][2] ^ pout[ks][3];
            f8_xch[ct] = __uint_as_float(pw);
            __syncwarp();
            const float pz = *reinterpret_cast<volatile float*>(&f8_xch[ct ^ 1]);
            hdn_wgmma_wait<0>();
            asm volatile("" :: "f"(pz));
            __syncwarp();
            F8_FENCE_O();
            F8_FENCE_P(pin);
            if (pu == F8_NSUB - 1) wg_bar_arrive(bve + 8 * sv);
            // no row max of the warp grew (alpha = exp2(0) = 1 exactly): O * 1 is O
            if (__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) {
#pragma unroll
                for (int j = 0; j < HDVP / 8; ++j) {
                    o[4 * j + 0] *= alpha[0]; o[4 * j + 1] *= alpha[0];
                    o[4 * j + 2] *= alpha[1]; o[4 * j + 3] *= alpha[1];
                }
            }
        };
        // the last P V (P in p; the last sub-tile of V ring item (nt - 1) / F8_NSUB, whose
        // tile was waited for with its first sub-tile unless that is this one; P in pa: pv)
        auto last_pv = [&](unsigned (&p)[F8_SUB / 32][4]) {
            const int vi = (nt - 1) / F8_NSUB, sv = vi % F8_ST;
            if (F8_NSUB == 1) wg_bar_wait(bvf + 8 * sv, (unsigned)(vi / F8_ST) & 1u);
            F8_PP_SYNC();
            issue_pv2(sv, F8_NSUB - 1, p);
#if F8_PP
            if (wgc == 0) F8_PP_PASS();
#endif
            hdn_wgmma_wait<0>();
            F8_FENCE_O();
            F8_FENCE_P(p);
            wg_bar_arrive(bve + 8 * sv);
        };
        int t = 1;
#pragma unroll 1
        for (; t + 1 < nt; t += 2) {        // (t odd: sub-tile 1 % F8_NSUB)
            step(t, 1 % F8_NSUB, pa, pb);
            step(t + 1, 0, pb, pa);
        }
        if (t < nt) {
            step(t, 1 % F8_NSUB, pa, pb);
            last_pv(pb);
        } else {
            F8_PP_SYNC();
            pv((nt - 1) / F8_NSUB, F8_NSUB - 1);
#if F8_PP
            if (wgc == 0) F8_PP_PASS();
#endif
        }
    }
#else
    if (nb1 > nb0) {
        wg_bar_wait(bq, 0);
        int kit = 0, vit = 0;
        float ps[2] = {scale_s, scale_s};
#if F8_TWO_PASS
#pragma unroll 1
        for (int n = nb0; n < nb1; ++n, ++kit) {
#pragma unroll 1
            for (int u = 0; u < F8_NSUB; ++u) {
                scores(kit, u);
                float alpha[2];
                online(n * F8_BN + u * F8_SUB, alpha);
            }
        }
        float base[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            base[r] = mrow[r] == -INFINITY ? 0.f : mrow[r];
            ps[r] = lrow[r] > 0.f ? scale_s / lrow[r] : 0.f;
        }
#endif
#pragma unroll 1
        for (int n = nb0; n < nb1; ++n, ++kit, ++vit) {
#pragma unroll 1
            for (int u = 0; u < F8_NSUB; ++u) {
                const int kv0 = n * F8_BN + u * F8_SUB;
                const unsigned long long kb = keep_bits(kv0);
                (void)kb;
                scores(kit, u);
#if F8_TWO_PASS
                float mx[2];
                hdn_attn_wg_mask<F8_SUB>(s, L, kv0, q0w, r0, t4, sl2, mx HDN_ATTN_MOD_REF);
#pragma unroll
                for (int i = 0; i < F8_SUB / 2; ++i) s[i] = hdn_exp2(s[i] - base[(i >> 1) & 1]);
#if F8_PMAX
                keep(kb);
#endif
#else
                float alpha[2];
                online(kv0, alpha);
#pragma unroll
                for (int j = 0; j < HDVP / 8; ++j) {
                    o[4 * j + 0] *= alpha[0]; o[4 * j + 1] *= alpha[0];
                    o[4 * j + 2] *= alpha[1]; o[4 * j + 3] *= alpha[1];
                }
#if F8_PMAX
                pmx[0] *= alpha[0];
                pmx[1] *= alpha[1];
                keep(kb);
#endif
#endif
                pack_p(ps);
                pv(vit, u);
            }
        }
    }
#endif
    // epilogue: O = acc * descale_s * descale_v (one sweep: / l), o = O * scale_o; rows
    // without keys (with a sink: padded rows): 0; stats = ln(sum exp(s)) (+inf for those rows);
    // amax_s = max 1/l (P's largest entry in a row is exp(0) / l; with a sink or dropout the
    // tracked largest P' entry / l), amax_o = max |O|
    const float dsv = (F8_DESCALE_S) * (F8_DESCALE_V), so = F8_SCALE_O;
    float am_s = 0.f, am_o = 0.f;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const int i = r0 + 8 * r;
        const bool emp = HDN_ATTN_EMPTY(L, i, lrow[r]);
        const float inv = emp ? 0.f : 1.f / lrow[r];
#if F8_PMAX
        am_s = fmaxf(am_s, pmx[r] * inv);
#else
        am_s = fmaxf(am_s, inv);
#endif
#if F8_TWO_PASS
        const float osc = dsv;
#else
        const float osc = dsv * inv;
#endif
        if (i >= SQ) continue;
        unsigned char* Ob = O + ((long long)b * OSB + (long long)h * OSH + (long long)i * OSS) * F8_OSZ;
#pragma unroll
        for (int j = 0; j < HDV / 8; ++j) {
            const float x0 = o[4 * j + 2 * r] * osc, x1 = o[4 * j + 2 * r + 1] * osc;
            am_o = fmaxf(am_o, fmaxf(fabsf(x0), fabsf(x1)));
            hdn_attn_f8_store2(Ob + (8 * j + 2 * t4) * F8_OSZ, x0 * so, x1 * so);
        }
#if HAS_STATS
        if (t4 == 0)
            LSE[(long long)b * LSB + (long long)h * LSH + (long long)i * LSS] =
                emp ? INFINITY : mrow[r] * HDN_LN2 + logf(lrow[r]);
#endif
    }
#if F8_HAS_AMAX_S
    hdn_attn_amax(amax_s, am_s, lane);
#endif
#if F8_HAS_AMAX_O
    hdn_attn_amax(amax_o, am_o, lane);
#endif
    (void)am_s; (void)am_o;
}
#else
// not an sm_90a compile: the symbol exists, ops/sdpa.py never launches it there
extern "C" __global__ void hdn_attn_fwd_f8() {}
#endif
#else
// AMD: no fp8 attention (ops/sdpa.py declines it there); the symbols exist
extern "C" __global__ void hdn_attn_f8_vt() {}
extern "C" __global__ void hdn_attn_fwd_f8() {}
#endif
