// gemm_splitk.hip - split-K finish: C[b, m, n] = epilogue(sum_s P[b * GSPLIT + s][m][n]).
// Same generated prelude as the GEMM kernels (sizes, store_c / store_c8 with any fused
// epilogue).  One thread per 8 consecutive n of one row (C_VEC: GN % 8 == 0, float4 loads and
// store_c8), else one thread per element.  HDN_ACC_INT 1 (the s8 wgmma core): int32 partials,
// summed in int32 (wrapping like the unsplit accumulation), and an int epilogue.
#ifndef HDN_GENERATED
#include "hdn_compat.h"
#define GM 256
#define GN 256
#define GK 256
#define GBATCH 1
#define GSPLIT 4
#define C_VEC 1
#define HDN_EPI_PARAMS float* __restrict__ C
#define HDN_EPI_ARGS C
__device__ __forceinline__ void store_c(HDN_EPI_PARAMS, int b, int m, int n, float v) { C[(long long)m * GN + n] = v; }
__device__ __forceinline__ void store_c8(HDN_EPI_PARAMS, int b, int m, int n, const float* v) { for (int j = 0; j < 8; ++j) C[(long long)m * GN + n + j] = v[j]; }
#endif
#if defined(HDN_ACC_INT) && HDN_ACC_INT
typedef int sk_acc_t;
typedef int4 sk_acc4_t;
#else
typedef float sk_acc_t;
typedef float4 sk_acc4_t;
#endif

extern "C" __global__ void __launch_bounds__(256)
hdn_gemm_splitk(const sk_acc_t* __restrict__ P, HDN_EPI_PARAMS)
{
#if C_VEC
    const long long idx = (long long)blockIdx.x * 256 + threadIdx.x;
    if (idx >= (long long)GBATCH * GM * (GN / 8)) return;
    const int n = (int)(idx % (GN / 8)) * 8;
    const long long rm = idx / (GN / 8);
    const int m = (int)(rm % GM), b = (int)(rm / GM);
    sk_acc_t v[8] = {0, 0, 0, 0, 0, 0, 0, 0};
#pragma unroll 4
    for (int s = 0; s < GSPLIT; ++s) {
        const sk_acc_t* p = P + (((long long)b * GSPLIT + s) * GM + m) * GN + n;
        const sk_acc4_t q0 = *reinterpret_cast<const sk_acc4_t*>(p);
        const sk_acc4_t q1 = *reinterpret_cast<const sk_acc4_t*>(p + 4);
        v[0] += q0.x; v[1] += q0.y; v[2] += q0.z; v[3] += q0.w;
        v[4] += q1.x; v[5] += q1.y; v[6] += q1.z; v[7] += q1.w;
    }
    store_c8(HDN_EPI_ARGS, b, m, n, v);
#else
    const long long idx = (long long)blockIdx.x * 256 + threadIdx.x;
    if (idx >= (long long)GBATCH * GM * GN) return;
    const int n = (int)(idx % GN);
    const long long rm = idx / GN;
    const int m = (int)(rm % GM), b = (int)(rm / GM);
    sk_acc_t v = 0;
#pragma unroll 4
    for (int s = 0; s < GSPLIT; ++s) v += P[(((long long)b * GSPLIT + s) * GM + m) * GN + n];
    store_c(HDN_EPI_ARGS, b, m, n, v);
#endif
}
