// transpose.hip - the layout transform of the tensor-core GEMM paths: Y[b][c][r] = X[b][r][c]
// (X: row stride TR_SR, batch stride TR_SB, unit column stride; Y packed), raw element bits.
// NCHW -> NHWC is [N][C][HW] -> [N][HW][C]; KCRS -> KRSC is [K][C][RS] -> [K][RS][C]; a
// row-major [K][N] matrix -> [N][K].  32 x 32 tiles through shared memory (one padding column
// against bank conflicts): reads and writes are both coalesced.  Block 32 x 8, grid
// (ceil(TR_C / 32), ceil(TR_R / 32), TR_B).
#ifndef HDN_GENERATED
#include "hdn_compat.h"
typedef hdn_u16 TR_T;
#define TR_B 2
#define TR_R 64
#define TR_C 3136
#define TR_SR 3136
#define TR_SB (64 * 3136)
#endif

extern "C" __global__ void __launch_bounds__(256)
hdn_transpose(const TR_T* __restrict__ X, TR_T* __restrict__ Y)
{
    __shared__ TR_T tile[32][33];
    const long long b = blockIdx.z;
    const int c0 = blockIdx.x * 32, r0 = blockIdx.y * 32;
    const TR_T* xb = X + b * (long long)TR_SB;
    TR_T* yb = Y + b * ((long long)TR_R * TR_C);
#pragma unroll
    for (int i = threadIdx.y; i < 32; i += 8) {
        const int r = r0 + i, c = c0 + threadIdx.x;
        if (r < TR_R && c < TR_C) tile[i][threadIdx.x] = xb[(long long)r * TR_SR + c];
    }
    __syncthreads();
#pragma unroll
    for (int i = threadIdx.y; i < 32; i += 8) {
        const int c = c0 + i, r = r0 + threadIdx.x;
        if (r < TR_R && c < TR_C) yb[(long long)c * TR_R + r] = tile[threadIdx.x][i];
    }
}
