// hdn_attention.h - what flash-attention forward and backward share: the head sizes, the
// per-batch sequence lengths (padding mask), the zero-filling tile loader (NVIDIA), the diagonal limits of the causal / band masks (element (i, j) takes
// part when i < sq, j < skv and llim <= j - i <= rlim), the attention scale and the dropout
// keep factor.  Configured by the generated prelude (attention.py); semantics as the CPU
// reference (engine_plugins/cpu_reference/kernels/sdpa.py).
#pragma once
#include "hdn_compat.h"
#if HDN_CUDA
#include "hdn_mma.h"
#endif
#include "hdn_philox.h"

// head sizes: HD (Q / K) and HDV (V / O) as the tensors hold them, HDP / HDVP the tile widths the
// kernels compute with (multiples of 64; the columns past HD / HDV load as zeros and are not
// stored).  Defaults: Dv = D, unpadded.
#ifndef HDV
#define HDV HD
#endif
#ifndef HDP
#define HDP HD
#endif
#ifndef HDVP
#define HDVP HDV
#endif

#define HDN_BIG (1 << 30)
#define HDN_LOG2E 1.4426950408889634f
#define HDN_LN2 0.6931471805599453f
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif

// batch offsets (elements) of the data tensors' rows (<P> = Q K V O G (dO) DQ DK DV L (stats)):
// b times the batch stride, or as generated: offsets[b] * multiplier for a ragged (packed)
// tensor, 0 for a paged K / V pool (the page comes from the page table).  <P>_ROWS: the rows of
// batch b a tile load may read and a store may write - the extent, or for a ragged / paged tensor
// the batch's length (L.sq / L.skv of the HdnAttnLim L in scope)
#ifndef HDN_RAGGED_ROWS
#define HDN_RAGGED_ROWS 0      // 1: some <P>_ROWS reads the lengths (kernels without an L load it)
#endif
#ifndef HDN_RAGGED_OK   // batch b's ragged rows start on 16-byte boundaries (else: NaN outputs)
#define HDN_RAGGED_OK(b) true
#endif
#define HDN_NAN16 0xFFFFu       // a NaN in fp16 and bf16
#ifndef Q_BOFF
#define Q_BOFF(b) ((long long)(b) * QSB)
#endif
#ifndef K_BOFF
#define K_BOFF(b) ((long long)(b) * KSB)
#endif
#ifndef V_BOFF
#define V_BOFF(b) ((long long)(b) * VSB)
#endif
#ifndef O_BOFF
#define O_BOFF(b) ((long long)(b) * OSB)
#endif
#ifndef G_BOFF
#define G_BOFF(b) ((long long)(b) * GSB)
#endif
#ifndef DQ_BOFF
#define DQ_BOFF(b) ((long long)(b) * DQSB)
#endif
#ifndef DK_BOFF
#define DK_BOFF(b) ((long long)(b) * DKSB)
#endif
#ifndef DV_BOFF
#define DV_BOFF(b) ((long long)(b) * DVSB)
#endif
#ifndef L_BOFF
#define L_BOFF(b) ((long long)(b) * LSB)
#endif
#ifndef Q_ROWS
#define Q_ROWS SQ
#endif
#ifndef G_ROWS
#define G_ROWS SQ
#endif
#ifndef O_ROWS
#define O_ROWS SQ
#endif
#ifndef DQ_ROWS
#define DQ_ROWS SQ
#endif
#ifndef L_ROWS
#define L_ROWS SQ
#endif
#ifndef K_ROWS
#define K_ROWS SKV
#endif
#ifndef V_ROWS
#define V_ROWS SKV
#endif
#ifndef DK_ROWS
#define DK_ROWS SKV
#endif
#ifndef DV_ROWS
#define DV_ROWS SKV
#endif

struct HdnAttnLim { int sq, skv, rlim, llim; };

__device__ __forceinline__ int hdn_imin(int a, int b) { return a < b ? a : b; }
__device__ __forceinline__ int hdn_imax(int a, int b) { return a > b ? a : b; }

__device__ __forceinline__ HdnAttnLim hdn_attn_limits(int b HDN_ATTN_LEN_PARAMS) {
    HdnAttnLim L;
    L.sq = SQ;
    L.skv = SKV;
#if PADDING
    L.sq = hdn_imax(0, hdn_imin(SQ, (int)seq_q[(long long)b * SLQ_STRIDE]));
    L.skv = hdn_imax(0, hdn_imin(SKV, (int)seq_kv[(long long)b * SLKV_STRIDE]));
#endif
    const int off = BR_ALIGN ? L.skv - L.sq : 0;
    (void)off;
    int r = HDN_BIG;
#if CAUSAL
    r = 0;
#endif
#if CAUSAL_BR
    r = hdn_imin(r, L.skv - L.sq);
#endif
#if HAS_RB
    r = hdn_imin(r, off + RB);
#endif
    L.rlim = r;
    L.llim = -HDN_BIG;
#if HAS_LB
    L.llim = off - LB + 1;
#endif
    return L;
}
__device__ __forceinline__ bool hdn_attn_ok(const HdnAttnLim& L, int i, int j) {
    return i < L.sq && j < L.skv && j - i <= L.rlim && j - i >= L.llim;
}
// the keys row i sees: lo <= j < hi (hi <= lo: none), for branch-free masks on boundary tiles
struct HdnAttnSpan { int lo, hi; };
__device__ __forceinline__ HdnAttnSpan hdn_attn_row(const HdnAttnLim& L, int i) {
    HdnAttnSpan s;
    s.lo = i + L.llim;
    s.hi = i < L.sq ? hdn_imin(L.skv, i + L.rlim + 1) : s.lo;
    return s;
}
// the query rows key j is seen by: lo <= i < hi
__device__ __forceinline__ HdnAttnSpan hdn_attn_col(const HdnAttnLim& L, int j) {
    HdnAttnSpan s;
    s.lo = j - L.rlim;
    s.hi = j < L.skv ? hdn_imin(L.sq, j - L.llim + 1) : s.lo;
    return s;
}
#if HDN_CUDA
// rows [r0, r0 + ROWS) of a global tile (row stride ss, w columns) into a swizzled shared-memory
// tile of NCH 16-byte chunks per row by cp.async; rows at or past nrows and chunks at or past
// w / 8 fill with zeros (no global read)
template <int ROWS, int NCH, int NT>
__device__ __forceinline__ void hdn_attn_tile(hdn_u16* dst, const hdn_u16* src, long long ss, int r0,
                                              int nrows, int w, int tid) {
    for (int c = tid; c < ROWS * NCH; c += NT) {
        const int r = c / NCH, ch = c % NCH;
        const bool in = r0 + r < nrows && ch < w / 8;
        hdn_cp16(dst + hdn_swz<NCH>(r, ch), src + (long long)(in ? r0 + r : 0) * ss + (in ? ch : 0) * 8, in);
    }
}
// the same from a paged pool of np pages: key row j lives in page tab[(j >> lg) * ts] (pages psb
// elements apart) at row j & (2^lg - 1); rows at or past nrows (the batch's length) are not
// read; a row whose page is not in the pool is not read either and holds NaN (loud, not a fault)
template <int ROWS, int NCH, int NT, typename TI>
__device__ __forceinline__ void hdn_attn_tile_paged(hdn_u16* dst, const hdn_u16* src, long long psb,
                                                    long long ss, const TI* tab, long long ts, int lg,
                                                    long long np, int r0, int nrows, int w, int tid) {
#pragma unroll 1
    for (int c = tid; c < ROWS * NCH; c += NT) {
        const int r = c / NCH, ch = c % NCH;
        const bool in = r0 + r < nrows && ch < w / 8;
        const int j = in ? r0 + r : 0;
        long long pg = in ? (long long)tab[(long long)(j >> lg) * ts] : 0;
        if (pg < 0 || pg >= np) {
            *reinterpret_cast<uint4*>(dst + hdn_swz<NCH>(r, ch)) = make_uint4(~0u, ~0u, ~0u, ~0u);
            continue;
        }
        hdn_cp16(dst + hdn_swz<NCH>(r, ch), src + pg * psb + (long long)(j & ((1 << lg) - 1)) * ss + (in ? ch : 0) * 8, in);
    }
}
#endif
// exp2 on the special-function unit (flush-to-zero; exp2(-inf) = 0)
__device__ __forceinline__ float hdn_exp2(float x) {
#if HDN_CUDA
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
#else
    return exp2f(x);
#endif
}
