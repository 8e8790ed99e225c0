"""Helpers for tests/frontend (numpy references and the engine check)."""
from __future__ import annotations

import functools
import os
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CPU_ENGINE = "HIPDNN_CABI_CPU_REFERENCE_ENGINE"


@functools.lru_cache(maxsize=None)
def cpu_engine_loaded() -> bool:
    """Asked in a child process so the test process's plugin state is not touched first."""
    code = ("from hipdnn_cabi import frontend as hf; "
            f"print(any(e.name == {CPU_ENGINE!r} for e in hf.engines()))")
    try:
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                           cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT})
        return r.stdout.strip().endswith("True")
    except Exception:
        return False


def rng(seed=0):
    return np.random.default_rng(seed)


def rand(r, shape, lo=-1.0, hi=1.0, dtype=np.float32):
    return r.uniform(lo, hi, shape).astype(dtype)


def conv2d_ref(x, w, pad=(0, 0), stride=(1, 1), dil=(1, 1)):
    x, w = x.astype(np.float64), w.astype(np.float64)
    N, C, H, W = x.shape
    K, _, R, S = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    OH = (H + 2 * pad[0] - dil[0] * (R - 1) - 1) // stride[0] + 1
    OW = (W + 2 * pad[1] - dil[1] * (S - 1) - 1) // stride[1] + 1
    y = np.zeros((N, K, OH, OW))
    for r in range(R):
        for s in range(S):
            h0, w0 = r * dil[0], s * dil[1]
            patch = xp[:, :, h0:h0 + stride[0] * (OH - 1) + 1:stride[0],
                       w0:w0 + stride[1] * (OW - 1) + 1:stride[1]]
            y += np.einsum("nchw,kc->nkhw", patch, w[:, :, r, s])
    return y


def conv2d_dgrad_ref(dy, w, x_shape, pad=(0, 0), stride=(1, 1), dil=(1, 1)):
    dy, w = dy.astype(np.float64), w.astype(np.float64)
    N, C, H, W = x_shape
    K, _, R, S = w.shape
    OH, OW = dy.shape[2:]
    dxp = np.zeros((N, C, H + 2 * pad[0], W + 2 * pad[1]))
    for r in range(R):
        for s in range(S):
            h0, w0 = r * dil[0], s * dil[1]
            dxp[:, :, h0:h0 + stride[0] * (OH - 1) + 1:stride[0],
                w0:w0 + stride[1] * (OW - 1) + 1:stride[1]] += np.einsum("nkhw,kc->nchw", dy, w[:, :, r, s])
    return dxp[:, :, pad[0]:pad[0] + H, pad[1]:pad[1] + W]


def conv2d_wgrad_ref(x, dy, w_shape, pad=(0, 0), stride=(1, 1), dil=(1, 1)):
    x, dy = x.astype(np.float64), dy.astype(np.float64)
    K, C, R, S = w_shape
    OH, OW = dy.shape[2:]
    xp = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    dw = np.zeros(w_shape)
    for r in range(R):
        for s in range(S):
            h0, w0 = r * dil[0], s * dil[1]
            patch = xp[:, :, h0:h0 + stride[0] * (OH - 1) + 1:stride[0],
                       w0:w0 + stride[1] * (OW - 1) + 1:stride[1]]
            dw[:, :, r, s] = np.einsum("nkhw,nchw->kc", dy, patch)
    return dw


def close(a, b, rtol=1e-4, atol=1e-4):
    np.testing.assert_allclose(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64),
                               rtol=rtol, atol=atol)
