// hdn_mfma.h - AMD CDNA (gfx90a / gfx942) matrix-core building blocks for the flash-attention
// kernels: v_mfma_f32_32x32x8 f16 / bf16_1k on one wavefront (64 lanes), operands as four 16-bit
// values in two 32-bit registers (am_u2), fp32 accumulators (am_f16x16, 16 per lane).
// Lane l = 32 hi + lq (hi = l / 32, lq = l % 32) of the 32 x 32 x 8 product D = A B + C holds
//   A[m = lq][k = 4 hi + 0..3]   (a row of A: four consecutive k)
//   B[k = 4 hi + 0..3][n = lq]   (a column of B: four consecutive k)
//   D register r: D[m = 8 (r / 4) + 4 hi + r % 4][n = lq]
// so accumulator registers 4 g .. 4 g + 3 of a 32 x 32 result X hold X[8 g + 4 hi + 0..3][lq]:
// exactly the B operand of the k-step g of a product with X's rows as its k (packed to 16-bit),
// which is how P and dS feed the next product without any lane exchange.
// HDN_BF16_IO: 1 = bf16 data, 0 = fp16.
#pragma once
#include "hdn_compat.h"
#ifndef HDN_BF16_IO
#define HDN_BF16_IO 0
#endif

typedef unsigned am_u2 __attribute__((ext_vector_type(2)));
typedef float am_f16x16 __attribute__((ext_vector_type(16)));
typedef _Float16 am_h4 __attribute__((ext_vector_type(4)));
typedef short am_s4 __attribute__((ext_vector_type(4)));

__device__ __forceinline__ am_f16x16 am_mfma(am_u2 a, am_u2 b, am_f16x16 c) {
#if HDN_BF16_IO
    return __builtin_amdgcn_mfma_f32_32x32x8bf16_1k(__builtin_bit_cast(am_s4, a),
                                                    __builtin_bit_cast(am_s4, b), c, 0, 0, 0);
#else
    return __builtin_amdgcn_mfma_f32_32x32x8f16(__builtin_bit_cast(am_h4, a),
                                                __builtin_bit_cast(am_h4, b), c, 0, 0, 0);
#endif
}
__device__ __forceinline__ am_f16x16 am_zero() {
    am_f16x16 z;
#pragma unroll
    for (int r = 0; r < 16; ++r) z[r] = 0.f;
    return z;
}
// keep x in a VGPR (per-lane) from here on, so the compiler does not derive a chain of uniform
// values from it in SGPRs (a wavefront has ~100 of those)
__device__ __forceinline__ void am_vgpr(unsigned& x) {
#if defined(__AMDGCN__)
    asm volatile("" : "+v"(x));
#else
    (void)x;
#endif
}
// one float -> the 16-bit data type's bits (round to nearest even)
__device__ __forceinline__ unsigned am_bits(float f) {
#if HDN_BF16_IO
    return hdn_from_float<hdn_bf16>(f).bits;
#else
    return hdn_from_float<hdn_half>(f).bits;
#endif
}
// registers 4 g .. 4 g + 3 of an accumulator, times s, as a 16-bit operand (k-step g)
__device__ __forceinline__ am_u2 am_pack(const am_f16x16& x, int g, float s) {
    am_u2 r;
    r.x = am_bits(x[4 * g] * s) | (am_bits(x[4 * g + 1] * s) << 16);
    r.y = am_bits(x[4 * g + 2] * s) | (am_bits(x[4 * g + 3] * s) << 16);
    return r;
}
// four 16-bit values (8-byte aligned) from memory
__device__ __forceinline__ am_u2 am_ld4(const hdn_u16* p) { return *reinterpret_cast<const am_u2*>(p); }
// four 16-bit values p[0], p[s], p[2 s], p[3 s] (a column of a row-major tile)
__device__ __forceinline__ am_u2 am_ld4s(const hdn_u16* p, int s) {
    am_u2 r;
    r.x = (unsigned)p[0] | ((unsigned)p[s] << 16);
    r.y = (unsigned)p[2 * s] | ((unsigned)p[3 * s] << 16);
    return r;
}
