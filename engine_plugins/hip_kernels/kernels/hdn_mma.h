// hdn_mma.h - tensor-core building blocks on mma.sync (sm_80+; NVRTC, no include path):
// shared-memory addresses, 16-byte cp.async with zero fill, ldmatrix (plain / transposed),
// mma.m16n8k16 with fp32 accumulators for f16 / bf16 (HDN_MMA_TYPE "f16" | "bf16"), packing two
// floats into one 16-bit pair, and the XOR swizzle of [rows][n16B chunks] tiles that keeps
// ldmatrix free of bank conflicts.  Fragment layout (PTX ISA, m16n8k16): lane = 4 g + t,
// C/D: c0,c1 = (row g, cols 2t, 2t+1), c2,c3 = (row g+8, same cols); A: a0 (g, k 2t..), a1
// (g+8, k 2t..), a2 (g, k 8+2t..), a3 (g+8, k 8+2t..) - so the C fragments of two adjacent
// n-tiles are, packed, the A fragment of the next product (flash attention's P·V).
#pragma once
#include "hdn_compat.h"
#ifndef HDN_MMA_TYPE
#define HDN_MMA_TYPE "f16"
#endif

__device__ __forceinline__ unsigned hdn_saddr(const void* p) {
    return (unsigned)__cvta_generic_to_shared(p);
}
// 16-byte global -> shared copy; full = false fills the 16 bytes with zeros (no global read)
__device__ __forceinline__ void hdn_cp16(void* smem, const void* gmem, bool full) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;"
                 :: "r"(hdn_saddr(smem)), "l"(gmem), "r"(full ? 16 : 0));
}
// 4-byte global -> shared copy (zero fill when !full)
__device__ __forceinline__ void hdn_cp4(void* smem, const void* gmem, bool full) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;"
                 :: "r"(hdn_saddr(smem)), "l"(gmem), "r"(full ? 4 : 0));
}
// 8-byte global -> shared copy (zero fill when !full)
__device__ __forceinline__ void hdn_cp8(void* smem, const void* gmem, bool full) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;"
                 :: "r"(hdn_saddr(smem)), "l"(gmem), "r"(full ? 8 : 0));
}
__device__ __forceinline__ void hdn_cp_commit() { asm volatile("cp.async.commit_group;"); }
template <int N> __device__ __forceinline__ void hdn_cp_wait() {
    asm volatile("cp.async.wait_group %0;" :: "n"(N));
}
__device__ __forceinline__ void hdn_ldsm4(unsigned* r, const void* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(hdn_saddr(p)));
}
__device__ __forceinline__ void hdn_ldsm4t(unsigned* r, const void* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(hdn_saddr(p)));
}
// c += a (16x16, row) * b (16x8, col)
__device__ __forceinline__ void hdn_mma16816(float* c, const unsigned* a, const unsigned* b) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." HDN_MMA_TYPE "." HDN_MMA_TYPE ".f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
// two floats -> one register of two 16-bit values (lo in the low half), round to nearest even
__device__ __forceinline__ unsigned hdn_pack2(float lo, float hi) {
    unsigned r;
    asm("cvt.rn." HDN_MMA_TYPE "x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}
// element offset (16-bit units) of chunk c (8 elements) of row r in a swizzled tile whose rows
// hold NCH chunks (NCH a multiple of 8)
template <int NCH> __device__ __forceinline__ int hdn_swz(int r, int c) {
    return (r * NCH + (c ^ (r & 7))) * 8;
}
