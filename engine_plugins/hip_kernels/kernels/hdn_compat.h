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
// BOOLEAN (the FlatBuffers schema writes it UNSET): one byte, 0 or 1; nonzero (NaN too) is true
struct __align__(1) hdn_bool { unsigned char bits; };
__device__ __forceinline__ float hdn_to_float(hdn_bool b) { return b.bits ? 1.f : 0.f; }
template <> __device__ __forceinline__ hdn_bool hdn_from_float<hdn_bool>(float f) {
    hdn_bool b;
    b.bits = (unsigned char)(f != 0.f);
    return b;
}
// 8-bit integers (pointwise nodes): round to nearest even, saturate, NaN -> 0 (the CPU
// reference's encoding); reading one is the plain conversion to float
template <> __device__ __forceinline__ signed char hdn_from_float<signed char>(float f) {
    if (f != f) return 0;
    return (signed char)fminf(fmaxf(rintf(f), -128.f), 127.f);
}
template <> __device__ __forceinline__ unsigned char hdn_from_float<unsigned char>(float f) {
    if (f != f) return 0;
    return (unsigned char)fminf(fmaxf(rintf(f), 0.f), 255.f);
}
// round a float through a storage type (virtual intermediates of a 16-bit type)
template <class T> __device__ __forceinline__ float hdn_round(float f) { return hdn_to_float(hdn_from_float<T>(f)); }

// 64-bit compute (DOUBLE data, 32 / 64-bit integers, compute type DOUBLE: the CPU reference
// computes those in float64): NaN-propagating min / max, loads widened (an integer beyond 2^53
// rounds to nearest, as numpy's float64 conversion), stores as the CPU reference encodes -
// integers round to nearest even, saturate, NaN -> 0; BOOLEAN is value != 0; half rounds once
// (through a round-to-odd float); bfloat16 / fp8 round through float as the CPU does
__device__ __forceinline__ double hdn_fmax_d(double a, double b) { return (a != a || b != b) ? a + b : fmax(a, b); }
__device__ __forceinline__ double hdn_fmin_d(double a, double b) { return (a != a || b != b) ? a + b : fmin(a, b); }
__device__ __forceinline__ double hdn_to_double(double x) { return x; }
__device__ __forceinline__ double hdn_to_double(int x) { return (double)x; }
__device__ __forceinline__ double hdn_to_double(long long x) { return (double)x; }
template <class T> __device__ __forceinline__ double hdn_to_double(T x) { return (double)hdn_to_float(x); }
__device__ __forceinline__ float hdn_f32_odd(double d) {
    const float f = (float)d;
    if (f != f || (double)f == d || fabsf(f) == __int_as_float(0x7f800000)) return f;
    unsigned u = __float_as_uint(f);
    if (fabs((double)f) > fabs(d)) u -= 1u;
    return __uint_as_float(u | 1u);
}
template <class T> __device__ __forceinline__ T hdn_from_double(double d) { return hdn_from_float<T>((float)d); }
template <> __device__ __forceinline__ double hdn_from_double<double>(double d) { return d; }
template <> __device__ __forceinline__ float hdn_from_double<float>(double d) { return (float)d; }
template <> __device__ __forceinline__ hdn_half hdn_from_double<hdn_half>(double d) { return hdn_from_float<hdn_half>(hdn_f32_odd(d)); }
template <> __device__ __forceinline__ hdn_bool hdn_from_double<hdn_bool>(double d) {
    hdn_bool b;
    b.bits = (unsigned char)(d != 0.0);
    return b;
}
template <> __device__ __forceinline__ signed char hdn_from_double<signed char>(double d) {
    return d != d ? (signed char)0 : (signed char)fmin(fmax(rint(d), -128.0), 127.0);
}
template <> __device__ __forceinline__ unsigned char hdn_from_double<unsigned char>(double d) {
    return d != d ? (unsigned char)0 : (unsigned char)fmin(fmax(rint(d), 0.0), 255.0);
}
template <> __device__ __forceinline__ int hdn_from_double<int>(double d) {
    return d != d ? 0 : (int)fmin(fmax(rint(d), -2147483648.0), 2147483647.0);
}
template <> __device__ __forceinline__ long long hdn_from_double<long long>(double d) {
    if (d != d) return 0;
    const double r = rint(d);
    if (r >= 9223372036854775807.0) return 9223372036854775807LL;
    if (r <= -9223372036854775807.0) return -9223372036854775807LL - 1;
    return (long long)r;
}
// round a double through a storage type (virtual intermediates of 64-bit compute)
template <class T> __device__ __forceinline__ double hdn_dround(double d) { return hdn_to_double(hdn_from_double<T>(d)); }

// 8-bit floats (OCP FP8: e4m3 "FN" - no infinities, NaN = S.1111.111, max 448 - and e5m2 - IEEE
// like, max 57344), stored as raw bits; conversions in software (any target), float -> fp8
// rounds to nearest even and saturates to the largest finite value (NaN stays NaN).
struct __align__(1) hdn_fp8e4m3 { unsigned char bits; };
struct __align__(1) hdn_fp8e5m2 { unsigned char bits; };
__device__ __forceinline__ float hdn_to_float(hdn_fp8e4m3 v) {
    const unsigned b = v.bits, s = (b & 0x80u) << 24, e = (b >> 3) & 15u, m = b & 7u;
    if (e == 15u && m == 7u) return __uint_as_float(s | 0x7fc00000u);
    if (e == 0u) return __uint_as_float(s | __float_as_uint((float)m * 0.001953125f));   // m * 2^-9
    return __uint_as_float(s | ((e + 120u) << 23) | (m << 20));
}
__device__ __forceinline__ float hdn_to_float(hdn_fp8e5m2 v) {
    hdn_half h;
    h.bits = (hdn_u16)((unsigned)v.bits << 8);   // e5m2 is the top byte of an fp16
    return hdn_to_float(h);
}
// float -> fp8 code: E = max(floor(log2 |f|), 1 - BIAS), q = rint(|f| * 2^(MB - E)),
// code = ((E + BIAS) << MB) + q - 2^MB (carries into the exponent; subnormals included)
template <int MB, int BIAS, unsigned MAXC>
__device__ __forceinline__ unsigned char hdn_fp8_code(float f) {
    const unsigned u = __float_as_uint(f), s = (u >> 24) & 0x80u;
    float a = fabsf(f);
    if (a != a) return (unsigned char)(s | 0x7fu);
    a = fminf(a, 131072.0f);
    int E = (int)((__float_as_uint(a) >> 23) & 255u) - 127;
    if (E < 1 - BIAS) E = 1 - BIAS;
    const float q = rintf(a * __uint_as_float((unsigned)(MB - E + 127) << 23));
    unsigned c = (unsigned)((E + BIAS) << MB) + (unsigned)q - (1u << MB);
    if (c > MAXC) c = MAXC;
    return (unsigned char)(s | c);
}
template <> __device__ __forceinline__ hdn_fp8e4m3 hdn_from_float<hdn_fp8e4m3>(float f) {
    hdn_fp8e4m3 v; v.bits = hdn_fp8_code<3, 7, 0x7eu>(f); return v;
}
template <> __device__ __forceinline__ hdn_fp8e5m2 hdn_from_float<hdn_fp8e5m2>(float f) {
    hdn_fp8e5m2 v; v.bits = hdn_fp8_code<2, 15, 0x7bu>(f); return v;
}

// the value of lane (this lane ^ o) of the warp (NVIDIA, 32 lanes) / wavefront (AMD, 64 lanes):
// for o < 32 the same neighbours on both.  AMD: __shfl_xor takes no lane mask (hiprtc's
// __shfl_xor_sync is absent before ROCm 6.2 and wants a 64-bit mask after).  A template: only
// kernels that use it need the intrinsic (the host emulation of tests/gpu has none)
template <class T> __device__ __forceinline__ T hdn_lane_xor(T v, int o) {
#if HDN_CUDA
    return __shfl_xor_sync(0xffffffffu, v, o);
#else
    return __shfl_xor(v, o);
#endif
}

// raw 16-bit access (GEMM tiles move bits, not values)
__device__ __forceinline__ hdn_u16 hdn_bits(hdn_half h) { return h.bits; }
__device__ __forceinline__ hdn_u16 hdn_bits(hdn_bf16 h) { return h.bits; }
