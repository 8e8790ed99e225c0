// gemm_wgmma.hip - the Hopper GEMM core (sm_90a): warp-specialised, persistent, multi-stage.
// C[b](GM x GN) = epilogue(A[b](GM x GK) * B[b](GK x GN)), 16-bit inputs (half / bfloat16) or
// fp32 inputs as TF32 (WG_TF32 1) or fp8 e4m3 / e5m2 (WG_FP8 1 / 2) - both operands K-major for
// those - with fp32 accumulation in registers; or s8 x s8 (WG_S8 1: wgmma m64nNk32.s32.s8.s8,
// K-major operands, int32 accumulators that wrap modulo 2^32; HDN_ACC_INT 1: store_c / store_c8
// and the split-K partials take int values).  Same generated prelude as gemm_mma.hip (sizes, a_off / b_off
// operand gathers, store_c / store_c8 with any fused epilogue), plus:
//   WG_BN      tile N (64, 128 or 256; tile M is 128, tile K 128 bytes of k: 64 16-bit, 32 tf32)
//   WG_TF32    1: TA = TB = float, wgmma m64nNk8.tf32 (only K-major operands: A_MODE / B_MODE != 2)
//   WG_STAGES  shared-memory pipeline depth (>= 3)
//   A_TMA / B_TMA  1: the operand is a dense (batched) matrix loaded by the tensor copy engine from
//              the tensor map argument tmA / tmB; 0: gathered by the producer warps (cp.async
//              16-byte chunks for A_MODE / B_MODE 1 (8 along k) or 2 (8 along m / n), element
//              loads + shared stores for mode 0).
// CTA = 3 warpgroups (384 threads): warpgroup 0 produces (TMA / gathers into the stage ring,
// mbarrier "full" per stage), warpgroups 1 and 2 consume (wgmma m64nWG_BNk16 on 64 rows each,
// release the stage through mbarrier "empty" once the tensor cores are done with it).
// Persistent: gridDim.x <= #SMs CTAs walk the work units (batch x tiles (grouped raster) x
// split-K part); the producer runs ahead into the next unit while the consumers run the
// epilogue.  Shared-memory tiles use the 128-byte swizzle (16-byte chunk c of 128-byte row r at
// chunk c ^ (r & 7)): K-major tiles are rows of 64 k; M/N-major tiles are 64-wide atoms of 64
// k rows (8 KiB each) - the layouts wgmma descriptors name with swizzle mode 1.
// Split-K (GSPLIT > 1): each part writes fp32 partials HDN_PART[b * GSPLIT + s][m][n] and
// gemm_splitk.hip sums them and runs the epilogue - or, with WG_FIXUP 1, the CTA that finishes a
// tile's last part does it in this kernel (wg_fixup: per-tile arrival counters HDN_CNT in the
// plan's zeroed scratch, reset by that CTA; the parts summed in order s = 0 .. GSPLIT - 1, the
// finish kernel's order, so the result does not depend on which part arrives last).
// Convolution operands on 4-D / 3-D tensor maps: WG_WGRAD (backward filter: k tiles are boxes
// of output positions, dy and per-tap x boxes; program._wgrad_tma), B_TAP_K (backward data:
// KRSC weights as (C, K, tap) boxes) and WG_IM2COL (forward: per k tile = filter tap x 64
// input channels one im2col-mode load of the 128 consecutive output pixels of the unit -
// the copy engine walks rows and images and zero-fills the padding - and one (C, S, R, K)
// weight box; program._fwd_im2col).  The producer gathers nothing.
// WG_TMA_STORE 1 (epilogue-bound shapes, e.g. 1 x 1 convolutions with 64 input channels: one k
// step per tile; gemm_core.tma_store_config): the epilogue applies the fused ops in registers
// (epi_v: the value of the one 16-bit output TC at (b, m, n)), stages each consumer
// warpgroup's 64 x WG_BN half tile in shared memory as 64 x 64 boxes (128-byte swizzle) and one
// thread per warpgroup stores them with the tensor copy engine (tensor map tmC over the dense
// output, (GN, GM, GBATCH); rows / columns past the end are clipped), so the warpgroup returns
// to the next unit's wgmma while the store drains.  The half tile's staging buffer is reused
// after cp.async.bulk.wait_group.read by the issuing thread + the warpgroup's named barrier
// (id 1 + consumer index, 128 threads).  Never with split-K or the grouped scheduler.
#ifndef HDN_GENERATED
#include "hdn_compat.h"
typedef hdn_half TA;
typedef hdn_half TB;
#define GM 1000
#define GN 1000
#define GK 1000
#define GBATCH 1
#define A_MODE 1
#define B_MODE 2
#define A_TMA 1
#define B_TMA 1
#define HDN_EPI_PARAMS float* __restrict__ C
#define HDN_EPI_ARGS C
__device__ __forceinline__ long long a_off(int b, int m, int k) { return (long long)m * GK + k; }
__device__ __forceinline__ long long b_off(int b, int k, int n) { return (long long)k * GN + n; }
__device__ __forceinline__ hdn_u16 load_a_raw(const TA* __restrict__ A, int b, int m, int k) { return hdn_bits(A[a_off(b, m, k)]); }
__device__ __forceinline__ hdn_u16 load_b_raw(const TB* __restrict__ B, int b, int k, int n) { return hdn_bits(B[b_off(b, k, n)]); }
__device__ __forceinline__ void store_c(HDN_EPI_PARAMS, int b, int m, int n, float v) { C[(long long)m * GN + n] = v; }
__device__ __forceinline__ void store_c8(HDN_EPI_PARAMS, int b, int m, int n, const float* v) { for (int j = 0; j < 8; ++j) C[(long long)m * GN + n + j] = v[j]; }
#define C_VEC 1
#endif
#include "hdn_wgmma.h"
#include "hdn_tma.h"
#ifndef GSPLIT
#define GSPLIT 1
#define GKSPLIT GK
#endif
#ifndef C_VEC
#define C_VEC 0
#endif
#ifndef WG_BN
#define WG_BN 256
#endif
#ifndef WG_STAGES
#define WG_STAGES 4
#endif
#ifndef WG_BF16
#define WG_BF16 0
#endif
#ifndef WG_TF32
#define WG_TF32 0
#endif
#ifndef WG_FP8
#define WG_FP8 0           // 1: e4m3, 2: e5m2 (wgmma m64nNk32, K-major only)
#endif
#ifndef WG_S8
#define WG_S8 0            // 1: s8 x s8 -> s32 (wgmma m64nNk32, K-major only)
#endif
#if WG_S8
typedef int wg_acc_t;      // accumulators, staging and split-K partials
typedef int4 wg_acc4_t;
#if !(defined(HDN_ACC_INT) && HDN_ACC_INT)
#error "WG_S8: the prelude's epilogue takes int values (HDN_ACC_INT 1)"
#endif
#else
typedef float wg_acc_t;
typedef float4 wg_acc4_t;
#endif
#if WG_TF32
#define WG_ES 4            // element bytes
typedef unsigned wg_raw_t;
#elif WG_FP8 || WG_S8
#define WG_ES 1
typedef unsigned char wg_raw_t;
#else
#define WG_ES 2
typedef hdn_u16 wg_raw_t;
#endif
#define WG_CHUNK (16 / WG_ES)   // elements per 16-byte chunk
#if (WG_TF32 || WG_FP8 || WG_S8) && (A_MODE == 2 || B_MODE == 2)
#error "tf32 / fp8 / s8 wgmma read K-major operands only (the plan builder transposes M/N-major ones)"
#endif
#ifndef A_TMA
#define A_TMA 0
#endif
#if GK < 1
#error "the wgmma core needs GK >= 1"
#endif
#ifndef WG_WGRAD
#define WG_WGRAD 0         // 1: backward filter on 4-D tensor maps (program._wgrad_tma)
#endif
#ifndef WGR_SWAP
#define WGR_SWAP 0         // 1 (with WG_WGRAD): dw^T - A = per-tap x boxes, B = dy boxes
#endif
#if WG_WGRAD && !(A_TMA && B_TMA && A_MODE == 2 && B_MODE == 2 && WG_ES == 2)
#error "WG_WGRAD: both operands M/N-major 16-bit tensor-map boxes"
#endif
#ifndef B_TMA
#define B_TMA 0
#endif
#ifndef WG_IM2COL
#define WG_IM2COL 0        // 1: convolution forward with A on an im2col tensor map (program._fwd_im2col)
#endif
#if WG_IM2COL && !(A_TMA && B_TMA && A_MODE == 1 && B_MODE == 1 && WG_ES == 2 && !WG_WGRAD)
#error "WG_IM2COL: both operands K-major 16-bit tensor-map loads"
#endif
#ifndef WG_TMA_STORE
#define WG_TMA_STORE 0
#endif
#if WG_TMA_STORE && (GSPLIT > 1 || defined(WG_SCHED_GROUPED) || WG_WGRAD || (GN % 8) != 0)
#error "WG_TMA_STORE: plain schedule without split-K, 16-byte output rows (GN % 8 == 0)"
#endif
#ifndef WG_PAIR
#define WG_PAIR 0
#endif
#if WG_PAIR && !(B_TMA && GSPLIT == 1 && !WG_TMA_STORE && !defined(WG_SCHED_GROUPED) && !WG_WGRAD && \
                 !WG_IM2COL && !defined(B_TAP_K) && WG_BN >= 128 && (GN % 2) == 0)
#error "WG_PAIR: two tensor-map B operands, plain schedule, no split-K, register epilogue, WG_BN >= 128"
#endif
#ifndef WG_STATS
#define WG_STATS 0
#endif
#if WG_STATS && (GSPLIT > 1 || defined(WG_SCHED_GROUPED) || WG_WGRAD || WG_PAIR || GBATCH != 1)
#error "WG_STATS: plain schedule without split-K, one batch"
#endif
// the epilogue's output columns: the whole tile, or with WG_PAIR the first half (the paired
// value of columns c and c + WG_BN / 2 of the tile lands in output column n0 / 2 + c)
#if WG_PAIR
#define WG_EPI_BN (WG_BN / 2)
#define WG_ON (GN / 2)
#else
#define WG_EPI_BN WG_BN
#define WG_ON GN
#endif
#ifndef WG_MN_LBO
#define WG_MN_LBO 8192   // M/N-major descriptors: byte stride between 64-wide atoms
#endif
#ifndef WG_MN_SBO
#define WG_MN_SBO 1024   // ... and between groups of 8 k rows
#endif


#define WG_BM 128
#define WG_BK (128 / WG_ES)   // k per stage: one 128-byte swizzled row per m / n
#define WG_A_BYTES (WG_BM * 128)
#define WG_B_BYTES (WG_BN * 128)
#define WG_STAGE_BYTES (WG_A_BYTES + WG_B_BYTES)
#define WG_EPI_LD 36
#if WG_TMA_STORE
#define WG_CS_HALF (64 * WG_BN * 2)          // one consumer warpgroup's 64 x WG_BN 16-bit half tile
#define WG_EPI_BYTES (2 * WG_CS_HALF)
#else
#define WG_EPI_BYTES (8 * 16 * WG_EPI_LD * 4)
#endif
#define WG_TM ((GM + WG_BM - 1) / WG_BM)
#define WG_TN ((GN + WG_BN - 1) / WG_BN)
#define WG_TILES (WG_TM * WG_TN)
#define WG_UNITS (WG_TILES * GBATCH * GSPLIT)
#define WG_GROUP 8
#define WG_ANY_TMA (A_TMA || B_TMA)
#define WG_ANY_GATHER (!A_TMA || !B_TMA)
#define WG_ANY_SCALAR ((!A_TMA && A_MODE == 0) || (!B_TMA && B_MODE == 0))
#define WG_ANY_CPASYNC ((!A_TMA && A_MODE != 0) || (!B_TMA && B_MODE != 0))
#define WG_FULL_COUNT ((WG_ANY_TMA ? 1 : 0) + (WG_ANY_GATHER ? 128 : 0))
#define WG_TMA_BYTES ((A_TMA ? WG_A_BYTES : 0) + (B_TMA ? WG_B_BYTES : 0))
#define WG_A_MN (A_MODE == 2)
#define WG_B_MN (B_MODE == 2)
#if WG_ANY_GATHER
#define WG_PROD_REGS 72
#define WG_CONS_REGS 216
#else
#define WG_PROD_REGS 40
#define WG_CONS_REGS 232
#endif
// WG_STATS: per consumer warpgroup float sums[WG_BN], squares[WG_BN] after the mbarriers
#define WG_STATS_BYTES (WG_STATS ? 2 * 2 * WG_BN * 4 : 0)
// dynamic shared memory the launch asks for (alignment slack included)
#define WG_SMEM_BYTES (WG_STAGES * WG_STAGE_BYTES + WG_EPI_BYTES + 16 * WG_STAGES + WG_STATS_BYTES + 1024)

#if HDN_CUDA && defined(__CUDA_ARCH_FEAT_SM90_ALL)
__device__ __forceinline__ void wg_unit(int u, int& b, int& m0, int& n0, int& kb, int& ke) {
    const int s = u % GSPLIT, rest = u / GSPLIT;
    const int t = rest % WG_TILES;
    b = rest / WG_TILES;
    const int per = WG_GROUP * WG_TN, g = t / per, first = g * WG_GROUP;
    const int gs = WG_TM - first < WG_GROUP ? WG_TM - first : WG_GROUP;
    const int r = t % per;
    m0 = (first + r % gs) * WG_BM;
    n0 = (r / gs) * WG_BN;
    kb = s * GKSPLIT;
    ke = kb + GKSPLIT < GK ? kb + GKSPLIT : GK;
}

// ---- grouped tile scheduler (an optional extension; moe.py uses it).  The prelude defines
// WG_SCHED_GROUPED and the expressions WG_SCHED_G (group count), WG_SCHED_OFF (const int*:
// first row / k of each group, non-decreasing), WG_SCHED_OK (int: 0 = run nothing):
//   1: M-grouped (grouped GEMM): group g owns rows [off[g], off[g+1]) of M (the last to GM);
//      WG_SCHED_TILES (const int*, G + 1 entries) holds the prefix sums of the groups' 128-row
//      tile counts (computed on the device by the caller).  Units walk the concatenated M tiles
//      (grouped raster as wg_unit); b = the unit's group, m0 its tile's first row.  Rows past
//      the group's end inside the last tile are loaded but never stored (store_c's range check).
//   2: K-grouped (per-group weight gradient): b = group, its reduction runs over k in
//      [off[g], off[g+1]) (the last to GK) - the operand gathers zero the k rows past ke, so
//      both operands must be gathered (no TMA) with per-k masking (M/N-major, mode 2).
// WG_A_BATCH(b) / WG_B_BATCH(b): the batch coordinate of the A / B tensor maps (default b).
#ifndef WG_A_BATCH
#define WG_A_BATCH(b) (b)
#endif
#ifndef WG_B_BATCH
#define WG_B_BATCH(b) (b)
#endif
#ifdef WG_SCHED_GROUPED
#if WG_SCHED_GROUPED == 1
#define WG_NUNITS ((WG_SCHED_OK) ? (WG_SCHED_TILES)[WG_SCHED_G] * WG_TN : 0)
__device__ __forceinline__ void wg_unit_grouped(const int* __restrict__ tiles, const int* __restrict__ off,
                                                int u, int& b, int& m0, int& n0, int& kb, int& ke) {
    const int tm = tiles[WG_SCHED_G];
    const int per = WG_GROUP * WG_TN, g = u / per, first = g * WG_GROUP;
    const int gs = tm - first < WG_GROUP ? tm - first : WG_GROUP;
    const int r = u % per;
    const int mt = first + r % gs;
    n0 = (r / gs) * WG_BN;
    int lo = 0, hi = WG_SCHED_G - 1;          // the last group whose first tile is <= mt
    while (lo < hi) {
        const int mid = (lo + hi + 1) >> 1;
        if (tiles[mid] <= mt) lo = mid; else hi = mid - 1;
    }
    b = lo;
    m0 = off[lo] + (mt - tiles[lo]) * WG_BM;
    kb = 0;
    ke = GK;
}
#define WG_UNIT(u, b, m0, n0, kb, ke) wg_unit_grouped(WG_SCHED_TILES, WG_SCHED_OFF, u, b, m0, n0, kb, ke)
#else
#define WG_NUNITS ((WG_SCHED_OK) ? WG_UNITS : 0)
__device__ __forceinline__ void wg_unit_kgrouped(const int* __restrict__ off, int u, int& b, int& m0, int& n0,
                                                 int& kb, int& ke) {
    wg_unit(u, b, m0, n0, kb, ke);
    kb = off[b];
    ke = b + 1 < WG_SCHED_G ? off[b + 1] : GK;
    if (ke < kb) ke = kb;
}
#define WG_UNIT(u, b, m0, n0, kb, ke) wg_unit_kgrouped(WG_SCHED_OFF, u, b, m0, n0, kb, ke)
#endif
#else
#define WG_NUNITS WG_UNITS
#define WG_UNIT(u, b, m0, n0, kb, ke) wg_unit(u, b, m0, n0, kb, ke)
#endif

// ---- producer gathers (one warpgroup, t = 0..127); IS_A selects the operand
template <int IS_A>
__device__ __forceinline__ long long wg_off(int b, int mn, int k) {
    if (IS_A) return a_off(b, mn, k);
    return b_off(b, k, mn);
}
// K-major tile: R rows of WG_BK k (128 bytes), WG_CHUNK consecutive k per 16-byte chunk
template <int IS_A, int R>
__device__ __forceinline__ void wg_gather_k(unsigned dst, const char* base, int b, int mn0, int k0, int ke, int t) {
    const int c = t & 7;
    const int gk = k0 + c * WG_CHUNK;
#pragma unroll
    for (int i = 0; i < R / 16; ++i) {
        const int r = (t >> 3) + 16 * i, gmn = mn0 + r;
        long long o = -1;
        if (gmn < (IS_A ? GM : GN) && gk < ke) o = wg_off<IS_A>(b, gmn, gk);
        wg_cp_async16(dst + r * 128 + ((c ^ (r & 7)) << 4), base + (o < 0 ? 0 : o * WG_ES), o < 0 ? 0u : 16u);
    }
}
// M/N-major tile: R / 64 atoms of 64 k rows x 64 m/n, 8 consecutive m/n per chunk
template <int IS_A, int R>
__device__ __forceinline__ void wg_gather_mn(unsigned dst, const char* base, int b, int mn0, int k0, int ke, int t) {
    const int c = t & 7;
#pragma unroll
    for (int j = 0; j < R / 64; ++j) {
        const int gmn = mn0 + 64 * j + 8 * c;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int kr = (t >> 3) + 16 * i, gk = k0 + kr;
            long long o = -1;
            if (gmn < (IS_A ? GM : GN) && gk < ke) o = wg_off<IS_A>(b, gmn, gk);
            wg_cp_async16(dst + j * 8192 + kr * 128 + ((c ^ (kr & 7)) << 4), base + (o < 0 ? 0 : o * WG_ES),
                          o < 0 ? 0u : 16u);
        }
    }
}
#ifndef A_ROWS
#define A_ROWS 0
#endif
#if A_ROWS
// implicit-GEMM A with precomputed addressing (implicit.py): the producer thread's WG_BM / 16
// rows (row base offset + packed spatial starts, once per unit) and per k tile one filter tap
// (offset + packed shifts); a chunk costs an add and the bounds compare
__device__ __forceinline__ void wg_rows_init(wg_arow* rows, int b, int m0, int t) {
#pragma unroll
    for (int i = 0; i < WG_BM / 16; ++i) rows[i] = a_row(b, m0 + (t >> 3) + 16 * i);
}
__device__ __forceinline__ void wg_gather_rows(unsigned dst, const char* base, const wg_arow* rows, int k0, int ke, int t) {
    const int c = t & 7;
    const bool kin = k0 + c * WG_CHUNK < ke;
    const wg_atap tp = a_tap(k0);
#pragma unroll
    for (int i = 0; i < WG_BM / 16; ++i) {
        const int r = (t >> 3) + 16 * i;
        const bool ok = kin && a_in(rows[i], tp);
        const long long o = (long long)(rows[i].base + tp.off) + c * WG_CHUNK;
        wg_cp_async16(dst + r * 128 + ((c ^ (r & 7)) << 4), base + (ok ? o * WG_ES : 0), ok ? 16u : 0u);
    }
}
#endif
// element gather into a K-major tile (any strides, padding, tails): raw element bits
template <int IS_A, int R>
__device__ __forceinline__ void wg_gather_e(char* dst, const void* base, int b, int mn0, int k0, int ke, int t) {
#pragma unroll 4
    for (int e = t; e < R * WG_BK; e += 128) {
        const int r = e / WG_BK, kk = e % WG_BK, gmn = mn0 + r, gk = k0 + kk;
        wg_raw_t v = 0;
        if (gmn < (IS_A ? GM : GN) && gk < ke) {
            const long long o = wg_off<IS_A>(b, gmn, gk);
            if (o >= 0) v = reinterpret_cast<const wg_raw_t*>(base)[o];
        }
        *reinterpret_cast<wg_raw_t*>(dst + r * 128 + ((((kk / WG_CHUNK) ^ (r & 7))) << 4) + (kk % WG_CHUNK) * WG_ES) = v;
    }
}

__device__ __forceinline__ void wg_mma(wg_acc_t* acc, unsigned long long da, unsigned long long db, int sd) {
#if WG_S8
#if WG_BN == 256
    hdn_wgmma_m64n256k32_s8(acc, da, db, sd);
#elif WG_BN == 128
    hdn_wgmma_m64n128k32_s8(acc, da, db, sd);
#else
    hdn_wgmma_m64n64k32_s8(acc, da, db, sd);
#endif
#elif WG_TF32
#if WG_BN == 256
    hdn_wgmma_m64n256k8_tf32<0, 0>(acc, da, db, sd);
#elif WG_BN == 128
    hdn_wgmma_m64n128k8_tf32<0, 0>(acc, da, db, sd);
#else
    hdn_wgmma_m64n64k8_tf32<0, 0>(acc, da, db, sd);
#endif
#elif WG_FP8 == 1
#if WG_BN == 256
    hdn_wgmma_m64n256k32_e4m3<0, 0>(acc, da, db, sd);
#elif WG_BN == 128
    hdn_wgmma_m64n128k32_e4m3<0, 0>(acc, da, db, sd);
#else
    hdn_wgmma_m64n64k32_e4m3<0, 0>(acc, da, db, sd);
#endif
#elif WG_FP8 == 2
#if WG_BN == 256
    hdn_wgmma_m64n256k32_e5m2<0, 0>(acc, da, db, sd);
#elif WG_BN == 128
    hdn_wgmma_m64n128k32_e5m2<0, 0>(acc, da, db, sd);
#else
    hdn_wgmma_m64n64k32_e5m2<0, 0>(acc, da, db, sd);
#endif
#elif WG_BF16
#if WG_BN == 256
    hdn_wgmma_m64n256k16_bf16<WG_A_MN, WG_B_MN>(acc, da, db, sd);
#elif WG_BN == 128
    hdn_wgmma_m64n128k16_bf16<WG_A_MN, WG_B_MN>(acc, da, db, sd);
#else
    hdn_wgmma_m64n64k16_bf16<WG_A_MN, WG_B_MN>(acc, da, db, sd);
#endif
#else
#if WG_BN == 256
    hdn_wgmma_m64n256k16_f16<WG_A_MN, WG_B_MN>(acc, da, db, sd);
#elif WG_BN == 128
    hdn_wgmma_m64n128k16_f16<WG_A_MN, WG_B_MN>(acc, da, db, sd);
#else
    hdn_wgmma_m64n64k16_f16<WG_A_MN, WG_B_MN>(acc, da, db, sd);
#endif
#endif
}

#if WG_TMA_STORE
// byte offset, in a consumer warpgroup's staging half tile (WG_BN / 64 boxes of 64 rows x 128
// bytes, 128-byte swizzle), of the column pair (8 j + 2 t4, + 1) of row r
__device__ __forceinline__ unsigned wg_cs_off(int r, int j, int t4) {
    return (unsigned)((j >> 3) * 8192 + r * 128 + (((j & 7) ^ (r & 7)) << 4) + t4 * 4);
}
#endif
#if WG_TMA_STORE || WG_STATS
// one consumer warpgroup's 128 threads (named barrier 1 + wgc; id 0 is __syncthreads)
__device__ __forceinline__ void wg_cons_sync(int wgc) {
    if (wgc == 0) wg_named_sync<1, 128>(); else wg_named_sync<2, 128>();
}
#endif

#if WG_STATS
// per-column (output channel) sum and sum of squares of the stored outputs, rounded to TS as a
// later pass would read them: the lanes of a warp that share a column (equal lane & 3) reduce
// by shuffles, one of them adds to the consumer warpgroup's shared sums sst[nl], sst[WG_BN + nl]
// (nl: the column in the tile); wg_st_flush adds those to hdn_st[n], hdn_st[GN + n] (double,
// zeroed by the plan) once per run of units with the same n0 and at the end - a few global
// atomics per column per CTA
__device__ __forceinline__ float wg_st_round(float v) { return hdn_to_float(hdn_from_float<TS>(v)); }
__device__ __forceinline__ void wg_st_add(float* sst, int lane, int nl, float s, float q) {
#pragma unroll
    for (int o = 4; o < 32; o <<= 1) {
        s += __shfl_xor_sync(0xffffffffu, s, o);
        q += __shfl_xor_sync(0xffffffffu, q, o);
    }
    if (lane < 4) {
        atomicAdd(sst + nl, s);
        atomicAdd(sst + WG_BN + nl, q);
    }
}
// the warpgroup's shared sums of the tile columns from n0 -> hdn_st, then zeroed
__device__ __forceinline__ void wg_st_flush(double* __restrict__ st, float* sst, int n0, int tw, int wgc) {
    wg_cons_sync(wgc);
    for (int i = tw; i < WG_BN; i += 128) {
        if (n0 + i < GN) {
            atomicAdd(st + n0 + i, (double)sst[i]);
            atomicAdd(st + GN + n0 + i, (double)sst[WG_BN + i]);
        }
        sst[i] = 0.f;
        sst[WG_BN + i] = 0.f;
    }
    wg_cons_sync(wgc);
}
#endif

#ifndef WG_FIXUP
#define WG_FIXUP 0
#endif
#if GSPLIT > 1 && WG_FIXUP
// split-K fixup of one unit, by both consumer warpgroups (tc = 0 .. 255): every thread's partial
// stores are fenced, one thread counts the unit's arrival on its output tile; the CTA that
// brings the count to GSPLIT sums the tile's GSPLIT partials (L2 reads) and runs the epilogue
// (store_c8 / store_c), then resets the counter for the next launch
__device__ __forceinline__ void wg_fixup(const float* __restrict__ P, unsigned* __restrict__ cnt,
                                         HDN_EPI_PARAMS, int u, int b, int m0, int n0, int tc) {
    __shared__ int wg_last;
    __threadfence();
    wg_named_sync<3, 256>();            // every consumer thread's partial stores of this unit
    const int tile = u / GSPLIT;
    if (tc == 0) {
        __threadfence();                // release them at gpu scope (after the barrier)
        wg_last = atomicAdd(cnt + tile, 1u) == (unsigned)(GSPLIT - 1);
        __threadfence();                // acquire the other parts' partials
    }
    wg_named_sync<3, 256>();
    if (!wg_last) return;
    __threadfence();
#pragma unroll 1
    for (int i = tc; i < WG_BM * (WG_BN / 8); i += 256) {
        const int gm = m0 + i / (WG_BN / 8), gn = n0 + (i % (WG_BN / 8)) * 8;
        if (gm >= GM || gn >= GN) continue;
        float v[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
#pragma unroll 1
        for (int s = 0; s < GSPLIT; ++s) {
            const float* p = P + (((long long)b * GSPLIT + s) * GM + gm) * GN + gn;
#pragma unroll
            for (int j = 0; j < 8; ++j) if (gn + j < GN) v[j] += __ldcg(p + j);
        }
#if C_VEC
        store_c8(HDN_EPI_ARGS, b, gm, gn, v);
#else
#pragma unroll
        for (int j = 0; j < 8; ++j) if (gn + j < GN) store_c(HDN_EPI_ARGS, b, gm, gn + j, v[j]);
#endif
    }
    if (tc == 0) cnt[tile] = 0u;
}
#endif

extern "C" __global__ void __launch_bounds__(384, 1)
hdn_gemm_wgmma(const TA* __restrict__ A, const TB* __restrict__ B
#if A_TMA
               , const __grid_constant__ hdn_tmap tmA
#endif
#if B_TMA
               , const __grid_constant__ hdn_tmap tmB
#endif
#if WG_PAIR
               , const __grid_constant__ hdn_tmap tmB2
#endif
#if WG_TMA_STORE
               , const __grid_constant__ hdn_tmap tmC
#endif
#if GSPLIT > 1 && WG_FIXUP
               , wg_acc_t* __restrict__ HDN_PART, unsigned* __restrict__ HDN_CNT, HDN_EPI_PARAMS)
#elif GSPLIT > 1
               , wg_acc_t* __restrict__ HDN_PART)
#else
               , HDN_EPI_PARAMS)
#endif
{
    extern __shared__ __align__(16) unsigned char wg_smem_raw[];
    const unsigned raw_s = wg_saddr(wg_smem_raw);
    const unsigned sbase = (raw_s + 1023u) & ~1023u;
    unsigned char* gbase = wg_smem_raw + (sbase - raw_s);
    float* epi = reinterpret_cast<float*>(gbase + WG_STAGES * WG_STAGE_BYTES);
    const unsigned bars = sbase + WG_STAGES * WG_STAGE_BYTES + WG_EPI_BYTES;   // full[s], empty[s]
    const int tid = threadIdx.x, wg = tid >> 7;
    if (tid == 0) {
#pragma unroll 1
        for (int s = 0; s < WG_STAGES; ++s) {
            wg_bar_init(bars + 8 * s, WG_FULL_COUNT);
            wg_bar_init(bars + 8 * (WG_STAGES + s), 256);
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();

    if (wg == 0) {
        // ------------------------------------------------------------------ producer
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" :: "n"(WG_PROD_REGS));
        const int t = tid;
        int it = 0;
        const int nunits = WG_NUNITS;
#pragma unroll 1
        for (int u = blockIdx.x; u < nunits; u += gridDim.x) {
            int b, m0, n0, kb, ke;
            WG_UNIT(u, b, m0, n0, kb, ke);
#if A_ROWS && !A_TMA && A_MODE == 1
            wg_arow rows[WG_BM / 16];
            wg_rows_init(rows, b, m0, t);
#endif
#if WG_IM2COL
            // the unit's first output pixel (image, row, column) -> its input pixel at tap (0, 0)
            const int i2c_q = m0 % I2C_Q, i2c_pn = m0 / I2C_Q;
            const int i2c_w = i2c_q * I2C_STW - I2C_PADW, i2c_h = (i2c_pn % I2C_P) * I2C_STH - I2C_PADH;
            const int i2c_n = i2c_pn / I2C_P;
#endif
#pragma unroll 1
            for (int k0 = kb; k0 < ke; k0 += WG_BK, ++it) {
                const int st = it % WG_STAGES;
                const unsigned ph = (unsigned)(it / WG_STAGES) & 1u;
                const unsigned full = bars + 8 * st, empty = bars + 8 * (WG_STAGES + st);
                const unsigned sa = sbase + st * WG_STAGE_BYTES, sb = sa + WG_A_BYTES;
                wg_bar_wait(empty, ph ^ 1u);
#if WG_WGRAD
                // backward filter: k tile = a WGR_BQ x WGR_BP box of output positions of one
                // image; A = dy box (64 output channels per atom), B = per filter tap the x box
                // at box * stride - pad + tap * dil (64 input channels per atom; an atom past
                // GN reads channels >= C, i.e. zeros)
                if (t == 0) {
                    wg_bar_expect_tx(full, WG_TMA_BYTES);
                    const int kt = k0 / WG_BK;
                    const int qb = kt % WGR_NQB, rq = kt / WGR_NQB, pb = rq % WGR_NPB, nb = rq / WGR_NPB;
#if WGR_SWAP
                    // dw^T (program._spec_conv_bwd_filter_swapped): the same boxes, roles
                    // exchanged - A = per tap the x box (m = (tap, channel)), B = the dy box
#pragma unroll
                    for (int j = 0; j < 2; ++j) {
                        const int m = m0 + 64 * j;
                        const int tap = m / WGR_C, c0 = m < GM ? m % WGR_C : WGR_C;
                        const int rr = tap / WGR_S, ss = tap % WGR_S;
                        wg_tma4(sa + 8192 * j, &tmA, c0, qb * WGR_BQ * WGR_STW - WGR_PADW + ss * WGR_DILW,
                                pb * WGR_BP * WGR_STH - WGR_PADH + rr * WGR_DILH, nb, full);
                    }
#pragma unroll
                    for (int j = 0; j < WG_BN / 64; ++j)
                        wg_tma4(sb + 8192 * j, &tmB, n0 + 64 * j, qb * WGR_BQ, pb * WGR_BP, nb, full);
#else
                    wg_tma4(sa, &tmA, m0, qb * WGR_BQ, pb * WGR_BP, nb, full);
                    wg_tma4(sa + 8192, &tmA, m0 + 64, qb * WGR_BQ, pb * WGR_BP, nb, full);
#pragma unroll
                    for (int j = 0; j < WG_BN / 64; ++j) {
                        const int n = n0 + 64 * j;
                        const int tap = n / WGR_C, c0 = n < GN ? n % WGR_C : WGR_C;
                        const int rr = tap / WGR_S, ss = tap % WGR_S;
                        wg_tma4(sb + 8192 * j, &tmB, c0, qb * WGR_BQ * WGR_STW - WGR_PADW + ss * WGR_DILW,
                                pb * WGR_BP * WGR_STH - WGR_PADH + rr * WGR_DILH, nb, full);
                    }
#endif
                }
#elif WG_IM2COL
                // convolution forward (channels-last x, KRSC-like w): k tile = filter tap x 64
                // input channels (channel block inner); A = one im2col load of the unit's 128
                // consecutive output pixels at this tap (zeros where the tap reads padding, past
                // the last image or channels >= C), B = the tap's (64 channels x WG_BN output
                // channels) weight box
                if (t == 0) {
                    wg_bar_expect_tx(full, WG_TMA_BYTES);
                    const int kt = k0 / WG_BK, tap = kt / I2C_CB, cb = kt - tap * I2C_CB;
                    const int rr = tap / I2C_S, ss = tap - rr * I2C_S;
                    wg_tma4_im2col(sa, &tmA, cb * 64, i2c_w, i2c_h, i2c_n, (unsigned short)(ss * I2C_DILW),
                                   (unsigned short)(rr * I2C_DILH), full);
                    wg_tma4(sb, &tmB, cb * 64, I2C_FLIP ? I2C_S - 1 - ss : ss, I2C_FLIP ? I2C_R - 1 - rr : rr, n0, full);
                }
#elif WG_ANY_TMA
                if (t == 0) {
                    wg_bar_expect_tx(full, WG_TMA_BYTES);
#if A_TMA && WG_A_MN
                    wg_tma3(sa, &tmA, m0, k0, WG_A_BATCH(b), full);
                    wg_tma3(sa + 8192, &tmA, m0 + 64, k0, WG_A_BATCH(b), full);
#elif A_TMA
                    wg_tma3(sa, &tmA, k0, m0, WG_A_BATCH(b), full);
#endif
#if B_TMA && WG_B_MN && defined(B_TAP_K)
                    // backward data weights: k = tap * K + output channel; one (C, K, tap)
                    // box per 64 n (flipped taps for CONVOLUTION mode)
                    {
                        const int tap = k0 / B_TAP_K, kc = k0 - tap * B_TAP_K;
                        const int tc = B_TAP_FLIP ? B_TAP_FLIP - tap : tap;
#pragma unroll
                        for (int j = 0; j < WG_BN / 64; ++j) wg_tma3(sb + 8192 * j, &tmB, n0 + 64 * j, kc, tc, full);
                    }
#elif B_TMA && WG_B_MN && WG_PAIR
                    // paired B: the tile's first WG_BN / 2 columns from tmB, the rest from tmB2,
                    // both at column n0 / 2 (64-wide atoms)
#pragma unroll
                    for (int j = 0; j < WG_BN / 128; ++j) {
                        wg_tma3(sb + 8192 * j, &tmB, n0 / 2 + 64 * j, k0, WG_B_BATCH(b), full);
                        wg_tma3(sb + 8192 * (j + WG_BN / 128), &tmB2, n0 / 2 + 64 * j, k0, WG_B_BATCH(b), full);
                    }
#elif B_TMA && WG_PAIR
                    // paired B, K-major: WG_BN / 2 rows (boxes of that many rows) from each map
                    wg_tma3(sb, &tmB, k0, n0 / 2, WG_B_BATCH(b), full);
                    wg_tma3(sb + (WG_BN / 2) * 128, &tmB2, k0, n0 / 2, WG_B_BATCH(b), full);
#elif B_TMA && WG_B_MN
#pragma unroll
                    for (int j = 0; j < WG_BN / 64; ++j) wg_tma3(sb + 8192 * j, &tmB, n0 + 64 * j, k0, WG_B_BATCH(b), full);
#elif B_TMA
                    wg_tma3(sb, &tmB, k0, n0, WG_B_BATCH(b), full);
#endif
                }
#endif
#if !A_TMA
#if A_MODE == 1 && A_ROWS
                wg_gather_rows(sa, reinterpret_cast<const char*>(A), rows, k0, ke, t);
#elif A_MODE == 1
                wg_gather_k<1, WG_BM>(sa, reinterpret_cast<const char*>(A), b, m0, k0, ke, t);
#elif A_MODE == 2
                wg_gather_mn<1, WG_BM>(sa, reinterpret_cast<const char*>(A), b, m0, k0, ke, t);
#else
                wg_gather_e<1, WG_BM>(reinterpret_cast<char*>(gbase + st * WG_STAGE_BYTES), A, b, m0, k0, ke, t);
#endif
#endif
#if !B_TMA
#if B_MODE == 1
                wg_gather_k<0, WG_BN>(sb, reinterpret_cast<const char*>(B), b, n0, k0, ke, t);
#elif B_MODE == 2
                wg_gather_mn<0, WG_BN>(sb, reinterpret_cast<const char*>(B), b, n0, k0, ke, t);
#else
                wg_gather_e<0, WG_BN>(reinterpret_cast<char*>(gbase + st * WG_STAGE_BYTES + WG_A_BYTES), B, b, n0, k0, ke, t);
#endif
#endif
#if WG_ANY_GATHER
#if WG_ANY_SCALAR
#if WG_ANY_CPASYNC
                asm volatile("cp.async.wait_all;" ::: "memory");
#endif
                wg_fence_async();
                wg_bar_arrive(full);
#else
                wg_cp_async_arrive(full);
#endif
#endif
            }
        }
#if WG_ANY_CPASYNC
        asm volatile("cp.async.wait_all;" ::: "memory");
#endif
    } else {
        // ------------------------------------------------------------------ consumers
        asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" :: "n"(WG_CONS_REGS));
        const int wgc = wg - 1, tw = tid - 128 * wg, w4 = tw >> 5, lane = tw & 31;
        wg_acc_t* stg = reinterpret_cast<wg_acc_t*>(epi) + (wgc * 4 + w4) * (16 * WG_EPI_LD);
        wg_acc_t acc[WG_BN / 2];
        int it = 0;
        const int nunits = WG_NUNITS;
#if WG_STATS
        float* sst = reinterpret_cast<float*>(gbase + WG_STAGES * WG_STAGE_BYTES + WG_EPI_BYTES + 16 * WG_STAGES) +
                     wgc * 2 * WG_BN;
        for (int i = tw; i < 2 * WG_BN; i += 128) sst[i] = 0.f;
        wg_cons_sync(wgc);
        int st_n0 = -1;         // the tile columns the shared sums hold (-1: none yet)
#endif
#pragma unroll 1
        for (int u = blockIdx.x; u < nunits; u += gridDim.x) {
            int b, m0, n0, kb, ke;
            WG_UNIT(u, b, m0, n0, kb, ke);
#if WG_STATS
            if (n0 != st_n0) {
                if (st_n0 >= 0) wg_st_flush(hdn_st, sst, st_n0, tw, wgc);
                st_n0 = n0;
            }
#endif
#if defined(WG_SCHED_GROUPED)
            // grouped schedule: an empty group's unit has no k tile (zeros out)
            const int nk = (ke - kb + WG_BK - 1) / WG_BK;
            if (nk <= 0) {
#pragma unroll
                for (int i = 0; i < WG_BN / 2; ++i) acc[i] = 0;
            }
#else
            // every unit has >= 1 k tile (GK >= 1; split parts are whole k tiles and the last
            // one starts below GK): saying so lets ptxas keep the wgmma pipeline unserialised
            // (C7514 otherwise: the epilogue could read accumulators with no wgmma wait)
            const int nk = max(1, (ke - kb + WG_BK - 1) / WG_BK);
#endif
            int prev = 0;
#pragma unroll 1
            for (int kt = 0; kt < nk; ++kt, ++it) {
                const int st = it % WG_STAGES;
                const unsigned ph = (unsigned)(it / WG_STAGES) & 1u;
                const unsigned sa = sbase + st * WG_STAGE_BYTES, sb = sa + WG_A_BYTES;
                wg_bar_wait(bars + 8 * st, ph);
#if WG_ANY_GATHER
                wg_fence_async();
#endif
                hdn_wgmma_fence();
#pragma unroll
                for (int kk = 0; kk < 4; ++kk) {     // 4 x 32 bytes of k: k16 (16-bit) / k8 (tf32) / k32 (fp8)
#if WG_A_MN
                    const unsigned long long da = wg_desc(sa + wgc * 8192 + kk * 2048, WG_MN_LBO, WG_MN_SBO);
#else
                    const unsigned long long da = wg_desc(sa + wgc * 8192 + kk * 32, 16, 1024);
#endif
#if WG_B_MN
                    const unsigned long long db = wg_desc(sb + kk * 2048, WG_MN_LBO, WG_MN_SBO);
#else
                    const unsigned long long db = wg_desc(sb + kk * 32, 16, 1024);
#endif
                    wg_mma(acc, da, db, (kt | kk) != 0);
                }
                hdn_wgmma_commit();
                if (kt > 0) {
                    hdn_wgmma_wait<1>();
                    wg_bar_arrive(bars + 8 * (WG_STAGES + prev));
                }
                prev = st;
            }
            hdn_wgmma_wait<0>();
            wg_bar_arrive(bars + 8 * (WG_STAGES + prev));
#pragma unroll
#if WG_S8
            for (int i = 0; i < WG_BN / 2; ++i) asm volatile("" : "+r"(acc[i]) :: "memory");
#else
            for (int i = 0; i < WG_BN / 2; ++i) asm volatile("" : "+f"(acc[i]) :: "memory");
#endif
            const int g = lane >> 2, t4 = lane & 3;
#if WG_PAIR
            // paired epilogue: column c of the tile's first half (tmB) and column c + WG_BN / 2
            // (tmB2) are one thread's accumulators j and j + WG_BN / 16 (m64nNk16 layout: rows
            // g, g + 8, columns 8 j + 2 t4, + 1) -> pair_v, the fused run, into the first half
#pragma unroll
            for (int j = 0; j < WG_BN / 16; ++j) {
#pragma unroll
                for (int r = 0; r < 4; ++r) {
                    const int pm = m0 + wgc * 64 + w4 * 16 + g + (r >= 2 ? 8 : 0);
                    const int pn = n0 / 2 + j * 8 + t4 * 2 + (r & 1);
                    if (pm < GM && pn < WG_ON)
                        acc[j * 4 + r] = pair_v(HDN_EPI_ARGS, b, pm, pn, acc[j * 4 + r], acc[(j + WG_BN / 16) * 4 + r]);
                }
            }
#endif
#if WG_TMA_STORE
            // ---- epilogue: fused ops in registers -> 16-bit half tile in shared memory (64 x 64
            // boxes, 128-byte swizzle: 16-byte chunk c of row r at c ^ (r & 7)) -> TMA store
            {
                const unsigned sc = sbase + WG_STAGES * WG_STAGE_BYTES + wgc * WG_CS_HALF;
                if (tw == 0) wg_bulk_wait_read0();      // the previous unit's store has read it
                wg_cons_sync(wgc);
                const int r0 = w4 * 16 + g;             // row in the half tile (and r0 + 8)
                const int mr = m0 + wgc * 64 + r0;
#pragma unroll
                for (int j = 0; j < WG_BN / 8; ++j) {
                    const int n = n0 + j * 8 + t4 * 2;
#if WG_STATS
                    float ss0 = 0.f, sq0 = 0.f, ss1 = 0.f, sq1 = 0.f;
#endif
#pragma unroll
                    for (int h = 0; h < 2; ++h) {
                        // GN is even (16-byte output rows): n < GN covers n + 1; past the end the
                        // fused inputs are not read (the tensor map clips those elements anyway)
                        const bool in = mr + 8 * h < GM && n < GN;
                        const float v0 = in ? epi_v(HDN_EPI_ARGS, b, mr + 8 * h, n, acc[j * 4 + 2 * h]) : 0.f;
                        const float v1 = in ? epi_v(HDN_EPI_ARGS, b, mr + 8 * h, n + 1, acc[j * 4 + 2 * h + 1]) : 0.f;
                        const unsigned pk = (unsigned)hdn_bits(hdn_from_float<TC>(v0)) |
                                            ((unsigned)hdn_bits(hdn_from_float<TC>(v1)) << 16);
                        wg_st_shared32(sc + wg_cs_off(r0 + 8 * h, j, t4), pk);
#if WG_STATS
                        const float r0v = wg_st_round(v0), r1v = wg_st_round(v1);
                        ss0 += r0v; sq0 = fmaf(r0v, r0v, sq0);
                        ss1 += r1v; sq1 = fmaf(r1v, r1v, sq1);
#endif
                    }
#if WG_STATS
                    wg_st_add(sst, lane, n - n0, ss0, sq0);
                    wg_st_add(sst, lane, n - n0 + 1, ss1, sq1);
#endif
                }
                wg_fence_async();                       // generic-proxy writes -> the copy engine
                wg_cons_sync(wgc);
                if (tw == 0) {
                    if (m0 + wgc * 64 < GM) {
#pragma unroll
                        for (int jb = 0; jb < WG_BN / 64; ++jb)
                            if (n0 + 64 * jb < GN) wg_tma_store3(&tmC, sc + jb * 8192, n0 + 64 * jb, m0 + wgc * 64, b);
                    }
                    wg_bulk_commit();
                }
            }
#else
            // ---- epilogue: 16 rows x 32 columns per warp at a time through shared memory
            const int mrow = m0 + wgc * 64 + w4 * 16;
            const int n0e = WG_PAIR ? n0 / 2 : n0;
#pragma unroll
            for (int c32 = 0; c32 < WG_EPI_BN / 32; ++c32) {
                if (n0e + c32 * 32 >= WG_ON) break;
#if WG_STATS
                float ss[8], sq[8];
#pragma unroll
                for (int j = 0; j < 8; ++j) ss[j] = sq[j] = 0.f;
#endif
#pragma unroll
                for (int j = 0; j < 4; ++j)
#pragma unroll
                    for (int r = 0; r < 4; ++r)
                        stg[(g + (r >= 2 ? 8 : 0)) * WG_EPI_LD + j * 8 + t4 * 2 + (r & 1)] = acc[(c32 * 4 + j) * 4 + r];
                __syncwarp();
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int grp = lane + 32 * h, row = grp >> 2, c8 = (grp & 3) * 8;
                    const int gm = mrow + row, gn = n0e + c32 * 32 + c8;
                    const wg_acc4_t q0 = *reinterpret_cast<const wg_acc4_t*>(&stg[row * WG_EPI_LD + c8]);
                    const wg_acc4_t q1 = *reinterpret_cast<const wg_acc4_t*>(&stg[row * WG_EPI_LD + c8 + 4]);
                    const wg_acc_t v[8] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w};
#if WG_STATS
#pragma unroll
                    for (int j = 0; j < 8; ++j) {
                        const float rv = gm < GM && gn + j < GN ? wg_st_round(v[j]) : 0.f;
                        ss[j] += rv; sq[j] = fmaf(rv, rv, sq[j]);
                    }
#endif
                    if (gm < GM && gn < WG_ON) {
#if GSPLIT > 1
                        const int s = u % GSPLIT;
                        wg_acc_t* p = HDN_PART + (((long long)b * GSPLIT + s) * GM + gm) * GN + gn;
                        if ((GN % 4) == 0 && gn + 8 <= GN) {
                            *reinterpret_cast<wg_acc4_t*>(p) = q0;
                            *reinterpret_cast<wg_acc4_t*>(p + 4) = q1;
                        } else {
#pragma unroll
                            for (int j = 0; j < 8; ++j) if (gn + j < GN) p[j] = v[j];
                        }
#elif C_VEC
                        store_c8(HDN_EPI_ARGS, b, gm, gn, v);
#else
#pragma unroll
                        for (int j = 0; j < 8; ++j) if (gn + j < WG_ON) store_c(HDN_EPI_ARGS, b, gm, gn + j, v[j]);
#endif
                    }
                }
#if WG_STATS
#pragma unroll
                for (int j = 0; j < 8; ++j) wg_st_add(sst, lane, c32 * 32 + (lane & 3) * 8 + j, ss[j], sq[j]);
#endif
                __syncwarp();
            }
#if GSPLIT > 1 && WG_FIXUP
            wg_fixup(HDN_PART, HDN_CNT, HDN_EPI_ARGS, u, b, m0, n0, tid - 128);
#endif
#endif
        }
#if WG_TMA_STORE
        if (tw == 0) wg_bulk_wait0();                   // every store written before the CTA ends
#endif
#if WG_STATS
        if (st_n0 >= 0) wg_st_flush(hdn_st, sst, st_n0, tw, wgc);
#endif
    }
}
#else
// not an sm_90a compile: the symbol exists, the plan builder never launches it
extern "C" __global__ void hdn_gemm_wgmma() {}
#endif
