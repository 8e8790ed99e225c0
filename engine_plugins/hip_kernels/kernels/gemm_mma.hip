// gemm_mma.hip - tiled GEMM for 16-bit inputs (half / bfloat16) on the matrix units, float32
// accumulation.  NVIDIA fast path (HDN_CUDA): ldmatrix + mma.sync.m16n8k16 through inline PTX.
// On HIP the plan builder uses gemm_simt.hip for 16-bit types instead (an MFMA variant belongs
// behind the same switch).  Same generated prelude as gemm_simt.hip, plus raw-bit loaders:
//   A_MODE / B_MODE: 0 = scalar (load_a_raw/load_b_raw), 1 = 8 elements along k (load_a_vec/
//   load_b_vec: one 16-byte load), 2 = 8 elements along m (A) / n (B).
// Tile 128x128x32, 256 threads = 8 warps (2 along m x 4 along n), warp tile 64x32.
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
hdn_gemm_mma(const TA* __restrict__ A, const TB* __restrict__ B, HDN_EPI_PARAMS)
{
    __shared__ __align__(16) hdn_u16 As[2][MBM][MLD];
    __shared__ __align__(16) hdn_u16 Bs[2][MBN][MLD];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int b = blockIdx.z;
    const int m0 = blockIdx.y * MBM, n0 = blockIdx.x * MBN;
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

    gload(0);
    sstore(0);
    __syncthreads();
    int buf = 0;
    for (int k0 = 0; k0 < GK; k0 += MBK) {
        const bool more = k0 + MBK < GK;
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
    const int g = lane >> 2, t4 = lane & 3;
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int r = 0; r < 4; ++r) {
                const int gm = m0 + wm + i * 16 + g + (r >= 2 ? 8 : 0);
                const int gn = n0 + wn + j * 8 + t4 * 2 + (r & 1);
                if (gm < GM && gn < GN) store_c(HDN_EPI_ARGS, b, gm, gn, acc[i][j][r]);
            }
}
#endif  // HDN_CUDA
