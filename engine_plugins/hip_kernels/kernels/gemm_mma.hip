// gemm_mma.hip - tiled GEMM for 16-bit inputs (half / bfloat16) on the matrix units, float32
// accumulation.  NVIDIA fast path (HDN_CUDA): ldmatrix + mma.sync.m16n8k16 through inline PTX.
// On HIP the plan builder uses gemm_simt.hip for 16-bit types instead (an MFMA variant belongs
// behind the same switch).  Same generated prelude as gemm_simt.hip, plus raw-bit loaders:
//   A_MODE / B_MODE: 0 = scalar (load_a_raw/load_b_raw), 1 = 8 elements along k (load_a_vec/
//   load_b_vec: one 16-byte load), 2 = 8 elements along m (A) / n (B).
// Tile 128x128x32, 256 threads = 8 warps (2 along m x 4 along n), warp tile 64x32.
// Split-K (GSPLIT > 1, chosen at plan build when the tile grid does not fill the GPU): z-block
// b * GSPLIT + s sums k in [s * GKSPLIT, (s + 1) * GKSPLIT) and writes fp32 partials to
// HDN_PART[z][m][n]; gemm_splitk.hip sums them and runs the epilogue.
// Epilogue: each warp stages its accumulators through shared memory (16 rows at a time), then
// every lane owns 8 consecutive n of one row: store_c8 (generated; one 16-byte store per output
// when that output is contiguous along n) or 8 store_c calls.
#ifndef HDN_GENERATED
#include "hdn_compat.h"
typedef hdn_half TA;
typedef hdn_half TB;
#define HDN_MMA_TYPE "f16"
#define GM 256
#define GN 256
#define GK 256
#define GBATCH 1
#define A_MODE 1
#define B_MODE 2
#define HDN_EPI_PARAMS float* __restrict__ C
#define HDN_EPI_ARGS C
__device__ __forceinline__ uint4 load_a_vec(const TA* __restrict__ A, int b, int m, int k) { return *reinterpret_cast<const uint4*>(A + (long long)m * GK + k); }
__device__ __forceinline__ uint4 load_b_vec(const TB* __restrict__ B, int b, int k, int n) { return *reinterpret_cast<const uint4*>(B + (long long)k * GN + n); }
__device__ __forceinline__ hdn_u16 load_a_raw(const TA* __restrict__ A, int b, int m, int k) { return hdn_bits(A[(long long)m * GK + k]); }
__device__ __forceinline__ hdn_u16 load_b_raw(const TB* __restrict__ B, int b, int k, int n) { return hdn_bits(B[(long long)k * GN + n]); }
__device__ __forceinline__ void store_c(HDN_EPI_PARAMS, int b, int m, int n, float v) { C[(long long)m * GN + n] = v; }
__device__ __forceinline__ void store_c8(HDN_EPI_PARAMS, int b, int m, int n, const float* v) { for (int j = 0; j < 8; ++j) C[(long long)m * GN + n + j] = v[j]; }
#define C_VEC 1
#endif
#ifndef GSPLIT
#define GSPLIT 1
#define GKSPLIT GK
#endif
#ifndef C_VEC
#define C_VEC 0
#endif

#define MBM 128
#define MBN 128
#define MBK 32
#define MPAD 8
#define MLD (MBK + MPAD)

#if HDN_CUDA
__device__ __forceinline__ unsigned hdn_smem_addr(const void* p) {
    unsigned r;
    asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(r) : "l"(p));
    return r;
}
__device__ __forceinline__ void hdn_ldm_x4(unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3, const void* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(hdn_smem_addr(p)));
}
__device__ __forceinline__ void hdn_mma(float* c, const unsigned* a, const unsigned* b) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." HDN_MMA_TYPE "." HDN_MMA_TYPE ".f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

extern "C" __global__ void __launch_bounds__(256)
#if GSPLIT > 1
hdn_gemm_mma(const TA* __restrict__ A, const TB* __restrict__ B, float* __restrict__ HDN_PART)
#else
hdn_gemm_mma(const TA* __restrict__ A, const TB* __restrict__ B, HDN_EPI_PARAMS)
#endif
{
    __shared__ __align__(16) hdn_u16 As[2][MBM][MLD];
    __shared__ __align__(16) hdn_u16 Bs[2][MBN][MLD];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int b = blockIdx.z / GSPLIT;
    const int kbeg = (blockIdx.z % GSPLIT) * GKSPLIT;
    const int kend = kbeg + GKSPLIT < GK ? kbeg + GKSPLIT : GK;
    const int m0 = blockIdx.y * MBM, n0 = blockIdx.x * MBN;
#ifdef HDN_TILE_ACTIVE   // optional data-dependent tile skip (MoE groups: moe.py)
    if (!HDN_TILE_ACTIVE(b, m0)) return;
#endif
    const int wm = (warp >> 2) * 64, wn = (warp & 3) * 32;

    // staging registers: 4096 elements per operand tile = 16 per thread
    uint4 va[2], vb[2];
    hdn_u16 sa[16], sb[16];

    auto gload = [&](int k0) {
#if A_MODE == 1
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            const int m = tid / 4 + 64 * i, k = (tid % 4) * 8;
            const int gm = m0 + m, gk = k0 + k;
            va[i] = (gm < GM && gk < GK) ? load_a_vec(A, b, gm, gk) : make_uint4(0, 0, 0, 0);
        }
#elif A_MODE == 2
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            const int k = tid / 16 + 16 * i, m = (tid % 16) * 8;
            const int gm = m0 + m, gk = k0 + k;
            va[i] = (gm < GM && gk < GK) ? load_a_vec(A, b, gm, gk) : make_uint4(0, 0, 0, 0);
        }
#else
#pragma unroll
        for (int i = 0; i < 16; ++i) {
            const int k = tid % 32, m = tid / 32 + 8 * i;
            const int gm = m0 + m, gk = k0 + k;
            sa[i] = (gm < GM && gk < GK) ? load_a_raw(A, b, gm, gk) : (hdn_u16)0;
        }
#endif
#if B_MODE == 1
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            const int n = tid / 4 + 64 * i, k = (tid % 4) * 8;
            const int gn = n0 + n, gk = k0 + k;
            vb[i] = (gn < GN && gk < GK) ? load_b_vec(B, b, gk, gn) : make_uint4(0, 0, 0, 0);
        }
#elif B_MODE == 2
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            const int k = tid / 16 + 16 * i, n = (tid % 16) * 8;
            const int gn = n0 + n, gk = k0 + k;
            vb[i] = (gn < GN && gk < GK) ? load_b_vec(B, b, gk, gn) : make_uint4(0, 0, 0, 0);
        }
#else
#pragma unroll
        for (int i = 0; i < 16; ++i) {
            const int n = tid % 128, k = tid / 128 + 2 * i;
            const int gn = n0 + n, gk = k0 + k;
            sb[i] = (gn < GN && gk < GK) ? load_b_raw(B, b, gk, gn) : (hdn_u16)0;
        }
#endif
    };
    auto sstore = [&](int buf) {
#if A_MODE == 1
#pragma unroll
        for (int i = 0; i < 2; ++i)
            *reinterpret_cast<uint4*>(&As[buf][tid / 4 + 64 * i][(tid % 4) * 8]) = va[i];
#elif A_MODE == 2
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            const int k = tid / 16 + 16 * i, m = (tid % 16) * 8;
            const hdn_u16* e = reinterpret_cast<const hdn_u16*>(&va[i]);
#pragma unroll
            for (int j = 0; j < 8; ++j) As[buf][m + j][k] = e[j];
        }
#else
#pragma unroll
        for (int i = 0; i < 16; ++i) As[buf][tid / 32 + 8 * i][tid % 32] = sa[i];
#endif
#if B_MODE == 1
#pragma unroll
        for (int i = 0; i < 2; ++i)
            *reinterpret_cast<uint4*>(&Bs[buf][tid / 4 + 64 * i][(tid % 4) * 8]) = vb[i];
#elif B_MODE == 2
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            const int k = tid / 16 + 16 * i, n = (tid % 16) * 8;
            const hdn_u16* e = reinterpret_cast<const hdn_u16*>(&vb[i]);
#pragma unroll
            for (int j = 0; j < 8; ++j) Bs[buf][n + j][k] = e[j];
        }
#else
#pragma unroll
        for (int i = 0; i < 16; ++i) Bs[buf][tid % 128][tid / 128 + 2 * i] = sb[i];
#endif
    };

    float acc[4][4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.f;

    gload(kbeg);
    sstore(0);
    __syncthreads();
    int buf = 0;
    for (int k0 = kbeg; k0 < kend; k0 += MBK) {
        const bool more = k0 + MBK < kend;
        if (more) gload(k0 + MBK);
#pragma unroll
        for (int kk = 0; kk < MBK; kk += 16) {
            unsigned af[4][4], bf[4][2];
#pragma unroll
            for (int i = 0; i < 4; ++i)
                hdn_ldm_x4(af[i][0], af[i][1], af[i][2], af[i][3],
                           &As[buf][wm + i * 16 + (lane % 16)][kk + (lane / 16) * 8]);
#pragma unroll
            for (int j = 0; j < 4; j += 2)
                hdn_ldm_x4(bf[j][0], bf[j][1], bf[j + 1][0], bf[j + 1][1],
                           &Bs[buf][wn + j * 8 + (lane / 16) * 8 + (lane % 8)][kk + ((lane / 8) % 2) * 8]);
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) hdn_mma(acc[i][j], af[i], bf[j]);
        }
        if (more) sstore(buf ^ 1);
        __syncthreads();
        buf ^= 1;
    }
    // epilogue: stage 16 x 32 accumulator rows per warp in shared memory (As is free now)
    const int g = lane >> 2, t4 = lane & 3;
    float* stg = reinterpret_cast<float*>(&As[0][0][0]) + warp * (16 * 36);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int r = 0; r < 4; ++r)
                stg[(g + (r >= 2 ? 8 : 0)) * 36 + j * 8 + t4 * 2 + (r & 1)] = acc[i][j][r];
        __syncwarp();
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int grp = lane + 32 * h, row = grp >> 2, c8 = (grp & 3) * 8;
            const int gm = m0 + wm + i * 16 + row, gn = n0 + wn + c8;
            const float4 q0 = *reinterpret_cast<const float4*>(&stg[row * 36 + c8]);
            const float4 q1 = *reinterpret_cast<const float4*>(&stg[row * 36 + c8 + 4]);
            const float v[8] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w};
            if (gm < GM && gn < GN) {
#if GSPLIT > 1
                float* p = HDN_PART + ((long long)blockIdx.z * GM + gm) * GN + gn;
                if ((GN % 4) == 0 && gn + 8 <= GN) {
                    *reinterpret_cast<float4*>(p) = q0;
                    *reinterpret_cast<float4*>(p + 4) = q1;
                } else {
#pragma unroll
                    for (int j = 0; j < 8; ++j) if (gn + j < GN) p[j] = v[j];
                }
#elif C_VEC
                store_c8(HDN_EPI_ARGS, b, gm, gn, v);
#else
#pragma unroll
                for (int j = 0; j < 8; ++j) if (gn + j < GN) store_c(HDN_EPI_ARGS, b, gm, gn + j, v[j]);
#endif
            }
        }
        __syncwarp();
    }
}
#endif  // HDN_CUDA
