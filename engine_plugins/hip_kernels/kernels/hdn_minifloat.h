// hdn_minifloat.h - narrow float formats (one code per byte), bit-exact with the CPU reference
// (engine_plugins/cpu_reference/kernels/minifloat.py): decode exactly, encode round-to-nearest-
// even with saturation to +-max finite, NaN -> the format's NaN code (0 where it has none).
// Format descriptor: EB exponent bits, MB mantissa bits, BIAS, K = kind:
//   0 plain (FP4/FP6: no inf/NaN), 1 E4M3FN (S.1111.111 NaN), 2 IEEE-like (E5M2), 3 FNUZ (0x80 NaN)
#pragma once

template <int EB, int MB, int BIAS, int K>
__device__ __forceinline__ float hdn_mini_max() {
    // largest finite: all-ones exponent is special for K == 2; for K == 1 the top code is NaN
    const int emax = (K == 2) ? ((1 << EB) - 2) : ((1 << EB) - 1);
    const int mmax = (K == 1) ? ((1 << MB) - 2) : ((1 << MB) - 1);
    return ldexpf(1.0f + (float)mmax / (float)(1 << MB), emax - BIAS);
}

template <int EB, int MB, int BIAS, int K>
__device__ __forceinline__ float hdn_mini_decode(unsigned c) {
    const unsigned S = 1u << (EB + MB);
    c &= (S << 1) - 1u;
    const unsigned e = (c >> MB) & ((1u << EB) - 1u), m = c & ((1u << MB) - 1u);
    const bool neg = (c & S) != 0;
    if (K == 3 && c == S) return __int_as_float(0x7fc00000);
    if (K == 1 && e == (1u << EB) - 1u && m == (1u << MB) - 1u) return __int_as_float(0x7fc00000);
    if (K == 2 && e == (1u << EB) - 1u) return m ? __int_as_float(0x7fc00000) : (neg ? -__int_as_float(0x7f800000) : __int_as_float(0x7f800000));
    const float v = e == 0 ? ldexpf((float)m, 1 - BIAS - MB) : ldexpf((float)((1u << MB) | m), (int)e - BIAS - MB);
    return neg ? -v : v;
}

template <int EB, int MB, int BIAS, int K>
__device__ __forceinline__ unsigned char hdn_mini_encode(float v) {
    const unsigned S = 1u << (EB + MB);
    if (v != v) return (unsigned char)(K == 3 ? 0x80u : (K == 1 || K == 2) ? (S | (S - 1u)) & 0x7fu : 0u);
    const bool neg = signbit(v);
    float a = fabsf(v);
    const float mx = hdn_mini_max<EB, MB, BIAS, K>();
    if (a > mx) a = mx;                       // saturate (infinities included)
    unsigned code;
    const int emin = 1 - BIAS;
    int ex;
    frexpf(a, &ex);                           // a = f * 2^ex, f in [0.5, 1)
    const int e = ex - 1;                     // floor(log2(a)) for a > 0
    if (a == 0.0f || e < emin) {
        code = (unsigned)rintf(ldexpf(a, MB - emin));      // subnormal grid (may reach 2^MB)
    } else {
        unsigned n = (unsigned)rintf(ldexpf(a, MB - e));   // in [2^MB, 2^(MB+1)]
        int ee = e;
        if (n == (2u << MB)) { n = 1u << MB; ++ee; }
        code = ((unsigned)(ee + BIAS) << MB) | (n - (1u << MB));
    }
    if (neg && !(K == 3 && code == 0)) code |= S;
    return (unsigned char)code;
}

// E8M0: 2^(c - 127), 0xFF NaN, no zero
__device__ __forceinline__ float hdn_e8m0_decode(unsigned c) {
    c &= 0xffu;
    if (c == 0xffu) return __int_as_float(0x7fc00000);
    return c == 0 ? __int_as_float(0x00400000) : __int_as_float((int)(c << 23));
}
// smallest E8M0 >= f (f >= 0; NaN -> 0xFF; above 2^127 -> 2^127)
__device__ __forceinline__ unsigned char hdn_e8m0_round_up(float f) {
    if (f != f) return 0xff;
    if (f <= __int_as_float(0x00400000)) return 0;
    int ex;
    const float m = frexpf(f, &ex);
    int p = (m == 0.5f) ? ex - 1 : ex;
    p += 127;
    return (unsigned char)(p < 0 ? 0 : p > 254 ? 254 : p);
}
// nearest E8M0 (generic store of a value into E8M0; ties to the even code)

// two values -> two codes (lo in bits 0..7, hi in 8..15); the hardware pair conversion below
template <int EB, int MB, int BIAS, int K>
__device__ __forceinline__ unsigned hdn_mini_encode2(float lo, float hi) {
    return (unsigned)hdn_mini_encode<EB, MB, BIAS, K>(lo) | ((unsigned)hdn_mini_encode<EB, MB, BIAS, K>(hi) << 8);
}

// Hardware conversions (sm_89+): round to nearest even with saturation to +-max finite, NaN ->
// 0x7f - the same bits as the generic encoder above (checked GPU vs CPU in the tests).
// HDN_FP8_CVT=0 (the engine's HIPDNN_CABI_HIP_FP8_CVT=0) keeps the generic encoder.
#if HDN_CUDA && defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 890) && (!defined(HDN_FP8_CVT) || HDN_FP8_CVT)
template <> __device__ __forceinline__ unsigned char hdn_mini_encode<4, 3, 7, 1>(float v) {
    unsigned short r;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(0.0f), "f"(v));
    return (unsigned char)(r & 0xffu);
}
template <> __device__ __forceinline__ unsigned char hdn_mini_encode<5, 2, 15, 2>(float v) {
    unsigned short r;
    asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(r) : "f"(0.0f), "f"(v));
    return (unsigned char)(r & 0xffu);
}
template <> __device__ __forceinline__ unsigned hdn_mini_encode2<4, 3, 7, 1>(float lo, float hi) {
    unsigned short r;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
    return (unsigned)r;
}
template <> __device__ __forceinline__ unsigned hdn_mini_encode2<5, 2, 15, 2>(float lo, float hi) {
    unsigned short r;
    asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
    return (unsigned)r;
}
#define HDN_FP8_HW 1
#endif
