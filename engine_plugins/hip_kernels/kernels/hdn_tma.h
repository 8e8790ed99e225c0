// hdn_tma.h - the Hopper asynchronous-copy building blocks the wgmma kernels share (GEMM core
// gemm_wgmma.hip, flash attention attention_fwd_wgmma.hip): shared-memory addresses, mbarriers
// (init / try-wait on a phase parity / arrive / arrive with an expected transaction count),
// 16-byte cp.async completing on an mbarrier, the async-proxy fence, tensor-copy-engine loads
// (cp.async.bulk.tensor 3-d / 4-d tiled and 4-d im2col, 128-byte swizzle as the tensor map says) and stores (bulk
// async-groups), named barriers and the wgmma
// shared-memory matrix descriptor (128-byte swizzle mode).
#pragma once
#include "hdn_compat.h"

// 128-byte aligned opaque CUtensorMap (passed by value as a __grid_constant__ parameter)
struct __align__(64) hdn_tmap { unsigned long long v[16]; };

#if HDN_CUDA && defined(__CUDA_ARCH_FEAT_SM90_ALL)
__device__ __forceinline__ unsigned wg_saddr(const void* p) {
    unsigned r;
    asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(r) : "l"(p));
    return r;
}
__device__ __forceinline__ void wg_bar_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ bool wg_bar_try(unsigned bar, unsigned parity) {
    unsigned ok;
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                 "selp.u32 %0, 1, 0, p;\n}" : "=r"(ok) : "r"(bar), "r"(parity) : "memory");
    return ok != 0;
}
__device__ __forceinline__ void wg_bar_wait(unsigned bar, unsigned parity) {
    while (!wg_bar_try(bar, parity)) {}
}
__device__ __forceinline__ void wg_bar_arrive(unsigned bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(bar) : "memory");
}
__device__ __forceinline__ void wg_bar_expect_tx(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void wg_cp_async16(unsigned dst, const void* src, unsigned n) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(dst), "l"(src), "r"(n) : "memory");
}
__device__ __forceinline__ void wg_cp_async_arrive(unsigned bar) {
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" :: "r"(bar) : "memory");
}
__device__ __forceinline__ void wg_fence_async() {
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}
__device__ __forceinline__ void wg_tma3(unsigned dst, const hdn_tmap* map, int c0, int c1, int c2, unsigned bar) {
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes "
                 "[%0], [%1, {%2, %3, %4}], [%5];"
                 :: "r"(dst), "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
                 : "memory");
}
__device__ __forceinline__ void wg_tma4(unsigned dst, const hdn_tmap* map, int c0, int c1, int c2, int c3, unsigned bar) {
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes "
                 "[%0], [%1, {%2, %3, %4, %5}], [%6];"
                 :: "r"(dst), "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
                 : "memory");
}
// im2col mode (a tensor map made by cuTensorMapEncodeIm2col over an NHWC tensor): the map's
// pixelsPerColumn consecutive output pixels x channelsPerPixel channels, starting at the
// input pixel (w, h, n) of the first one and walking the map's bounding box (W, then H, then
// the next image) with its traversal steps; (ow, oh) is the filter tap's offset; pixels
// outside the tensor (padding, past the last image) read zeros
__device__ __forceinline__ void wg_tma4_im2col(unsigned dst, const hdn_tmap* map, int c, int w, int h, int n,
                                               unsigned short ow, unsigned short oh, unsigned bar) {
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes "
                 "[%0], [%1, {%2, %3, %4, %5}], [%6], {%7, %8};"
                 :: "r"(dst), "l"(reinterpret_cast<unsigned long long>(map)), "r"(c), "r"(w), "r"(h), "r"(n),
                    "r"(bar), "h"(ow), "h"(oh)
                 : "memory");
}
// tensor-copy-engine store (shared -> global, 3-d box; the tensor map clips out-of-range
// elements: they are not written) in the issuing thread's bulk async-group; commit / wait on
// those groups (.read: until the shared-memory source has been read, so it may be rewritten)
__device__ __forceinline__ void wg_tma_store3(const hdn_tmap* map, unsigned src, int c0, int c1, int c2) {
    asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];"
                 :: "l"(reinterpret_cast<unsigned long long>(map)), "r"(src), "r"(c0), "r"(c1), "r"(c2)
                 : "memory");
}
__device__ __forceinline__ void wg_bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
__device__ __forceinline__ void wg_bulk_wait_read0() { asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory"); }
__device__ __forceinline__ void wg_bulk_wait0() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }
// named barrier ID (1..15; 0 is __syncthreads) over N threads (whole warps); immediate ids
template <int ID, int N>
__device__ __forceinline__ void wg_named_sync() {
    asm volatile("bar.sync %0, %1;" :: "n"(ID), "n"(N) : "memory");
}
__device__ __forceinline__ void wg_st_shared32(unsigned addr, unsigned v) {
    asm volatile("st.shared.u32 [%0], %1;" :: "r"(addr), "r"(v) : "memory");
}
// wgmma descriptor: start address, leading / stride byte offsets, 128-byte swizzle
__device__ __forceinline__ unsigned long long wg_desc(unsigned addr, unsigned lbo, unsigned sbo) {
    return (unsigned long long)((addr >> 4) & 0x3FFF) | ((unsigned long long)((lbo >> 4) & 0x3FFF) << 16) |
           ((unsigned long long)((sbo >> 4) & 0x3FFF) << 32) | (1ull << 62);
}
#endif
