// hdn_attn_wg_maps.h - the tile loads of the Hopper flash-attention forward
// (attention_fwd_wgmma.hip) for ragged (packed) Q / K / V and paged K / V pools, and of the
// Hopper backward's main kernel (attention_bwd_wgmma.hip) for ragged Q / K / V / dO.
//
// A tensor map cannot follow per-batch offsets or a page table, so a prep kernel
// (hdn_attn_wg_maps, below) writes, before the main kernel, copies of the host-encoded template
// maps into the workspace (aw_maps) with the global address and the row extent replaced
// (tensormap.replace):
//   ragged role (AW_<P>MODE == AW_RAGGED): one map per batch b (slot 4 b + 0 / 1 / 2 / 3 for Q /
//     K / V / dO), address = base + <P>_BOFF(b), rows = the batch's length (seq_len_q / seq_len_kv), the
//     batch extent 1 - rows past the length read as zeros (never the next batch's tokens, never
//     past the buffer);
//   paged pool (AW_<P>MODE == AW_PAGED): one map per (b, logical page p) with p AW_PS < the
//     batch's keys (slot AW_PSLOT(b, p, 0 / 1) for K / V), address = the page named by the
//     table, rows = the keys of the batch in that page (the rows past the length in the last
//     page read as zeros).  A tile of AW_BN keys is AW_BN / AW_PB boxes of AW_PB = min(page
//     size, AW_BN) rows, one per page slice; a slice past the batch's keys reloads the last
//     page's first rows (finite, masked; no box lies wholly outside its map).
// After the maps, one int per batch: 1 where the batch cannot run (a ragged offset off 16 bytes,
// a table entry naming no page of the pool): the main kernel then writes NaN rows (the mma.sync
// kernel's convention: loud, not a fault).  A workspace not 128-byte aligned: every batch NaN.
// Dense roles (AW_DENSE) load through their template map with the batch as coordinate (the
// defaults: nothing here changes a graph without ragged or paged tensors).
#pragma once
#define AW_DENSE 0
#define AW_RAGGED 1
#define AW_PAGED 2
#ifndef AW_QMODE
#define AW_QMODE AW_DENSE
#endif
#ifndef AW_KMODE
#define AW_KMODE AW_DENSE
#endif
#ifndef AW_VMODE
#define AW_VMODE AW_DENSE
#endif
#ifndef AW_GMODE
#define AW_GMODE AW_DENSE   // dO (the backward)
#endif
#define AW_MAPS (AW_QMODE != AW_DENSE || AW_KMODE != AW_DENSE || AW_VMODE != AW_DENSE || AW_GMODE != AW_DENSE)
#ifndef AW_PS
#define AW_PS 128           // page size (rows of a pool page)
#endif
#ifndef AW_NPG
#define AW_NPG 1            // map slots per batch and pool: pages of the longest batch
#endif
#ifndef NB
#define NB 1                // batches (generated)
#endif
#define AW_RAGGED_ANY (AW_QMODE == AW_RAGGED || AW_KMODE == AW_RAGGED || AW_VMODE == AW_RAGGED || \
                       AW_GMODE == AW_RAGGED)
#define AW_PAGED_ANY (AW_KMODE == AW_PAGED || AW_VMODE == AW_PAGED)
#define AW_PSLOT0 (AW_RAGGED_ANY ? 4 * NB : 0)
#define AW_PSLOT(b, p, kv) (AW_PSLOT0 + ((long long)(b) * AW_NPG + (p)) * 2 + (kv))
#define AW_NMAPS (AW_PSLOT0 + (AW_PAGED_ANY ? 2LL * NB * AW_NPG : 0))

#if HDN_CUDA && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#if AW_MAPS
#define AW_MAPS_ARG aw_maps
// a map another kernel wrote through the generic proxy, before the tensor copy engine reads it
__device__ __forceinline__ void aw_map_acquire(const hdn_tmap* m) {
    asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;"
                 :: "l"(reinterpret_cast<unsigned long long>(m)) : "memory");
}
__device__ __forceinline__ bool aw_batch_bad(const hdn_tmap* maps, int b) {
    if (reinterpret_cast<unsigned long long>(maps) & 127ull) return true;
    return reinterpret_cast<const int*>(maps + AW_NMAPS)[b] != 0;
}
#define AW_BAD(b) aw_batch_bad(aw_maps, b)
#else
#define AW_MAPS_ARG nullptr
#define AW_BAD(b) false
__device__ __forceinline__ void aw_map_acquire(const hdn_tmap*) {}
#endif
// ROWS rows from r0 of head h, batch b into NA 64-column atoms of ATOM bytes from dst; the box
// height of tm is ROWS, or PB (<= ROWS) for a paged pool; slot: 0 / 1 / 2 / 3 for Q / K / V / dO;
// nrows: the batch's rows (paged: its keys)
template <int MODE, int ROWS, int NA, int ATOM, int PB>
__device__ __forceinline__ void aw_tile(unsigned dst, const hdn_tmap* tm, const hdn_tmap* maps, int slot,
                                        int r0, int h, int b, int nrows, unsigned bar) {
    if (MODE == AW_DENSE) {
#pragma unroll
        for (int a = 0; a < NA; ++a) wg_tma4(dst + a * ATOM, tm, 64 * a, r0, h, b, bar);
    } else if (MODE == AW_RAGGED) {
        const hdn_tmap* m = maps + 4 * b + slot;
        aw_map_acquire(m);
#pragma unroll
        for (int a = 0; a < NA; ++a) wg_tma4(dst + a * ATOM, m, 64 * a, r0, h, 0, bar);
    } else {
#pragma unroll 1
        for (int i = 0; i < ROWS / PB; ++i) {
            // a slice past the keys (the last tile, pages smaller than the tile) loads the last
            // page's first rows again: this batch's keys or zeros, finite, their scores masked
            const int kr = r0 + i * PB < nrows ? r0 + i * PB : (nrows - 1) / AW_PS * AW_PS;
            const hdn_tmap* m = maps + AW_PSLOT(b, kr / AW_PS, slot - 1);
            aw_map_acquire(m);
#pragma unroll
            for (int a = 0; a < NA; ++a) wg_tma4(dst + a * ATOM + i * PB * 128, m, 64 * a, kr % AW_PS, h, 0, bar);
        }
    }
}
#define AW_PB (AW_PS < AW_BN ? AW_PS : AW_BN)
// the forward's tiles (attention_fwd_wgmma.hip names in scope: tmQ / tmK / tmV, h, hk, b, L)
#define AW_TILE_Q(dst, r0, bar) \
    aw_tile<AW_QMODE, AW_BM, AW_NK, AW_QATOM, AW_BM>(dst, &tmQ, AW_MAPS_ARG, 0, r0, h, b, L.sq, bar)
#define AW_TILE_K(dst, r0, bar) \
    aw_tile<AW_KMODE, AW_BN, AW_NK, AW_ATOM, AW_PB>(dst, &tmK, AW_MAPS_ARG, 1, r0, hk, b, L.skv, bar)
#define AW_TILE_V(dst, r0, bar) \
    aw_tile<AW_VMODE, AW_BN, AW_NV, AW_ATOM, AW_PB>(dst, &tmV, AW_MAPS_ARG, 2, r0, hk, b, L.skv, bar)

#if AW_MAPS
// the prep kernel's copy of a template map with the address and the row extent replaced, written
// to dst by the whole warp (sm: this warp's 128-byte aligned shared-memory slot)
__device__ __forceinline__ void aw_write_map(hdn_tmap* dst, const hdn_tmap* tmpl, hdn_tmap* sm,
                                             unsigned long long addr, int rows, int lane) {
    const unsigned s = wg_saddr(sm);
    if (lane == 0) {
#pragma unroll
        for (int i = 0; i < 16; ++i) sm->v[i] = tmpl->v[i];
        asm volatile("tensormap.replace.tile.global_address.shared::cta.b1024.b64 [%0], %1;"
                     :: "r"(s), "l"(addr) : "memory");
        asm volatile("tensormap.replace.tile.global_dim.shared::cta.b1024.b32 [%0], 1, %1;"
                     :: "r"(s), "r"(rows) : "memory");
    }
    __syncwarp();
    asm volatile("tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned "
                 "[%0], [%1], 128;" :: "l"(reinterpret_cast<unsigned long long>(dst)), "r"(s) : "memory");
    __syncwarp();
}
// The maps of batch b = blockIdx.x (grid (B), 128 threads): the flag first (every page of the
// batch's keys in the pool, the ragged offsets 16-byte aligned), then one map per warp at a time
// (jobs 0..3: ragged Q / K / V / dO; 4 + 2 p + kv: page p of K / V).  Parameters
// HDN_ATTN_WG_MAPS_PARAMS: the template maps tmQ / tmK / tmV (tmG: the backward's dO), the data
// pointers Qp / Kp / Vp (Gp), the maps aw_maps, the lengths, then the offsets / page tables.
extern "C" __global__ void hdn_attn_wg_maps(HDN_ATTN_WG_MAPS_PARAMS) {
    __shared__ __align__(128) hdn_tmap sm[4];
    const int b = blockIdx.x, tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    if (reinterpret_cast<unsigned long long>(aw_maps) & 127ull) return;   // (every batch NaN)
    const HdnAttnLim L = hdn_attn_limits(b HDN_ATTN_LEN_ARGS);
    int bad = 0;
#if AW_KMODE == AW_PAGED
    for (int p = tid; p * AW_PS < L.skv; p += 128) {
        const long long pg = (long long)kpt[(long long)b * KPT_SB + (long long)p * KPT_SS];
        bad |= pg < 0 || pg >= KV_PAGES;
    }
#endif
#if AW_VMODE == AW_PAGED
    for (int p = tid; p * AW_PS < L.skv; p += 128) {
        const long long pg = (long long)vpt[(long long)b * VPT_SB + (long long)p * VPT_SS];
        bad |= pg < 0 || pg >= KV_PAGES;
    }
#endif
    bad = __syncthreads_or(bad || !HDN_RAGGED_OK(b));
    if (tid == 0) reinterpret_cast<int*>(aw_maps + AW_NMAPS)[b] = bad;
    if (bad) return;
    const int np = (L.skv + AW_PS - 1) / AW_PS;
#pragma unroll 1
    for (int j = warp; j < 4 + 2 * np; j += 4) {
        if (j < 4) {
#if AW_QMODE == AW_RAGGED
            if (j == 0)
                aw_write_map(aw_maps + 4 * b, &tmQ, &sm[warp], reinterpret_cast<unsigned long long>(Qp + Q_BOFF(b)),
                             hdn_imax(L.sq, 1), lane);
#endif
#if AW_KMODE == AW_RAGGED
            if (j == 1)
                aw_write_map(aw_maps + 4 * b + 1, &tmK, &sm[warp], reinterpret_cast<unsigned long long>(Kp + K_BOFF(b)),
                             hdn_imax(L.skv, 1), lane);
#endif
#if AW_VMODE == AW_RAGGED
            if (j == 2)
                aw_write_map(aw_maps + 4 * b + 2, &tmV, &sm[warp], reinterpret_cast<unsigned long long>(Vp + V_BOFF(b)),
                             hdn_imax(L.skv, 1), lane);
#endif
#if AW_GMODE == AW_RAGGED
            if (j == 3)
                aw_write_map(aw_maps + 4 * b + 3, &tmG, &sm[warp], reinterpret_cast<unsigned long long>(Gp + G_BOFF(b)),
                             hdn_imax(L.sq, 1), lane);
#endif
        } else {
            const int p = (j - 4) >> 1, rows = hdn_imin(AW_PS, L.skv - p * AW_PS);
#if AW_KMODE == AW_PAGED
            if (!((j - 4) & 1))
                aw_write_map(aw_maps + AW_PSLOT(b, p, 0), &tmK, &sm[warp], reinterpret_cast<unsigned long long>(
                    Kp + (long long)kpt[(long long)b * KPT_SB + (long long)p * KPT_SS] * KSB), rows, lane);
#endif
#if AW_VMODE == AW_PAGED
            if ((j - 4) & 1)
                aw_write_map(aw_maps + AW_PSLOT(b, p, 1), &tmV, &sm[warp], reinterpret_cast<unsigned long long>(
                    Vp + (long long)vpt[(long long)b * VPT_SB + (long long)p * VPT_SS] * VSB), rows, lane);
#endif
        }
    }
}
#endif
#endif
