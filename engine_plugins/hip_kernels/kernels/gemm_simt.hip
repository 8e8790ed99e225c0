// gemm_simt.hip - tiled GEMM on the plain FMA units (any float type, float32 accumulation).
//   C[b, m, n] = epilogue(sum_k A[b, m, k] * B[b, k, n])
// The plan builder prepends a generated prelude: storage types TA/TB, sizes GM/GN/GK/GBATCH,
// the operand loaders load_a/load_b (matmul strides, or the implicit-GEMM gather of a
// convolution), and store_c (the output write, with any fused epilogue).  Every size is a
// compile-time constant, so index arithmetic folds.  Tile 128x128x8 (or 128x64x8: SIMT_BN), 256
// threads, 8x8 (8x4) results per thread, register-staged double buffering (one barrier per k step).  Split-K (GSPLIT > 1)
// as in gemm_mma.hip: fp32 partials to HDN_PART, summed by gemm_splitk.hip.
#ifndef HDN_GENERATED
#include "hdn_compat.h"
typedef float TA;
typedef float TB;
#define GM 256
#define GN 256
#define GK 256
#define GBATCH 1
#define A_K_CONTIG 1
#define B_K_CONTIG 0
#define HDN_EPI_PARAMS float* __restrict__ C
#define HDN_EPI_ARGS C
__device__ __forceinline__ float load_a(const TA* __restrict__ A, int b, int m, int k) { return hdn_to_float(A[(long long)b * GM * GK + (long long)m * GK + k]); }
__device__ __forceinline__ float load_b(const TB* __restrict__ B, int b, int k, int n) { return hdn_to_float(B[(long long)b * GK * GN + (long long)k * GN + n]); }
__device__ __forceinline__ void store_c(HDN_EPI_PARAMS, int b, int m, int n, float v) { C[(long long)b * GM * GN + (long long)m * GN + n] = v; }
#endif
#ifndef GSPLIT
#define GSPLIT 1
#define GKSPLIT GK
#endif

#ifndef A_ROWS
#define A_ROWS 0
#endif
#ifndef SIMT_VEC
#define SIMT_VEC 0         // 1: fp32 operands, A_MODE / B_MODE != 0 may load 16-byte vectors
#endif
#ifndef A_MODE
#define A_MODE 0
#endif
#ifndef B_MODE
#define B_MODE 0
#endif
#ifndef SIMT_BN
#define SIMT_BN 128        // tile N: 128 (8 x 8 per thread) or 64 (8 x 4; small N / wave quantisation)
#endif
#define SBM 128
#define SBN SIMT_BN
#define SBK 8
#define SNJ (SBN / 16)     // columns per thread
#define SNB (SBN / 32)     // B elements per thread per k step

extern "C" __global__ void __launch_bounds__(256)
#if GSPLIT > 1
hdn_gemm_simt(const TA* __restrict__ A, const TB* __restrict__ B, float* __restrict__ HDN_PART)
#else
hdn_gemm_simt(const TA* __restrict__ A, const TB* __restrict__ B, HDN_EPI_PARAMS)
#endif
{
    __shared__ __align__(16) float As[2][SBK][SBM + 4];
    __shared__ __align__(16) float Bs[2][SBK][SBN + 4];
    const int tid = threadIdx.x;
    const int b = blockIdx.z / GSPLIT;
    const int kbeg = (blockIdx.z % GSPLIT) * GKSPLIT;
    const int kend = kbeg + GKSPLIT < GK ? kbeg + GKSPLIT : GK;
    const int m0 = blockIdx.y * SBM, n0 = blockIdx.x * SBN;
#ifdef HDN_TILE_ACTIVE   // optional data-dependent tile skip (MoE groups: moe.py)
    if (!HDN_TILE_ACTIVE(b, m0)) return;
#endif
    float ra[4], rb[SNB];
#if A_ROWS
    // implicit-GEMM A with precomputed addressing (implicit.py): this thread's 4 rows once,
    // one filter-tap decode per k step, then an add and a bounds check per element
    wg_arow rows[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#if A_K_CONTIG
        rows[i] = a_row(b, m0 + tid / 8 + 32 * i);
#else
        rows[i] = a_row(b, m0 + tid % 32 + 32 * i);
#endif
    }
#endif

#if SIMT_VEC && A_MODE != 0 && !A_ROWS
#define SIMT_VA 1          // A in 16-byte vectors (4 floats along k: A_MODE 1, along m: 2)
#else
#define SIMT_VA 0
#endif
#if SIMT_VEC && B_MODE != 0
#define SIMT_VB 1
#else
#define SIMT_VB 0
#endif
    float4 va, vb;
    auto gload = [&](int k0) {
#if SIMT_VA
        {
#if A_MODE == 1
            const int gm = m0 + tid / 2, gk = k0 + (tid & 1) * 4;
#else
            const int gk = k0 + tid / 32, gm = m0 + (tid & 31) * 4;
#endif
            va = make_float4(0.f, 0.f, 0.f, 0.f);
            // a 4-vector shares its spatial position: padding (offset -1) covers all of it
            const long long o = (gm < GM && gk < GK) ? a_off(b, gm, gk) : -1;
            if (o >= 0) va = *reinterpret_cast<const float4*>(A + o);
        }
#endif
#if SIMT_VB
        {
#if B_MODE == 1
            const int gn = n0 + tid / 2, gk = k0 + (tid & 1) * 4;
#elif SBN == 128
            const int gk = k0 + tid / 32, gn = n0 + (tid & 31) * 4;
#else
            const int gk = k0 + (tid & 127) / 16, gn = n0 + (tid & 15) * 4;
#endif
            vb = make_float4(0.f, 0.f, 0.f, 0.f);
            const long long o = ((SBN == 128 || tid < 128) && gn < GN && gk < GK) ? b_off(b, gk, gn) : -1;
            if (o >= 0) vb = *reinterpret_cast<const float4*>(B + o);
        }
#endif
#if A_ROWS
        {
#if A_K_CONTIG
            const int gk = k0 + tid % 8;
#else
            const int gk = k0 + tid / 32;
#endif
            const wg_atap tp = a_tap(gk < GK ? gk : 0);
#pragma unroll
            for (int i = 0; i < 4; ++i)
                ra[i] = (gk < GK && a_in(rows[i], tp)) ? hdn_to_float(A[(long long)rows[i].base + tp.off]) : 0.f;
        }
#endif
#if !A_ROWS && !SIMT_VA
#pragma unroll
        for (int i = 0; i < 4; ++i) {
#if A_K_CONTIG
            const int m = tid / 8 + 32 * i, k = tid % 8;
#else
            const int k = tid / 32, m = tid % 32 + 32 * i;
#endif
            const int gm = m0 + m, gk = k0 + k;
            ra[i] = (gm < GM && gk < GK) ? load_a(A, b, gm, gk) : 0.f;
        }
#endif
#if !SIMT_VB
#pragma unroll
        for (int i = 0; i < SNB; ++i) {
#if B_K_CONTIG
            const int n = tid / 8 + 32 * i, kb = tid % 8;
#else
            const int kb = tid / 32, n = tid % 32 + 32 * i;
#endif
            const int gn = n0 + n, gkb = k0 + kb;
            rb[i] = (gn < GN && gkb < GK) ? load_b(B, b, gkb, gn) : 0.f;
        }
#endif
    };
    auto sstore = [&](int buf) {
#if SIMT_VA && A_MODE == 1
        {
            const int m = tid / 2, k = (tid & 1) * 4;
            As[buf][k][m] = va.x; As[buf][k + 1][m] = va.y; As[buf][k + 2][m] = va.z; As[buf][k + 3][m] = va.w;
        }
#elif SIMT_VA
        *reinterpret_cast<float4*>(&As[buf][tid / 32][(tid & 31) * 4]) = va;
#else
#pragma unroll
        for (int i = 0; i < 4; ++i) {
#if A_K_CONTIG
            As[buf][tid % 8][tid / 8 + 32 * i] = ra[i];
#else
            As[buf][tid / 32][tid % 32 + 32 * i] = ra[i];
#endif
        }
#endif
#if SIMT_VB && B_MODE == 1
        {
            const int n = tid / 2, k = (tid & 1) * 4;
            if (SBN == 128 || tid < 128) {
                Bs[buf][k][n] = vb.x; Bs[buf][k + 1][n] = vb.y; Bs[buf][k + 2][n] = vb.z; Bs[buf][k + 3][n] = vb.w;
            }
        }
#elif SIMT_VB && SBN == 128
        *reinterpret_cast<float4*>(&Bs[buf][tid / 32][(tid & 31) * 4]) = vb;
#elif SIMT_VB
        if (tid < 128) *reinterpret_cast<float4*>(&Bs[buf][tid / 16][(tid & 15) * 4]) = vb;
#else
#pragma unroll
        for (int i = 0; i < SNB; ++i) {
#if B_K_CONTIG
            Bs[buf][tid % 8][tid / 8 + 32 * i] = rb[i];
#else
            Bs[buf][tid / 32][tid % 32 + 32 * i] = rb[i];
#endif
        }
#endif
    };

    const int ty = tid / 16, tx = tid % 16;
    float acc[8][SNJ];
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < SNJ; ++j) acc[i][j] = 0.f;

    gload(kbeg);
    sstore(0);
    __syncthreads();
    int buf = 0;
#if HDN_HIP
#pragma unroll 1   // AMD: a short constant k range unrolled whole spills registers (gfx90a)
#endif
    for (int k0 = kbeg; k0 < kend; k0 += SBK) {
        const bool more = k0 + SBK < kend;
        if (more) gload(k0 + SBK);
#pragma unroll
        for (int kk = 0; kk < SBK; ++kk) {
            const float4 a0 = *reinterpret_cast<const float4*>(&As[buf][kk][ty * 4]);
            const float4 a1 = *reinterpret_cast<const float4*>(&As[buf][kk][64 + ty * 4]);
            const float4 b0 = *reinterpret_cast<const float4*>(&Bs[buf][kk][tx * 4]);
            const float av[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
#if SBN == 128
            const float4 b1 = *reinterpret_cast<const float4*>(&Bs[buf][kk][64 + tx * 4]);
            const float bv[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#else
            const float bv[4] = {b0.x, b0.y, b0.z, b0.w};
#endif
#pragma unroll
            for (int i = 0; i < 8; ++i)
#pragma unroll
                for (int j = 0; j < SNJ; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
        }
        if (more) sstore(buf ^ 1);
        __syncthreads();
        buf ^= 1;
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int gm = m0 + (i < 4 ? ty * 4 + i : 64 + ty * 4 + i - 4);
        if (gm >= GM) continue;
#pragma unroll
        for (int j = 0; j < SNJ; ++j) {
            const int gn = n0 + (j < 4 ? tx * 4 + j : 64 + tx * 4 + j - 4);
#if GSPLIT > 1
            if (gn < GN) HDN_PART[((long long)blockIdx.z * GM + gm) * GN + gn] = acc[i][j];
#else
            if (gn < GN) store_c(HDN_EPI_ARGS, b, gm, gn, acc[i][j]);
#endif
        }
    }
}
