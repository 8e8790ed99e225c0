// hdn_philox.h - Philox 4x32-10 (Salmon et al. 2011) and the SDPA dropout stream shared with the
// CPU reference engine (engine_plugins/cpu_reference/kernels/philox.py, bit for bit): element
// (b, h, i, j) uses output n = offset + i * Skv + j of the stream (key = seed, subsequence
// s = b * Hq + h): counter (lo(n >> 2), hi(n >> 2), lo(s), hi(s)), word n & 3 - what
// curand_init(seed, s, n) + curand() returns.  Dropped when the word < the drop threshold.
#pragma once

__device__ __forceinline__ uint4 hdn_philox(uint4 c, unsigned k0, unsigned k1) {
#pragma unroll
    for (int r = 0; r < 10; ++r) {
        unsigned hi0 = __umulhi(0xD2511F53u, c.x), lo0 = 0xD2511F53u * c.x;
        unsigned hi1 = __umulhi(0xCD9E8D57u, c.z), lo1 = 0xCD9E8D57u * c.z;
        c = make_uint4(hi1 ^ c.y ^ k0, lo1, hi0 ^ c.w ^ k1, lo0);
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    return c;
}
__device__ __forceinline__ unsigned hdn_philox_word(unsigned long long seed,
                                                    unsigned long long sub,
                                                    unsigned long long n) {
    unsigned long long q = n >> 2;
    uint4 w = hdn_philox(make_uint4((unsigned)q, (unsigned)(q >> 32), (unsigned)sub,
                                    (unsigned)(sub >> 32)), (unsigned)seed, (unsigned)(seed >> 32));
    unsigned k = (unsigned)(n & 3);
    return k == 0 ? w.x : k == 1 ? w.y : k == 2 ? w.z : w.w;
}
// outputs n and n + 1 of the stream (one Philox call when they share a counter, n & 3 < 3)
__device__ __forceinline__ void hdn_philox_word2(unsigned long long seed, unsigned long long sub,
                                                 unsigned long long n, unsigned& w0, unsigned& w1) {
    const unsigned long long q = n >> 2;
    const uint4 w = hdn_philox(make_uint4((unsigned)q, (unsigned)(q >> 32), (unsigned)sub,
                                          (unsigned)(sub >> 32)), (unsigned)seed, (unsigned)(seed >> 32));
    const unsigned k = (unsigned)(n & 3);
    w0 = k == 0 ? w.x : k == 1 ? w.y : k == 2 ? w.z : w.w;
    w1 = k == 0 ? w.y : k == 1 ? w.z : k == 2 ? w.w : hdn_philox_word(seed, sub, n + 1);
}
