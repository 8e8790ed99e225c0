// pack.hip - the pad pre-pass of the tensor-core GEMM paths: a matrix operand whose rows are not
// 16-byte aligned (odd N or K, odd row strides) copied into a workspace buffer of PK_R rows of
// PK_CP elements (PK_CP a multiple of PK_V, so every row starts 16-byte aligned), element
// Y[r][c] = X[pk_row(r) + c * PK_SC] for c < PK_C and zero in the padding columns c >= PK_C
// (the zero k tail the 16-byte chunk loads of the wgmma producer read).  pk_row(r): the element
// offset of row r of the source (its outer dims decoded from r, generated per plan).  One
// thread per 16-byte chunk of Y: PK_V raw elements read along the source row (coalesced when
// PK_SC == 1), one 16-byte store.  Block 256, grid ceil(PK_R * PK_CP / PK_V / 256).
#ifndef HDN_GENERATED
#include "hdn_compat.h"
typedef hdn_u16 PK_T;
#define PK_V 8
#define PK_R 4096
#define PK_C 4095
#define PK_CP 4096
#define PK_SC 1
__device__ __forceinline__ long long pk_row(long long r) { return r * PK_C; }
#endif

extern "C" __global__ void __launch_bounds__(256)
hdn_pack(const PK_T* __restrict__ X, PK_T* __restrict__ Y)
{
    const long long i = (long long)blockIdx.x * 256 + threadIdx.x;
    if (i >= (long long)PK_R * (PK_CP / PK_V)) return;
    const long long r = i / (PK_CP / PK_V);
    const int c0 = (int)(i % (PK_CP / PK_V)) * PK_V;
    const PK_T* __restrict__ xr = X + pk_row(r);
    union { uint4 u; PK_T e[PK_V]; } v;
#pragma unroll
    for (int j = 0; j < PK_V; ++j) {
        const int c = c0 + j;
        v.e[j] = c < PK_C ? xr[(long long)c * PK_SC] : (PK_T)0;
    }
    *reinterpret_cast<uint4*>(Y + r * PK_CP + c0) = v.u;
}
