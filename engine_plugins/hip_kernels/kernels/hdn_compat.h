// hdn_compat.h - the few spellings HIP and CUDA device code do not share.
// Kernels include only this header (no cuda_fp16.h / hip_fp16.h), so NVRTC and hiprtc compile
// them with no include path.  16-bit types are stored as raw bits and computed in float.
#pragma once
#if defined(HDN_PLATFORM_HIP) || defined(__HIP_PLATFORM_AMD__) || defined(__HIPCC__)
#define HDN_HIP 1
#define HDN_CUDA 0
#else
#define HDN_HIP 0
#define HDN_CUDA 1
#endif

typedef unsigned short hdn_u16;
struct __align__(2) hdn_half { hdn_u16 bits; };
struct __align__(2) hdn_bf16 { hdn_u16 bits; };

__device__ __forceinline__ float hdn_to_float(float x) { return x; }
__device__ __forceinline__ float hdn_to_float(hdn_bf16 h) { return __uint_as_float(((unsigned)h.bits) << 16); }
__device__ __forceinline__ float hdn_to_float(hdn_half h) {
#if HDN_CUDA
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h.bits));
    return f;
#else
    _Float16 v;
    __builtin_memcpy(&v, &h.bits, 2);
    return (float)v;
#endif
}
__device__ __forceinline__ float hdn_half_bits_to_float(hdn_u16 b) { hdn_half h; h.bits = b; return hdn_to_float(h); }
__device__ __forceinline__ float hdn_bf16_bits_to_float(hdn_u16 b) { hdn_bf16 h; h.bits = b; return hdn_to_float(h); }

template <class T> __device__ __forceinline__ T hdn_from_float(float f);
template <> __device__ __forceinline__ float hdn_from_float<float>(float f) { return f; }
template <> __device__ __forceinline__ hdn_bf16 hdn_from_float<hdn_bf16>(float f) {
    unsigned u = __float_as_uint(f);
    hdn_bf16 h;
    if ((u & 0x7fffffffu) > 0x7f800000u) { h.bits = (hdn_u16)((u >> 16) | 0x40u); return h; }  // quiet NaN
    u += 0x7fffu + ((u >> 16) & 1u);   // round to nearest even
    h.bits = (hdn_u16)(u >> 16);
    return h;
}
template <> __device__ __forceinline__ hdn_half hdn_from_float<hdn_half>(float f) {
    hdn_half h;
#if HDN_CUDA
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(f));
#else
    _Float16 v = (_Float16)f;
    __builtin_memcpy(&h.bits, &v, 2);
#endif
    return h;
}
// round a float through a storage type (virtual intermediates of a 16-bit type)
template <class T> __device__ __forceinline__ float hdn_round(float f) { return hdn_to_float(hdn_from_float<T>(f)); }

// raw 16-bit access (GEMM tiles move bits, not values)
__device__ __forceinline__ hdn_u16 hdn_bits(hdn_half h) { return h.bits; }
__device__ __forceinline__ hdn_u16 hdn_bits(hdn_bf16 h) { return h.bits; }
