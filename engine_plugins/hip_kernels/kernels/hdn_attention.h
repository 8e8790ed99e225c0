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
#if HDN_CUDA
// the keys [lo, hi) any of the query rows [q0, q0 + rows) sees (hi <= lo: none)
__device__ __forceinline__ HdnAttnSpan hdn_attn_block_keys(const HdnAttnLim& L, int q0, int rows) {
    const int ihi = hdn_imin(q0 + rows, L.sq) - 1;
    HdnAttnSpan k;
    k.lo = L.llim > -HDN_BIG ? hdn_imax(0, q0 + L.llim) : 0;
    k.hi = L.skv;
    if (L.rlim < HDN_BIG) k.hi = hdn_imin(k.hi, ihi + L.rlim + 1);
    if (ihi < q0) k.hi = k.lo;
    return k;
}
// The key an fp8 P fragment position holds: in a 32-key step, byte i (0..3) of the A register
// of the thread with t4 = t sits at k = 16 h + 4 t + i (h = 0: registers 0 / 1, h = 1: 2 / 3)
// and carries the accumulator column 16 h + 8 (i >> 1) + 2 t + (i & 1) of its row
__device__ __forceinline__ int hdn_attn_f8_key(int k) {
    const int c = k & ~31, h = (k >> 4) & 1, t = (k >> 2) & 3, i = k & 3;
    return c + 16 * h + 8 * (i >> 1) + 2 * t + (i & 1);
}
// max over the warp of a non-negative v, then one atomicMax on the float bits at p
__device__ __forceinline__ void hdn_attn_amax(float* p, float v, int lane) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    if (lane == 0) atomicMax(reinterpret_cast<unsigned*>(p), __float_as_uint(v));
}
#endif

// ---------------------------------------------------------------- score modifiers and outputs
// Configured by the generated prelude (ops/sdpa.py); all off by default.  The score of query row
// i, key j of head h, batch b on the exp2 scale: (q·k scale + mask + alibi) log2 e, -inf where a
// boolean / block mask drops it (cpu_reference/kernels/sdpa.py _scores):
//   ATT_MASK 1: additive attn_mask of element type ATT_MASK_T; 2: boolean (one byte, nonzero
//               keeps); element strides AM_SB / AM_SH / AM_SI / AM_SJ (0 along broadcast dims);
//   ATT_ALIBI:  + slope_h (j - i), the slopes HDN_ALIBI_SLOPES (one per query head);
//   ATT_BLOCK:  UINT8 block mask, bit (j / 128) % 8 of byte (j / 128) / 8 in row tile i / 128
//               (strides BMK_SB / BMK_SH / BMK_SR / BMK_SC), tested per score (ATT_BLKSKIP below
//               skips the key tiles it drops whole);
//   ATT_SINK:   one logit per query head (att_sink: ATT_SINK_T, stride SINK_SH) joins each unpadded
//               row's softmax as a key without a value: the running max / sum start at (sink, 1);
//   HAS_MAX / HAS_SUMEXP: the row max (natural scale) and the sum of exp(s - max) as FLOAT /
//               HALF / BFLOAT16 / DOUBLE outputs (strides MXSB.. / SESB..); rows without keys:
//               -inf / 0.
// Kernel parameters: HDN_ATTN_MOD_PARAMS (att_mask, att_blk, att_sink) / HDN_ATTN_MOD_ARGS.
#ifndef ATT_MASK
#define ATT_MASK 0
#endif
#ifndef ATT_ALIBI
#define ATT_ALIBI 0
#endif
#ifndef ATT_BLOCK
#define ATT_BLOCK 0
#endif
#ifndef ATT_SINK
#define ATT_SINK 0
#endif
#ifndef HAS_MAX
#define HAS_MAX 0
#endif
#ifndef HAS_SUMEXP
#define HAS_SUMEXP 0
#endif
#ifndef ATT_DBIAS
#define ATT_DBIAS 0      // backward: dS summed into att_dbias (fp32, strides DBW_*) for dbias
#endif
#ifndef HAS_RNG_DUMP
#define HAS_RNG_DUMP 0   // forward: hdn_attn_rng_dump writes the dropout keep mask
#endif
#ifndef HDN_ATTN_MOD_PARAMS
#define HDN_ATTN_MOD_PARAMS
#define HDN_ATTN_MOD_ARGS
#endif
#define HDN_ATTN_MODS (ATT_MASK || ATT_ALIBI || ATT_BLOCK)
#if ATT_ALIBI
__constant__ float hdn_alibi_slopes[HQ] = HDN_ALIBI_SLOPES;
#endif
#if HDN_ATTN_MODS
struct HdnAttnMod {
    const unsigned char* m;    // the mask at (b, h)
    const unsigned char* bk;   // the block mask at (b, h)
    float slope;               // the ALiBi slope times log2 e
};
__device__ __forceinline__ HdnAttnMod hdn_attn_mod_at(int b, int h HDN_ATTN_MOD_PARAMS) {
    HdnAttnMod M;
    M.m = 0;
    M.bk = 0;
    M.slope = 0.f;
#if ATT_MASK == 1
    M.m = reinterpret_cast<const unsigned char*>(
        reinterpret_cast<const ATT_MASK_T*>(att_mask) + (long long)b * AM_SB + (long long)h * AM_SH);
#elif ATT_MASK == 2
    M.m = reinterpret_cast<const unsigned char*>(att_mask) + (long long)b * AM_SB + (long long)h * AM_SH;
#endif
#if ATT_BLOCK
    M.bk = att_blk + (long long)b * BMK_SB + (long long)h * BMK_SH;
#endif
#if ATT_ALIBI
    M.slope = hdn_alibi_slopes[h] * HDN_LOG2E;
#endif
    return M;
}
// v: q·k times scale log2 e of an element inside the tensors (i < SQ, j < SKV)
__device__ __forceinline__ float hdn_attn_mod(const HdnAttnMod& M, float v, int i, int j) {
#if ATT_MASK == 1
    v += hdn_to_float(reinterpret_cast<const ATT_MASK_T*>(M.m)[(long long)i * AM_SI + (long long)j * AM_SJ]) *
         HDN_LOG2E;
#elif ATT_MASK == 2
    if (!M.m[(long long)i * AM_SI + (long long)j * AM_SJ]) v = -INFINITY;
#endif
#if ATT_ALIBI
    v += M.slope * (float)(j - i);
#endif
#if ATT_BLOCK
    if (!((M.bk[(long long)(i >> 7) * BMK_SR + (long long)(j >> 10) * BMK_SC] >> ((j >> 7) & 7)) & 1))
        v = -INFINITY;
#endif
    return v;
}
#define HDN_ATTN_MOD_INIT(b, h) const HdnAttnMod hdn_mod_ = hdn_attn_mod_at(b, h HDN_ATTN_MOD_ARGS)
#define HDN_ATTN_SCORE(v, i, j) hdn_attn_mod(hdn_mod_, v, i, j)
#define HDN_ATTN_MOD_DECL , const HdnAttnMod& hdn_mod_
#define HDN_ATTN_MOD_REF , hdn_mod_
#else
#define HDN_ATTN_MOD_INIT(b, h)
#define HDN_ATTN_SCORE(v, i, j) (v)
#define HDN_ATTN_MOD_DECL
#define HDN_ATTN_MOD_REF
#endif
#ifndef ATT_BLKSKIP
#define ATT_BLKSKIP 0
#endif
#if ATT_BLKSKIP
// Block-mask tile skipping (forward): a key tile whose 128 x 128 block-mask tiles are all zero for
// the kernel's query rows is neither loaded nor multiplied - the kernels walk the live key tiles
// only (hdn_attn_blk_next), which leaves the online softmax as masking every score of the tile
// would (a row no live tile reaches ends without keys: O 0, stats +inf, or with a sink the
// sink's).  Where the kernels' tiles lie inside one block-mask tile (the query and key tiles
// divide 128: both NVIDIA forwards) nothing else is needed; else ATT_BLOCK masks the scores
// of the live tiles element by element too.
#define HDN_ATTN_BLK(b, h) (att_blk + (long long)(b) * BMK_SB + (long long)(h) * BMK_SH)
// key tile [kv0, kv0 + n) of the query rows [q0, q0 + rows) is live: a bit of a block-mask tile
// it overlaps is set (bk: the block mask at (b, h))
__device__ __forceinline__ bool hdn_attn_blk_live(const unsigned char* bk, int q0, int rows, int kv0, int n) {
    const int r1 = hdn_imin(q0 + rows, SQ) - 1, c1 = hdn_imin(kv0 + n, SKV) - 1;
#pragma unroll 1
    for (int r = q0 >> 7; r <= (r1 >> 7); ++r)
#pragma unroll 1
        for (int c = kv0 >> 7; c <= (c1 >> 7); ++c)
            if ((bk[(long long)r * BMK_SR + (long long)(c >> 3) * BMK_SC] >> (c & 7)) & 1) return true;
    return false;
}
// the first live key tile t >= t0 (tiles of bn keys) of the query rows [q0, q0 + rows); t1 when
// none is before t1
__device__ __forceinline__ int hdn_attn_blk_next(const unsigned char* bk, int q0, int rows, int t0, int t1, int bn) {
#pragma unroll 1
    while (t0 < t1 && !hdn_attn_blk_live(bk, q0, rows, t0 * bn, bn)) ++t0;
    return t0;
}
#endif
// One thread's part of a wgmma m64nBN fp32 accumulator tile of scores (s[4 j + e]: row
// r0 + 8 (e >> 1), key kv0 + 8 j + 2 t4 + (e & 1); the warpgroup's rows q0w..q0w + 63):
// s <- the modified score s * sl2 (+ mask, ALiBi: HDN_ATTN_SCORE) where the masks keep it, -inf
// elsewhere (the boundary test only on tiles that cross a mask boundary); mx[r]: the thread's
// max of row r0 + 8 r (not yet reduced over the row's four threads).  HDN_ATTN_MOD_DECL: the
// modifier state of HDN_ATTN_MOD_INIT (hdn_mod_) when the score modifiers are on.
template <int BN>
__device__ __forceinline__ void hdn_attn_wg_mask(float* s, const HdnAttnLim& L, int kv0, int q0w, int r0,
                                                 int t4, float sl2, float* mx HDN_ATTN_MOD_DECL) {
    const bool full = kv0 + BN <= L.skv && q0w + 64 <= L.sq &&
                      (L.rlim >= HDN_BIG || kv0 + BN - 1 - q0w <= L.rlim) &&
                      (L.llim <= -HDN_BIG || kv0 - (q0w + 63) >= L.llim);
    mx[0] = mx[1] = -INFINITY;
    if (full) {
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) {
            s[i] = HDN_ATTN_SCORE(s[i] * sl2, r0 + 8 * ((i >> 1) & 1), kv0 + 8 * (i >> 2) + 2 * t4 + (i & 1));
            mx[(i >> 1) & 1] = fmaxf(mx[(i >> 1) & 1], s[i]);
        }
        return;
    }
    const HdnAttnSpan sp0 = hdn_attn_row(L, r0), sp1 = hdn_attn_row(L, r0 + 8);
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) {
        const int jj = kv0 + 8 * (i >> 2) + 2 * t4 + (i & 1);
        const HdnAttnSpan& sp = ((i >> 1) & 1) ? sp1 : sp0;
        s[i] = (jj >= sp.lo && jj < sp.hi) ? HDN_ATTN_SCORE(s[i] * sl2, r0 + 8 * ((i >> 1) & 1), jj) : -INFINITY;
        mx[(i >> 1) & 1] = fmaxf(mx[(i >> 1) & 1], s[i]);
    }
}
// The dropout keep bits of the same thread's part of an m64nBN tile (bit i: s[i] above, element
// (r0 + 8 ((i >> 1) & 1), kv0 + 8 (i >> 2) + 2 t4 + (i & 1)) of head (b, h): stream output
// doff + row * skv + key, subsequence dsub = b * Hq + h; kept when the word >= thr).  A rolled
// loop: one Philox body, no score registers live (the callers draw before the scores).
template <int BN>
__device__ __forceinline__ unsigned long long hdn_attn_wg_keep_bits(unsigned long long seed,
                                                                    unsigned long long dsub,
                                                                    unsigned long long doff, int r0,
                                                                    int kv0, int t4, unsigned thr, int skv) {
    static_assert(BN <= 128, "64 bits per thread");
    unsigned long long kb = 0;
#pragma unroll 1
    for (int i = 0; i < BN / 2; i += 2) {
        unsigned w0, w1;
        hdn_philox_word2(seed, dsub, doff + (unsigned long long)(r0 + 8 * ((i >> 1) & 1)) * skv +
                                         (unsigned long long)(kv0 + 8 * (i >> 2) + 2 * t4), w0, w1);
        kb |= (unsigned long long)((w0 >= thr ? 1u : 0u) | (w1 >= thr ? 2u : 0u)) << i;
    }
    return kb;
}
#if ATT_SINK
// the sink logit of query head h on the exp2 scale
#define HDN_ATTN_SINK_INIT(h, mrow, lrow)                                                        \
    {                                                                                            \
        const float sk_ = hdn_to_float(att_sink[(long long)(h) * SINK_SH]) * HDN_LOG2E;          \
        mrow[0] = mrow[1] = sk_;                                                                 \
        lrow[0] = lrow[1] = 1.f;                                                                 \
    }
#else
#define HDN_ATTN_SINK_INIT(h, mrow, lrow)
#endif
// a row without keys (or, with a sink, a padded row: i >= sq): O 0, stats +inf
#define HDN_ATTN_EMPTY(L, i, l) (!((l) > 0.f) || (ATT_SINK && (i) >= (L).sq))
// the max / sum_exp outputs of row i (m2: the running max on the exp2 scale, l: the sum), each
// FLOAT, HALF, BFLOAT16 or DOUBLE (the parameters' types; 16-bit: rounded to nearest even)
template <class T> __device__ __forceinline__ void hdn_attn_put(T* p, float v) { *p = hdn_from_float<T>(v); }
__device__ __forceinline__ void hdn_attn_put(double* p, float v) { *p = (double)v; }
template <class MT, class ST>
__device__ __forceinline__ void hdn_attn_row_out(int b, int h, int i, bool emp, float m2, float l,
                                                 MT* mxo, ST* seo) {
#if HAS_MAX
    hdn_attn_put(mxo + (long long)b * MXSB + (long long)h * MXSH + (long long)i * MXSS, emp ? -INFINITY : m2 * HDN_LN2);
#endif
#if HAS_SUMEXP
    hdn_attn_put(seo + (long long)b * SESB + (long long)h * SESH + (long long)i * SESS, emp ? 0.f : l);
#endif
    (void)b; (void)h; (void)i; (void)emp; (void)m2; (void)l; (void)mxo; (void)seo;
}
#if HAS_MAX
#define HDN_ATTN_MXO att_max
#else
#define HDN_ATTN_MXO ((float*)0)
#endif
#if HAS_SUMEXP
#define HDN_ATTN_SEO att_sumexp
#else
#define HDN_ATTN_SEO ((float*)0)
#endif
