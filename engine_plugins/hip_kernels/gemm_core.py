"""The GEMM core: which kernel runs a GEMM-shaped op, with which tile, split and operand path.

Every GEMM-shaped op (matmul, convolution forward / backward data / backward filter) describes
itself as a :class:`~.codegen.GemmSpec` (sizes, ``a_off``/``b_off`` gathers, epilogue); this
module picks the kernel behind the one interface:

* ``wgmma`` - ``kernels/gemm_wgmma.hip`` (NVIDIA Hopper, sm_90a): warp-specialised producer
  (tensor copy engine for dense matrix operands, cp.async / element gathers for implicit-GEMM
  operands) into a >= 3-stage mbarrier ring, two consumer warpgroups issuing ``wgmma``,
  persistent tile scheduling, split-K for grids that do not fill the GPU (tile and split from
  the cost model :func:`tile_cost`), convolution operands on 4-D / 3-D tensor maps (backward
  filter, backward-data weights: ops/conv.py);
* ``mma`` - ``kernels/gemm_mma.hip`` (NVIDIA pre-Hopper 16-bit): ldmatrix + mma.sync;
* ``mfma`` - ``kernels/gemm_mfma.hip`` (AMD CDNA gfx90a / gfx942 16-bit, hiprtc; never run here);
* ``simt`` - ``kernels/gemm_simt.hip`` (fp32 FFMA, and anything else; tile and split from
  :func:`simt_config`).

fp8 inputs (FP8_E4M3 / FP8_E5M2, both operands the same type) run on the wgmma core with
``m64nNk32.e4m3`` / ``.e5m2`` on Hopper (K-major operands: M/N-major ones are transposed into
the workspace, like TF32), on ``simt`` elsewhere.  INT8 x INT8 (matmul, convolution forward)
runs on the wgmma core with ``m64nNk32.s32.s8.s8`` on Hopper (K-major like fp8; int32
accumulators, int32 split-K partials, the epilogue converts the exact int32 sum), elsewhere on
the INT8 WMMA kernel of gemm.py (``"wmma"``).

fp32 inputs run on ``simt`` (true FP32 FFMA, what hipDNN's FLOAT compute type means) unless TF32
is asked for - the engine knob ``TF32_MATH`` = 1 (engine.py) or ``HIPDNN_CABI_HIP_TF32=1`` as the
process default: then fp32 GEMMs on Hopper run on the wgmma core with ``m64nNk8.tf32``
(10-bit mantissa products, fp32 accumulation; both operands K-major, so M/N-major fp32
operands are transposed into the workspace first, see layout.py).

Knobs (environment; the tile table below is the default):

* ``HIPDNN_CABI_HIP_GEMM``: ``auto`` (default) | ``wgmma`` | ``mma`` | ``simt`` - force a core
  (a core the device or dtype cannot run falls back along wgmma -> mma -> simt);
* ``HIPDNN_CABI_HIP_TILE``: ``128x256`` | ``128x128`` | ``128x64`` - the wgmma tile (default:
  the table in :func:`tile_config`);
* ``HIPDNN_CABI_HIP_STAGES``: pipeline depth (3..8; default: as many as shared memory holds);
* ``HIPDNN_CABI_HIP_SPLITK``: ``0`` turns split-K off; ``N`` > 1 forces N parts (default: the
  cost model :func:`split_cost` for grids with fewer tiles than SMs);
* ``HIPDNN_CABI_HIP_WGRAD_TMA``: ``0`` turns the tensor-map backward filter off (ops/conv.py);
* ``HIPDNN_CABI_HIP_STRIDED_DGRAD``: ``0`` turns the strided 1 x 1 backward-data decomposition off;
* ``HIPDNN_CABI_HIP_SIMT_ROWS``: ``0`` turns the SIMT core's precomputed NCHW conv addressing off;
* ``HIPDNN_CABI_HIP_TMA``: ``0`` gathers dense operands with cp.async instead of the copy engine;
* ``HIPDNN_CABI_HIP_TMA_STORE``: ``auto`` (default: the cost model :func:`tma_store_config`
  picks it for epilogue-bound shapes) | ``1`` (wherever the output allows) | ``0`` (off) - the
  wgmma epilogue through shared memory and tensor-copy-engine stores (``WG_TMA_STORE``);
* ``HIPDNN_CABI_HIP_CONV1X1_TMA``: ``0`` gathers the activations of unit-stride unpadded 1 x 1
  convolutions (a dense [N*H*W, C] matrix) instead of loading them with the copy engine.
* ``HIPDNN_CABI_HIP_PAD``: ``auto`` | ``0`` | ``1`` - matmul operands with rows that are not
  16-byte aligned copied into zero-padded workspace rows first (:func:`pad_choice`,
  layout.pad_matmul), so the wgmma core loads them with the copy engine; 16-bit convolutions
  with channel counts that are not multiples of 8 run on channels zero-padded to one
  (layout.pad_conv: x / dy / w copies, backward filter into a padded dw copied back);
* ``HIPDNN_CABI_HIP_SWAP_AB``: ``auto`` | ``0`` | ``1`` - small-M matmuls as C^T = B^T A^T
  (:func:`swap_ab_choice`, gemm.swap_ab);
* ``HIPDNN_CABI_HIP_SPLITK_FIXUP``: ``1`` - matmul split-K on the wgmma core summed in the GEMM
  kernel by the tile's last part (``WG_FIXUP``) instead of the finish kernel (default ``0``);
* ``HIPDNN_CABI_HIP_DGRAD_IM2COL``: ``0`` keeps unit-stride backward data on the gathered
  dgrad GEMM instead of the forward convolution of dy with the transposed filter (ops/conv.py);
* ``HIPDNN_CABI_HIP_DGRAD_FUSE``: ``0`` keeps a pointwise run after backward data in its own
  elementwise kernel instead of the GEMM epilogue;
* ``HIPDNN_CABI_HIP_SIMT_NHWC``: ``auto`` | ``0`` | ``1`` - fp32 NCHW conv forward on NHWC
  workspace copies (:func:`simt_nhwc_choice`, layout.prepare_simt);
* ``HIPDNN_CABI_HIP_SIMT_MVEC``: ``0`` turns the 16-byte m-vector A of fp32 NCHW 1 x 1 convs off;
* ``HIPDNN_CABI_HIP_WGRAD_SWAP``: ``auto`` | ``0`` | ``1`` - backward filter as dw^T (ops/conv.py);
* ``HIPDNN_CABI_HIP_GROUPED_DIRECT``: ``0`` keeps narrow grouped convolutions (depthwise) on the
  tiled cores instead of the direct core (ops/conv._direct);
* ``HIPDNN_CABI_HIP_CONV_IM2COL``: ``auto`` (default: 16-bit channels-last convolution forward
  except unit-stride unpadded 1 x 1, whose x is a dense matrix on the copy engine already) |
  ``1`` (every forward conv ``ops.conv._fwd_im2col`` describes) | ``0`` (off) - the
  activations on an im2col tensor map (``WG_IM2COL``: the copy engine loads 128 output pixels
  x 64 channels per filter tap, the padding zero-filled; the producer gathers nothing) instead
  of the cp.async gathers with precomputed addressing (implicit.py), which stay the fallback
  for what a tensor map cannot describe (conv strides > 8, 16-byte misaligned strides,
  C % 8 != 0, 3-D convolutions, fp32 / fp8).  Plans on the im2col map take the TMA-store
  epilogue where the output allows it (:func:`tma_store_config`);
"""
from __future__ import annotations

import os

SMEM_LIMIT = 227 * 1024          # H100 / H200 opt-in dynamic shared memory per block
WG_BM, WG_BK = 128, 64
EPI_BYTES = 8 * 16 * 36 * 4


def knob(name, default):
    return os.environ.get("HIPDNN_CABI_HIP_" + name, default)


def tf32_default() -> bool:
    """The process-wide default of the TF32 knob (HIPDNN_CABI_HIP_TF32=1: on; default off)."""
    return knob("TF32", "0") in ("1", "on", "true")


def choose_core(dtype_a, dtype_b, arch, use_mma=True, tf32=False):
    """'wgmma' | 'mma' | 'mfma' | 'simt' for a GEMM with these input types on ``arch``
    (``sm_90``, ``sm_80``, ``gfx942``, or None = unknown NVIDIA).  ``tf32``: fp32 inputs may
    use TF32 tensor cores (Hopper wgmma only; elsewhere they stay on FFMA)."""
    want = knob("GEMM", "auto")
    hopper_ok = use_mma and want in ("auto", "wgmma") and (arch or "").startswith("sm_9")
    if dtype_a == dtype_b and dtype_a in ("FP8_E4M3", "FP8_E5M2"):
        return "wgmma" if hopper_ok else "simt"       # fp8 tensor cores: Hopper wgmma only
    if dtype_a == dtype_b == "INT8":
        # s8 wgmma on Hopper; elsewhere the INT8 WMMA kernel (gemm.int8_source), which the
        # families pick themselves ("wmma": no core of this module)
        return "wgmma" if hopper_ok else "wmma"
    if tf32 and dtype_a == dtype_b == "FLOAT" and use_mma and want in ("auto", "wgmma") \
            and (arch or "").startswith("sm_9"):
        return "wgmma"
    sixteen = dtype_a in ("HALF", "BFLOAT16") and dtype_a == dtype_b
    if not use_mma or want == "simt" or not sixteen:
        return "simt"
    arch = arch or "sm_80"
    if arch.startswith("gfx"):
        return "mfma" if arch in ("gfx90a", "gfx942") else "simt"
    hopper = arch.startswith("sm_9")
    if want == "mma" or not hopper:
        return "mma"
    return "wgmma"


def bk(es=2):
    """k per pipeline stage for ``es``-byte elements: one 128-byte swizzled row."""
    return 128 // es


def stage_bytes(bn):
    return (WG_BM + bn) * 128


def smem_bytes(bn, stages, tstore=False, stats=False):
    """Dynamic shared memory of the wgmma kernel (``WG_SMEM_BYTES``): the stage ring, the
    epilogue staging (fp32 per-warp tiles, or with the TMA-store epilogue the 128 x bn 16-bit
    output tile), the mbarriers, the per-warpgroup column sums (``stats``: WG_STATS) and the
    1024-byte alignment slack."""
    return stages * stage_bytes(bn) + (256 * bn if tstore else EPI_BYTES) + 16 * stages + \
        (16 * bn if stats else 0) + 1024


def tile_config(M, N, K, batch, sms, es=2, gather=None):
    """(BN, stages, splits, k per split) for the wgmma core: the tile table.

    ``gather`` = (a, b): the producer's cost of gathering each operand (0: the tensor copy
    engine loads it; see :data:`GATHER_ROWS` ...), given by the plan builder: then BN and the
    split count are chosen together by the cost model :func:`tile_cost` (measured against the
    ResNet-50 sweep, bench/gpu_bench.py ``convsweep``).  Without it (older callers):

    * BN in {256, 128, 64} (128 x BN tile, m64nBNk16 per consumer warpgroup): the one with the
      fewest waves x per-tile time, so wave quantisation picks smaller tiles (ResNet conv3:
      196 tiles of 128 x 128 = 1.5 waves -> 392 of 128 x 64 = 3 waves); N <= 64 -> 64;
    * stages: as many as fit in shared memory (4 for 128 x 256, 6 for 128 x 128, 8 for 128 x 64),
      at least 3;
    * split-K when the grid leaves SMs idle: S parts of whole 64-deep k tiles (>= 4 per part),
      about 2 units per SM; partials in fp32, summed by the split-K finish kernel.
    """
    tm = -(-M // WG_BM)
    t = knob("TILE", "")
    kb = bk(es)
    ksteps = -(-K // kb)
    split_on = knob("SPLITK", "1") not in ("0", "off")
    if gather is not None and sms > 0 and t not in ("128x256", "128x128", "128x64") and \
            knob("SPLITK", "1") in ("1", "0", "off", ""):
        _, bn, s = best_tile(M, N, K, batch, sms, es, gather, split_on)
        st = _stages(bn)
        per, S = K, 1
        if s > 1:
            per = -(-ksteps // s) * kb
            S = -(-K // per)
            if S <= 1:
                S, per = 1, K
        return bn, st, S, per
    if t in ("128x256", "128x128", "128x64"):
        bn = int(t.split("x")[1])
    else:
        # the N tile that minimises waves x per-tile time (~ BN + a fixed 32-column cost:
        # pipeline fill, epilogue); a grid smaller than the GPU takes split-K below instead
        cands = [b for b in (256, 128, 64) if b <= max(64, -(-N // 64) * 64)]
        best = None
        for b in cands:
            tiles = tm * -(-N // b) * batch
            if tiles < sms and b != cands[-1]:
                continue
            cost = -(-tiles // max(1, sms)) * (b + 32)
            if best is None or cost < best[0]:
                best = (cost, b)
        bn = best[1] if best else cands[-1]
        if tm * -(-N // bn) * batch < sms and N > 64:
            bn = 128
    st = _stages(bn)
    tiles = tm * -(-N // bn) * batch
    S, per = 1, K
    force = int(knob("SPLITK", "1") or 1) if knob("SPLITK", "1") not in ("0", "off", "1") else 0
    if force > 1:
        s = min(force, ksteps)
    elif knob("SPLITK", "1") not in ("0", "off") and tiles < sms:
        s = split_choice(tiles, ksteps, bn, M * N * batch, sms)
    else:
        s = 1
    if s > 1:
        per = -(-ksteps // s) * kb
        S = -(-K // per)
        if S <= 1:
            S, per = 1, K
    return bn, st, S, per


def best_tile(M, N, K, batch, sms, es, gather, split_on=True, rows=False):
    """(modelled time, BN, split parts) of the cheapest 128 x BN tile grid under
    :func:`tile_cost` (``rows``: count only the operand rows that exist, min(128, M) and
    min(BN, N), in the load term - what the orientation choice :func:`swap_ab_choice` compares)."""
    tm = -(-M // WG_BM)
    ksteps = -(-K // bk(es))
    cands = [b for b in (256, 128, 64) if b <= max(64, -(-N // 64) * 64)]
    best = None
    for b in cands:
        tiles = tm * -(-N // b) * batch
        smax = min(64, ksteps // 4) if split_on and tiles < sms else 1
        for sp in range(1, max(1, smax) + 1):
            c = tile_cost(tiles, ksteps, b, M * N * batch, sms, sp, gather,
                          (min(WG_BM, M), min(b, N)) if rows else None)
            if best is None or c < best[0] * (0.97 if sp > 1 else 1.0):
                best = (c, b, sp)
    return best


def pad_choice(M, N, K, batch, sms, es, gather, padded, nbytes, padded_mnk=None, copies=1):
    """True: copy a matrix operand that the producer could only gather element by element into
    a zero-padded 16-byte-aligned workspace buffer first (layout.pad_matmul, layout.pad_conv:
    the pack pre-pass, ``nbytes`` read and written once over ``copies`` launches) - when the
    GEMM with ``padded`` producer costs plus the copies beats the GEMM with ``gather``.
    ``padded_mnk``: the padded GEMM's (M, N, K) where padding grows them (convolution channels
    padded to a multiple of 8 are zero rows / columns the tensor cores still compute).  Knob
    ``HIPDNN_CABI_HIP_PAD``: ``auto`` (default) | ``0`` (never: element gathers) | ``1``
    (always)."""
    want = knob("PAD", "auto")
    if want in ("0", "off"):
        return False
    if want in ("1", "on"):
        return True
    sms = sms if sms > 0 else 132
    split_on = knob("SPLITK", "1") not in ("0", "off")
    Mp, Np, Kp = padded_mnk if padded_mnk is not None else (M, N, K)
    t_gather = best_tile(M, N, K, batch, sms, es, gather, split_on)[0]
    t_pad = best_tile(Mp, Np, Kp, batch, sms, es, padded, split_on)[0]
    return t_pad + 2 * nbytes / TR_BPU + TR_LAUNCH * copies < t_gather


def padded_im2col_choice(M, N, k_chunk, k_im2col, sms, es):
    """True: a convolution forward whose channels were padded to a multiple of 8
    (layout.pad_conv) loads its activations on the im2col tensor map (``k_im2col`` = taps x
    64-channel blocks: a few padded channels fill a 64-channel box with zeros the tensor cores
    still compute) rather than as 16-byte chunk gathers over the padded reduction
    (``k_chunk`` = taps x padded channels) - whichever :func:`best_tile` models faster.  Knob
    ``HIPDNN_CABI_HIP_CONV_IM2COL`` = 1 forces the map, 0 (im2col_wanted) turns it off."""
    if knob("CONV_IM2COL", "auto") in ("1", "on"):
        return True
    sms = sms if sms > 0 else 132
    split_on = knob("SPLITK", "1") not in ("0", "off")
    t_map = best_tile(M, N, k_im2col, 1, sms, es, (0.0, 0.0), split_on)[0]
    t_chunk = best_tile(M, N, k_chunk, 1, sms, es, (GATHER_CHUNK, 0.0), split_on)[0]
    return t_map <= t_chunk


def swap_ab_choice(M, N, K, batch, sms, es):
    """True: run the GEMM as C^T = B^T A^T (swap-AB: N on the 128-row side of the tile, M on the
    BN side) - for small M (decode: M = 1 .. 64) the 128-row tile of A is mostly padding that
    the tensor cores still compute, while N fills it.  Both orientations are modelled with
    :func:`best_tile` counting only the rows that exist; the swap must win by SWAP_GAIN.  Knob
    ``HIPDNN_CABI_HIP_SWAP_AB``: ``auto`` (default) | ``0`` (never) | ``1`` (whenever the plan
    builder allows it)."""
    want = knob("SWAP_AB", "auto")
    if want in ("0", "off"):
        return False
    if want in ("1", "on"):
        return True
    if M >= WG_BM or N <= M or sms <= 0 or knob("TILE", "") in ("128x256", "128x128", "128x64"):
        return False
    split_on = knob("SPLITK", "1") not in ("0", "off")
    if knob("SPLITK", "1") not in ("1", "0", "off", ""):
        return False        # a forced split count: the plain tile table, no orientation choice
    normal = best_tile(M, N, K, batch, sms, es, (0.0, 0.0), split_on, rows=True)[0]
    swapped = best_tile(N, M, K, batch, sms, es, (0.0, 0.0), split_on, rows=True)[0]
    return swapped < SWAP_GAIN * normal


def swapped_split_ok(n):
    """Split-K for a swap-AB GEMM whose BN side holds ``n`` columns (the original M): only for
    n <= SWAP_SPLIT_MAX_N, unless HIPDNN_CABI_HIP_SPLITK forces a count.  Measured on an H100
    (bench/results/gpu_h100_20261208_decode_probe.json, split-K through the finish kernel):
    M = 1 / 16 x 4096 x 4096 ran 17.5 / 16.4 us split 4 ways against 20.5 / 19.9 us unsplit,
    1 x 12288 x 12288 106 against 116 us; M = 64 ran faster unsplit - 19.0 against 22.7 us
    (4096 x 4096), 113 against 138 us (12288 x 12288), 48.7 against 49.9 us (4096 x 12288)."""
    if knob("SPLITK", "1") not in ("1", "0", "off", ""):
        return True
    return n <= SWAP_SPLIT_MAX_N


SWAP_SPLIT_MAX_N = 16


# the swap wins ties: measured on an H100, 64 x 4096 x 4096 bf16 ran 26.9 us unswapped (modelled 12.1)
# while the swapped 16 x 4096 x 4096 ran 18.6 us - the model undercounts the unswapped tile's
# half-empty rows
SWAP_GAIN = 1.0


def _stages(bn, tstore=False, stats=False):
    st = int(knob("STAGES", "0") or 0)
    if not st:
        st = 3
        while st < 8 and smem_bytes(bn, st + 1, tstore, stats) <= SMEM_LIMIT:
            st += 1
    st = max(3, min(8, st))
    while st > 3 and smem_bytes(bn, st, tstore, stats) > SMEM_LIMIT:
        st -= 1
    return st


# producer cost (microseconds per 128 rows x 128 bytes of k) of a gathered operand: precomputed
# conv addressing / 16-byte cp.async chunks (GATHER_ROWS), chunks with a generic index decode
# (GATHER_CHUNK), element gathers (GATHER_ELEM); 0 for the tensor copy engine.  L2_BPU: bytes
# per microsecond one SM's copy engine / loads bring from L2 while all SMs load.
GATHER_ROWS, GATHER_CHUNK, GATHER_ELEM, L2_BPU = 0.5, 1.0, 2.5, 75e3


def tile_cost(tiles, ksteps, bn, mn, sms, s, gather, rows=None):
    """Modelled time of a 128 x bn tile grid (``tiles`` tiles, ``ksteps`` k steps, ``s`` split
    parts) on ``sms`` persistent CTAs: whole waves of units, each unit's k steps at the slowest
    of the tensor cores, the producer's gathers and the operand loads from L2 (``rows``: the
    (A, B) rows a tile loads, default (128, bn)), + a fixed cost, the output tile's store (and
    fp32 partial when split), + the split-K finish kernel."""
    ga, gb = gather
    ra, rb = rows if rows is not None else (128, bn)
    t_k = max(T_KSTEP * bn / 64, ga + gb * bn / 128, (ra + rb) * 128 / L2_BPU)
    units = tiles * s
    waves = -(-units // sms)
    per_unit = -(-ksteps // s) * t_k + T_UNIT + 128 * bn * 2 / PART_BPU
    if s > 1:
        per_unit += 128 * bn * 4 / PART_BPU
    fin = (s * 4 + 2) * mn / FIN_BPU + T_FIN if s > 1 else 0.0
    return waves * per_unit + fin


# the TMA-store epilogue (WG_TMA_STORE): the consumers' own epilogue work per unit (fused ops,
# 16-bit staging, two named barriers) - the store itself drains under the next unit's mainloop;
# it is chosen when its modelled time is below TSTORE_GAIN x the register epilogue's
T_UNIT_TS, TSTORE_GAIN = 0.35, 0.75


def tile_cost_tstore(tiles, ksteps, bn, sms, gather):
    """:func:`tile_cost` of the TMA-store epilogue (no split): per unit the slower of its k
    steps + its own epilogue work and the output tile's store, which overlaps the next unit."""
    ga, gb = gather
    t_k = max(T_KSTEP * bn / 64, ga + gb * bn / 128, (128 + bn) * 128 / L2_BPU)
    waves = -(-tiles // sms)
    return waves * max(ksteps * t_k + T_UNIT_TS, 128 * bn * 2 / PART_BPU)


def tma_store_config(M, N, K, batch, sms, es, gather, bn, S, im2col=False):
    """(BN, stages) of the TMA-store epilogue for a GEMM whose output allows it (dense 16-bit
    rows, no split-K), or None: ``HIPDNN_CABI_HIP_TMA_STORE`` = 0 -> None, 1 -> the best BN under
    :func:`tile_cost_tstore`; auto -> that only when it beats the register epilogue's plan
    (``bn``, ``S`` from :func:`tile_config`) by the margin TSTORE_GAIN: epilogue-bound shapes
    (few k steps per output tile, e.g. 1 x 1 convolutions with C = 64) - and always for
    convolutions on the im2col tensor map (``im2col``): measured faster on every ResNet-50
    layer there (bench/results/gpu_issue20_s5.json: 7-25 % against the register epilogue,
    split-K plans included; with both operands on the copy engine the consumers' epilogue is
    what the next unit's mainloop waits for)."""
    mode = knob("TMA_STORE", "auto")
    if mode in ("0", "off") or gather is None or sms <= 0:
        return None
    tm = -(-M // WG_BM)
    ksteps = -(-K // bk(es))
    t = knob("TILE", "")
    cands = [int(t.split("x")[1])] if t in ("128x256", "128x128", "128x64") else \
        [b for b in (256, 128, 64) if b <= max(64, -(-N // 64) * 64)]
    best = None
    for b in cands:
        c = tile_cost_tstore(tm * -(-N // b) * batch, ksteps, b, sms, gather)
        if best is None or c < best[0]:
            best = (c, b)
    if mode not in ("1", "on") and not im2col:
        tiles = tm * -(-N // bn) * batch
        base = tile_cost(tiles, ksteps, bn, M * N * batch, sms, S, gather)
        if best[0] >= TSTORE_GAIN * base:
            return None
    return best[1], _stages(best[1], True)


# split-K cost model (microseconds on an H200-class part; relative values are what matter):
# one 128 x 64 x 64 k step on one SM, the fixed cost of a work unit, the fp32 partial bytes one
# SM writes per microsecond while all write, the finish kernel's bytes per microsecond and
# its launch
T_KSTEP, T_UNIT, PART_BPU, FIN_BPU, T_FIN = 0.2, 0.6, 38e3, 3.5e6, 2.5


def split_cost(tiles, ksteps, bn, mn, sms, s):
    """Modelled time of a grid of ``tiles`` output tiles (128 x bn) over ``ksteps`` k steps in
    ``s`` parts on ``sms`` persistent CTAs: whole waves of units (wave quantisation), each unit
    its k steps + a fixed cost (+ writing its fp32 partial tile when s > 1), plus the finish
    kernel that reads the s partials and writes C once."""
    units = tiles * s
    waves = -(-units // sms)
    per_unit = -(-ksteps // s) * T_KSTEP * bn / 64 + T_UNIT
    if s > 1:
        per_unit += 128 * bn * 4 / PART_BPU
    fin = (s * 4 + 2) * mn / FIN_BPU + T_FIN if s > 1 else 0.0
    return waves * per_unit + fin


def split_choice(tiles, ksteps, bn, mn, sms):
    """The split count (1..64, >= 4 k steps per part) with the least :func:`split_cost`: the
    split-K answer to wave quantisation of small grids with long k (backward filter, skinny
    GEMMs such as M = N = 256, K = 65536)."""
    best = (split_cost(tiles, ksteps, bn, mn, sms, 1), 1)
    for s in range(2, min(64, ksteps // 4) + 1):
        c = split_cost(tiles, ksteps, bn, mn, sms, s)
        if c < best[0] * 0.97:      # a split must win clearly (its partials cost memory)
            best = (c, s) if c < best[0] else best
    return best[1]


def tma_ok(dense, dtype):
    """A dense operand description (sm, sk, sb, batch) in elements can use the tensor copy
    engine: one unit-stride axis, the other strides 16-byte multiples.  sb = 0 with batch > 1 is
    a broadcast operand (one matrix for every batch index): a single-matrix tensor map read at
    batch coordinate 0 (codegen._wgmma_defs)."""
    es = {"HALF": 2, "BFLOAT16": 2, "FLOAT": 4, "FP8_E4M3": 1, "FP8_E5M2": 1, "INT8": 1}.get(dtype)
    if dense is None or knob("TMA", "1") in ("0", "off") or es is None:
        return False
    sm, sk, sb, batch = dense
    if batch > 1 and sb < 0:
        return False
    if batch > 1 and sb == 0:
        batch = 1
    rest = [s for s in (sm, sk) if s != 1] + ([sb] if batch > 1 else [])
    return (sm == 1 or sk == 1) and len([s for s in (sm, sk) if s == 1]) >= 1 and \
        all(s > 0 and (es * s) % 16 == 0 for s in rest)


def im2col_wanted(spec):
    """Knob ``HIPDNN_CABI_HIP_CONV_IM2COL``: ``auto`` (default: every convolution
    ``ops.conv._fwd_im2col`` describes except unit-stride unpadded 1 x 1 ones, whose x is a
    dense matrix on the copy engine already) | ``1`` (wherever it applies) | ``0`` (off: the
    producer's cp.async gathers with precomputed addressing)."""
    want = knob("CONV_IM2COL", "auto")
    if spec.im2col is None or want in ("0", "off"):
        return False
    return want in ("1", "on") or spec.im2col["taps"] > 1 or spec.a_dense is None


SIMT_BM, SIMT_BK = 128, 8
SIMT_EFF64 = 1.1       # a 128 x 64 tile's FFMA efficiency relative to 128 x 128 (fewer FMAs per load)


def simt_config(M, N, K, batch, sms):
    """(BN, splits, k per split) for the SIMT (FFMA) core, ``kernels/gemm_simt.hip``: the tile
    N (128, or 64 for small N and for grids whose 128-wide tiles quantise badly into waves) and
    the split count chosen together by the time model waves x k steps per part x tile width
    (+ the fp32 partials and the finish kernel when split)."""
    if sms <= 0:            # callers that never split (MoE groups fill the GPU): the 128 x 128 tile
        return 128, 1, K
    tm = -(-M // SIMT_BM)
    ksteps = -(-K // SIMT_BK)
    force = knob("SPLITK", "1")
    best = None
    for bn in (128, 64):
        if bn == 128 and N <= 64:
            continue
        tiles = tm * -(-N // bn) * batch
        if force not in ("0", "off", "1", ""):
            cands = [max(1, min(int(force), ksteps))]
        elif force in ("0", "off") or tiles > sms:
            cands = [1]
        else:
            cands = range(1, min(16, max(1, ksteps // 16)) + 1)     # >= 128 of k per part
        for sp in cands:
            per_k = -(-ksteps // sp)
            t = -(-tiles * sp // sms) * per_k * (bn / 128) * (SIMT_EFF64 if bn == 64 else 1.0)
            if sp > 1:      # k-step units of ~1 us: partials written + read, finish launch
                t += (sp * 4 + 2) * M * N * batch / 3.5e6 + 4.0
            if best is None or t < best[0] * (0.97 if sp > 1 or bn == 64 else 1.0):
                best = (t, bn, sp)
    bn, sp = best[1], best[2]
    if sp <= 1:
        return bn, 1, K
    per = -(-ksteps // sp) * SIMT_BK
    S = -(-K // per)
    return (bn, S, per) if S > 1 else (bn, 1, K)


# fp32 NCHW convolution forward on the SIMT core: transpose x (and KCRS w) into NHWC / KRSC
# workspace copies and run the channels-last kernel (16-byte k-vector loads), or gather NCHW in
# place.  Fitted to the H200 run of branch s20 (bench/results/gpu_s20.json, fp32 NCHW vs NHWC
# rows of the six ResNet-50 layers on the same core): unsplit grids lost ~20 % to the NCHW
# gather (conv2 3x3 0.303 vs 0.248 ms, conv3 0.312 vs 0.249, 1x1 s2 0.322 vs 0.271), a
# reduction of <= 128 (1 x 1 expand, K = 64) lost 120 % (0.267 vs 0.120), split-K grids nothing
# (conv4 0.264 vs 0.260, conv5 0.247 vs 0.263).  SIMT_FMA_PER_US: FFMA per microsecond the
# core sustains (~30 TFLOP/s); TR_BPU: bytes per microsecond a transpose moves (read + write);
# TR_LAUNCH: per copy.  A copy must win by NHWC_MARGIN.
SIMT_FMA_PER_US, TR_BPU, TR_LAUNCH, NHWC_MARGIN = 15e6, 2.5e6, 2.5, 1.5


def simt_nhwc_estimate(M, N, K, sms, copy_bytes, copies):
    """(gain, cost) in microseconds of running an fp32 NCHW convolution forward GEMM (M x N x K)
    on NHWC workspace copies (``copy_bytes`` in total over ``copies`` transposes)."""
    bn, S, per = simt_config(M, N, K, 1, sms)
    t = M * N * K / SIMT_FMA_PER_US
    if S > 1:
        gain = 0.0
    elif K <= 128:
        gain = 1.2 * t
    else:
        gain = 0.2 * t
    return gain, 2 * copy_bytes / TR_BPU + TR_LAUNCH * copies


def simt_nhwc_choice(M, N, K, sms, copy_bytes, copies):
    """True: run this fp32 NCHW convolution forward on NHWC copies (knob
    ``HIPDNN_CABI_HIP_SIMT_NHWC``: ``auto`` (default, :func:`simt_nhwc_estimate`) | ``0`` | ``1``)."""
    want = knob("SIMT_NHWC", "auto")
    if want in ("0", "off"):
        return False
    if want in ("1", "on"):
        return True
    gain, cost = simt_nhwc_estimate(M, N, K, sms, copy_bytes, copies)
    return gain > NHWC_MARGIN * cost
