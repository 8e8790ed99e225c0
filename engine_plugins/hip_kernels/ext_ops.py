"""The HIP engine's issue-17 operation families, wired into program.py through four tables:
IO (tensor roles), TYPES (data types beyond FLOAT/HALF/BFLOAT16 a kind accepts), CHECK
(structure check at analysis; ValueError -> not applicable) and EMIT (kernel emission).

* rownorm.py    - layernorm / RMSnorm forward and backward (block-reduction core hdn_reduce.h)
* pool.py       - resample forward / backward (max / average pooling, 2-D / 3-D)
* blockscale.py - block-scale quantize / dequantize (hdn_minifloat.h, bit-exact with the CPU)
* moe.py        - MoE grouped matmul on the GEMM core (through moe.gemm_spec)
"""
from __future__ import annotations

from .ops import block_scale as blockscale, moe, norms as rownorm, resample as pool

IO = {**rownorm.KINDS, **pool.KINDS, **blockscale.KINDS, **moe.KINDS}
TYPES = {k: ("INT32", "INT64") for k in pool.KINDS}
TYPES.update({k: blockscale.TYPES for k in blockscale.KINDS})
TYPES.update({k: ("INT32",) for k in moe.KINDS})
CHECK = {**{k: rownorm.check for k in rownorm.KINDS}, **{k: pool.check for k in pool.KINDS},
         **{k: blockscale.check for k in blockscale.KINDS}, **{k: moe.check for k in moe.KINDS}}
EMIT = {**{k: rownorm.emit for k in rownorm.KINDS}, **{k: pool.emit for k in pool.KINDS},
        **{k: blockscale.emit for k in blockscale.KINDS}, **{k: moe.emit for k in moe.KINDS}}
