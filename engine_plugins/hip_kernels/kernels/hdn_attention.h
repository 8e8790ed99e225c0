// hdn_attention.h - what flash-attention forward and backward share: the per-batch sequence
// lengths (padding mask), the diagonal limits of the causal / band masks (element (i, j) takes
// part when i < sq, j < skv and llim <= j - i <= rlim), the attention scale and the dropout
// keep factor.  Configured by the generated prelude (attention.py); semantics as the CPU
// reference (engine_plugins/cpu_reference/kernels/sdpa.py).
#pragma once
#include "hdn_mma.h"
#include "hdn_philox.h"

#define HDN_BIG (1 << 30)
#define HDN_LOG2E 1.4426950408889634f
#define HDN_LN2 0.6931471805599453f
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
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
