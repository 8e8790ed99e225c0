"""By-hand H200 check of the Hopper flash-attention forward (attention_fwd_wgmma.hip): a few
shapes through both kernels (wgmma, mma.sync forced) against the CPU reference, printing the
relative error and, on a mismatch, where it sits (query-row blocks x key-column blocks of O)."""
from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from engine_plugins.cpu_reference.kernels import sdpa as ksdpa  # noqa: E402
import test_attention as ta  # noqa: E402
from gpu_testlib import quantize, relerr  # noqa: E402


def main():
    from gpu_run import Runner
    R = Runner()
    rng = np.random.default_rng(5)
    cases = [dict(dt="HALF", B=1, H=2, Hkv=2, Sq=128, Skv=128, D=64),
             dict(dt="HALF", B=1, H=2, Hkv=2, Sq=128, Skv=128, D=128),
             dict(dt="HALF", B=1, H=2, Hkv=2, Sq=256, Skv=640, D=128),
             dict(dt="BFLOAT16", B=1, H=2, Hkv=1, Sq=200, Skv=300, D=64, causal_mask=True)]
    for c in cases:
        for path in ("auto", "mma"):
            os.environ["HIPDNN_CABI_HIP_ATTN"] = path
            ts, g = ta.fwd_graph(**c)
            q, k, v = (quantize(rng.uniform(-1, 1, t.dims) * s, c["dt"]) for t, s in zip(ts[:3], (2, 2, 1)))
            res = R.run(g, {ts[0]: q, ts[1]: k, ts[2]: v}, [ts[3], ts[4]])
            p = ta._params(c, c["D"])
            O, st, _, _ = ksdpa.sdpa_fwd(q, k, v, p, np.float64)
            e = relerr(res[4], O)
            fin = np.isfinite(st)
            es = float(np.max(np.abs(res[5][fin] - st[fin]))) if fin.any() else 0.0
            print(f"{path:5s} {c}: O relerr {e:.2e}  stats maxerr {es:.2e}", flush=True)
            if e > 1e-2 or not np.isfinite(e):
                d = np.abs(res[4] - O)[0, 0]
                nr, nc = -(-d.shape[0] // 16), -(-d.shape[1] // 16)
                blk = np.array([[np.nanmax(d[16 * i:16 * i + 16, 16 * j:16 * j + 16]) for j in range(nc)]
                                for i in range(nr)])
                np.set_printoptions(linewidth=250, precision=2)
                print("  max |err| per 16x16 block of O[0,0] (rows x d):\n", blk)
                print("  O[0,0,0,:8] got", res[4][0, 0, 0, :8], "want", O[0, 0, 0, :8])
                print("  stats got", res[5][0, 0, :4, 0], "want", st[0, 0, :4, 0])
    os.environ.pop("HIPDNN_CABI_HIP_ATTN", None)


if __name__ == "__main__":
    main()
