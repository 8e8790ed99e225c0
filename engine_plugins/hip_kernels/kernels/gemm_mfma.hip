// gemm_mfma.hip - the AMD CDNA (gfx90a / gfx942) 16-bit GEMM core behind the same interface as
// the NVIDIA kernels: the same generated prelude (sizes, a_off / b_off gathers through
// load_a_raw / load_b_raw, store_c with any fused epilogue, GSPLIT split-K partials finished by
// gemm_splitk.hip), compiled with hiprtc.  Compiled offline for gfx90a / gfx942 by
// `make check-amd` (tools/check_amd.py), NEVER RUN (no AMD GPU in this project's CI): kept
// deliberately small - a 128 x 128 x 32 tile per 256-thread block (4 wave64s, 64 x 64 each =
// 2 x 2 v_mfma_f32_32x32x8 f16 / bf16_1k), operands gathered element by element into LDS, no
// pipelining.  Operand layout of the 32x32x8 MFMA (wave64): lane l holds
// A[l % 32][4 (l / 32) + 0..3] and B[4 (l / 32) + 0..3][l % 32]; accumulator register r of lane l
// is C[8 (r / 4) + 4 (l / 32) + r % 4][l % 32].
// Grid (ceil(GN / 128), ceil(GM / 128), GBATCH * GSPLIT), block 256.
#ifndef HDN_GENERATED
#include "hdn_compat.h"
typedef hdn_half TA;
typedef hdn_half TB;
#define GM 256
#define GN 256
#define GK 256
#define GBATCH 1
#define HDN_EPI_PARAMS float* __restrict__ C
#define HDN_EPI_ARGS C
__device__ __forceinline__ hdn_u16 load_a_raw(const TA* __restrict__ A, int b, int m, int k) { return hdn_bits(A[(long long)m * GK + k]); }
__device__ __forceinline__ hdn_u16 load_b_raw(const TB* __restrict__ B, int b, int k, int n) { return hdn_bits(B[(long long)k * GN + n]); }
__device__ __forceinline__ void store_c(HDN_EPI_PARAMS, int b, int m, int n, float v) { C[(long long)m * GN + n] = v; }
#endif
#ifndef GSPLIT
#define GSPLIT 1
#define GKSPLIT GK
#endif
#ifndef MF_BF16
#define MF_BF16 0
#endif

#if HDN_HIP && (defined(__gfx90a__) || defined(__gfx940__) || defined(__gfx941__) || defined(__gfx942__))
#define MF_BM 128
#define MF_BN 128
#define MF_BK 32
#define MF_LD (MF_BK + 4)    // LDS row pitch in 16-bit elements (8-byte aligned 4-element reads)
typedef _Float16 mf_h4 __attribute__((ext_vector_type(4)));
typedef short mf_s4 __attribute__((ext_vector_type(4)));
typedef float mf_f16 __attribute__((ext_vector_type(16)));

__device__ __forceinline__ mf_f16 mf_mma(const hdn_u16* a, const hdn_u16* b, mf_f16 c) {
#if MF_BF16
    return __builtin_amdgcn_mfma_f32_32x32x8bf16_1k(*reinterpret_cast<const mf_s4*>(a),
                                                    *reinterpret_cast<const mf_s4*>(b), c, 0, 0, 0);
#else
    return __builtin_amdgcn_mfma_f32_32x32x8f16(*reinterpret_cast<const mf_h4*>(a),
                                                *reinterpret_cast<const mf_h4*>(b), c, 0, 0, 0);
#endif
}

extern "C" __global__ void __launch_bounds__(256)
hdn_gemm_mfma(const TA* __restrict__ A, const TB* __restrict__ B,
#if GSPLIT > 1
              float* __restrict__ HDN_PART)
#else
              HDN_EPI_PARAMS)
#endif
{
    __shared__ __align__(16) hdn_u16 sA[MF_BM * MF_LD];   // [m][k]
    __shared__ __align__(16) hdn_u16 sB[MF_BN * MF_LD];   // [n][k]
    const int tid = threadIdx.x, lane = tid & 63, wv = tid >> 6;
    const int wm = (wv >> 1) * 64, wn = (wv & 1) * 64;
    const int n0 = blockIdx.x * MF_BN, m0 = blockIdx.y * MF_BM;
    const int b = blockIdx.z / GSPLIT, s = blockIdx.z % GSPLIT;
    const int kb = s * GKSPLIT, ke = kb + GKSPLIT < GK ? kb + GKSPLIT : GK;
#ifdef HDN_TILE_ACTIVE   // optional data-dependent tile skip (MoE groups: moe.py)
    if (!HDN_TILE_ACTIVE(b, m0)) return;
#endif
    mf_f16 acc[2][2];
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j)
#pragma unroll
            for (int r = 0; r < 16; ++r) acc[i][j][r] = 0.f;
    for (int k0 = kb; k0 < ke; k0 += MF_BK) {
        for (int e = tid; e < MF_BM * MF_BK; e += 256) {
            const int r = e / MF_BK, kk = e % MF_BK, gk = k0 + kk;
            const int gm = m0 + r, gn = n0 + r;
            sA[r * MF_LD + kk] = (gm < GM && gk < ke) ? load_a_raw(A, b, gm, gk) : (hdn_u16)0;
            sB[r * MF_LD + kk] = (gn < GN && gk < ke) ? load_b_raw(B, b, gk, gn) : (hdn_u16)0;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < MF_BK; kk += 8) {
            const int kq = kk + (lane >> 5) * 4;
#pragma unroll
            for (int i = 0; i < 2; ++i)
#pragma unroll
                for (int j = 0; j < 2; ++j)
                    acc[i][j] = mf_mma(&sA[(wm + 32 * i + (lane & 31)) * MF_LD + kq],
                                       &sB[(wn + 32 * j + (lane & 31)) * MF_LD + kq], acc[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j)
#pragma unroll
            for (int r = 0; r < 16; ++r) {
                const int gm = m0 + wm + 32 * i + 8 * (r >> 2) + 4 * (lane >> 5) + (r & 3);
                const int gn = n0 + wn + 32 * j + (lane & 31);
                if (gm < GM && gn < GN) {
#if GSPLIT > 1
                    HDN_PART[(((long long)b * GSPLIT + s) * GM + gm) * GN + gn] = acc[i][j][r];
#else
                    store_c(HDN_EPI_ARGS, b, gm, gn, acc[i][j][r]);
#endif
                }
            }
}
#else
// not a CDNA compile: the symbol exists, the plan builder never launches it
extern "C" __global__ void hdn_gemm_mfma() {}
#endif
