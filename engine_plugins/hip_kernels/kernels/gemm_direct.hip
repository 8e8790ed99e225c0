// gemm_direct.hip - one thread per output element of a narrow GEMM (a handful of columns, a
// short reduction: depthwise convolution forward / backward data):
//   C[b, m, n] = epilogue(sum_k A[b, m, k] * B[b, k, n]), float32 accumulation.
// Same generated prelude as the tiled cores (load_a / load_b gathers, store_c with any fused
// epilogue); no shared memory, no tiles to waste on N = 1.  GD_CL: consecutive threads walk
// n, then b, then m (channels-last outputs: the group's channels are contiguous), else m, then
// n, then b (channel-major outputs: positions contiguous).
#ifndef HDN_GENERATED
#include "hdn_compat.h"
typedef float TA;
typedef float TB;
#define GM 256
#define GN 1
#define GK 9
#define GBATCH 32
#define HDN_EPI_PARAMS float* __restrict__ C
#define HDN_EPI_ARGS C
__device__ __forceinline__ float load_a(const TA* __restrict__ A, int b, int m, int k) { return hdn_to_float(A[((long long)b * GM + m) * GK + k]); }
__device__ __forceinline__ float load_b(const TB* __restrict__ B, int b, int k, int n) { return hdn_to_float(B[((long long)b * GK + k) * GN + n]); }
__device__ __forceinline__ void store_c(HDN_EPI_PARAMS, int b, int m, int n, float v) { C[((long long)b * GM + m) * GN + n] = v; }
#endif
#ifndef GD_CL
#define GD_CL 1
#endif

extern "C" __global__ void __launch_bounds__(256)
hdn_gemm_direct(const TA* __restrict__ A, const TB* __restrict__ B, HDN_EPI_PARAMS)
{
    const long long idx = (long long)blockIdx.x * 256 + threadIdx.x;
    if (idx >= (long long)GBATCH * GM * GN) return;
#if GD_CL
    const int n = (int)(idx % GN);
    const long long r = idx / GN;
    const int b = (int)(r % GBATCH), m = (int)(r / GBATCH);
#else
    const int m = (int)(idx % GM);
    const long long r = idx / GM;
    const int n = (int)(r % GN), b = (int)(r / GN);
#endif
    float acc = 0.f;
#pragma unroll 4
    for (int k = 0; k < GK; ++k) acc += load_a(A, b, m, k) * load_b(B, b, k, n);
    store_c(HDN_EPI_ARGS, b, m, n, acc);
}
