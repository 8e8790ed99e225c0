// hdn_reduce.h - the engine's block-reduction core for row kernels (layernorm / RMSnorm forward
// and backward, ...): warp shuffles, then one partial per warp in shared memory, then every
// thread sums the partials in a fixed order (deterministic; all threads get the result).
#pragma once
#if HDN_CUDA
#define HDN_WARP 32
__device__ __forceinline__ float hdn_shfl_xor(float v, int o) { return __shfl_xor_sync(0xffffffffu, v, o); }
#else
#define HDN_WARP 64
__device__ __forceinline__ float hdn_shfl_xor(float v, int o) { return __shfl_xor(v, o); }
#endif

// a[0..N) summed over the NT threads of the block.  sh: >= N * NT / HDN_WARP floats.
template <int NT, int N>
__device__ __forceinline__ void hdn_block_sum(float (&a)[N], float* sh) {
    constexpr int NW = NT / HDN_WARP > 0 ? NT / HDN_WARP : 1;
#pragma unroll
    for (int k = 0; k < N; ++k) {
#pragma unroll
        for (int o = HDN_WARP / 2; o > 0; o >>= 1) a[k] += hdn_shfl_xor(a[k], o);
    }
    const int w = threadIdx.x / HDN_WARP, l = threadIdx.x % HDN_WARP;
    if (l == 0) {
#pragma unroll
        for (int k = 0; k < N; ++k) sh[k * NW + w] = a[k];
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < N; ++k) {
        float s = 0.f;
        for (int j = 0; j < NW; ++j) s += sh[k * NW + j];
        a[k] = s;
    }
    __syncthreads();
}

// 16-bit / float vectors of one 16-byte load (8 x 16-bit or 4 x float) <-> floats
__device__ __forceinline__ void hdn_unpack(const uint4 q, const hdn_half*, float* v) {
    const unsigned w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) { v[2 * i] = hdn_half_bits_to_float((hdn_u16)(w[i] & 0xffffu)); v[2 * i + 1] = hdn_half_bits_to_float((hdn_u16)(w[i] >> 16)); }
}
__device__ __forceinline__ void hdn_unpack(const uint4 q, const hdn_bf16*, float* v) {
    const unsigned w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) { v[2 * i] = __uint_as_float(w[i] << 16); v[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u); }
}
__device__ __forceinline__ void hdn_unpack(const uint4 q, const float*, float* v) {
    v[0] = __uint_as_float(q.x); v[1] = __uint_as_float(q.y); v[2] = __uint_as_float(q.z); v[3] = __uint_as_float(q.w);
}
template <class T> __device__ __forceinline__ uint4 hdn_pack(const float* v);
template <> __device__ __forceinline__ uint4 hdn_pack<float>(const float* v) {
    return make_uint4(__float_as_uint(v[0]), __float_as_uint(v[1]), __float_as_uint(v[2]), __float_as_uint(v[3]));
}
template <class T> __device__ __forceinline__ uint4 hdn_pack16(const float* v) {
    unsigned w[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) w[i] = (unsigned)hdn_bits(hdn_from_float<T>(v[2 * i])) | ((unsigned)hdn_bits(hdn_from_float<T>(v[2 * i + 1])) << 16);
    return make_uint4(w[0], w[1], w[2], w[3]);
}
template <> __device__ __forceinline__ uint4 hdn_pack<hdn_half>(const float* v) { return hdn_pack16<hdn_half>(v); }
template <> __device__ __forceinline__ uint4 hdn_pack<hdn_bf16>(const float* v) { return hdn_pack16<hdn_bf16>(v); }

// One-pass mean / variance over the NT threads of the block (Chan's parallel merge of per-thread
// (count, mean, M2); each thread computes its own part exactly in registers).  The merge order
// is fixed (lower lane / lower warp first) so every thread ends with the same bits.
// sh: >= 3 * NT / HDN_WARP floats.  On return n, mean, m2 hold the block's totals.
__device__ __forceinline__ void hdn_chan_merge(float& na, float& ma, float& qa, float nb, float mb, float qb) {
    const float n = na + nb;
    if (n > 0.f) {
        const float d = mb - ma, f = nb / n;
        ma = fmaf(d, f, ma);
        qa = qa + qb + d * d * na * f;
    }
    na = n;
}
template <int NT>
__device__ __forceinline__ void hdn_block_welford(float& n, float& mean, float& m2, float* sh) {
    constexpr int NW = NT / HDN_WARP > 0 ? NT / HDN_WARP : 1;
    const int l = threadIdx.x % HDN_WARP, w = threadIdx.x / HDN_WARP;
#pragma unroll
    for (int o = 1; o < HDN_WARP && o < NT; o <<= 1) {
        const float nb = hdn_shfl_xor(n, o), mb = hdn_shfl_xor(mean, o), qb = hdn_shfl_xor(m2, o);
        if (l & o) {          // the partner is the lower half: merge as (partner, self)
            float pn = nb, pm = mb, pq = qb;
            hdn_chan_merge(pn, pm, pq, n, mean, m2);
            n = pn; mean = pm; m2 = pq;
        } else {
            hdn_chan_merge(n, mean, m2, nb, mb, qb);
        }
    }
    if (NW > 1) {
        if (l == 0) { sh[w] = n; sh[NW + w] = mean; sh[2 * NW + w] = m2; }
        __syncthreads();
        n = sh[0]; mean = sh[NW]; m2 = sh[2 * NW];
        for (int j = 1; j < NW; ++j) hdn_chan_merge(n, mean, m2, sh[j], sh[NW + j], sh[2 * NW + j]);
        __syncthreads();
    }
}

// Column sums of a block laid out as BX columns x (NT / BX) rows (thread t: column t % BX, row
// t / BX; BX a power of two): a[0..N) of every thread summed over the rows of its column, in a
// fixed order (warp butterfly over the rows one warp holds, then the warps' partials in shared
// memory by ascending warp) - deterministic.  Every thread of the block must call it.  On return
// the total of value k of column x is at sh[hdn_colsum_at<NT, BX>(k, x)] for every thread.
// sh: >= N * NT elements of type A (float or double).
template <int NT, int BX>
__device__ __forceinline__ int hdn_colsum_at(int k, int x) {
    constexpr int R = NT / (BX > HDN_WARP ? BX : HDN_WARP);   // row groups after the warp step
    return (k * (R > 0 ? R : 1)) * BX + x;
}
template <int NT, int BX, int N, class A>
__device__ __forceinline__ void hdn_block_colsum(A (&a)[N], A* sh) {
    constexpr int R0 = NT / (BX > HDN_WARP ? BX : HDN_WARP);
    constexpr int R = R0 > 0 ? R0 : 1;
#pragma unroll
    for (int k = 0; k < N; ++k) {
#pragma unroll
        for (int o = BX; o < HDN_WARP && o < NT; o <<= 1) a[k] += hdn_lane_xor(a[k], o);
    }
    const int x = threadIdx.x % BX, g = threadIdx.x / (BX > HDN_WARP ? BX : HDN_WARP);
    if ((int)(threadIdx.x % HDN_WARP) < BX) {    // one writer per (warp, column)
#pragma unroll
        for (int k = 0; k < N; ++k) sh[(k * R + g) * BX + x] = a[k];
    }
    __syncthreads();
    for (int i = threadIdx.x; i < N * BX; i += NT) {
        const int k = i / BX, c = i % BX;
        A s = sh[k * R * BX + c];
        for (int j = 1; j < R; ++j) s += sh[(k * R + j) * BX + c];
        sh[k * R * BX + c] = s;
    }
    __syncthreads();
}
