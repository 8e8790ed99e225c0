#!/usr/bin/env python3
"""Micro benchmark of the CPU reference kernels (not a test).

Times conv2d forward on the ResNet-50 layer shapes (batch 8, float32, NCHW and
NHWC inputs), dgrad/wgrad on four of them, a few pointwise modes and batchnorm, and - when ``torch`` is
importable - the same work on torch CPU with the same thread count.  Writes
JSON to ``bench/results/cpu_reference.json`` (``--out`` to change).

    .venv/bin/python bench/cpu_reference_bench.py [--threads N] [--repeat R] [--quick]

The thread count is applied to OpenBLAS/OpenMP through environment variables
set before numpy is imported, and to torch with ``torch.set_num_threads``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _parse():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per case (best is reported)")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--quick", action="store_true", help="only a few conv shapes")
    ap.add_argument("--no-torch", action="store_true", help="skip the torch comparison")
    ap.add_argument("--out", default=os.path.join(_ROOT, "bench", "results", "cpu_reference.json"))
    return ap.parse_args()


ARGS = _parse()
for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, str(ARGS.threads))

import numpy as np  # noqa: E402

sys.path.insert(0, _ROOT)
from engine_plugins.cpu_reference.kernels import batchnorm, conv, pointwise  # noqa: E402

try:  # optional comparison
    if ARGS.no_torch:
        raise ImportError
    import torch  # type: ignore
    import torch.nn.functional as F  # type: ignore

    torch.set_num_threads(ARGS.threads)
except ImportError:  # pragma: no cover - depends on the environment
    torch = None

# (name, C, K, H=W, R, stride, pad) - torchvision ResNet-50 (v1.5: stride on the 3x3)
RESNET50 = [
    ("conv1_7x7_s2", 3, 64, 224, 7, 2, 3),
    ("l1_1x1_64_64", 64, 64, 56, 1, 1, 0),
    ("l1_3x3_64_64", 64, 64, 56, 3, 1, 1),
    ("l1_1x1_64_256", 64, 256, 56, 1, 1, 0),
    ("l1_1x1_256_64", 256, 64, 56, 1, 1, 0),
    ("l2_1x1_256_128", 256, 128, 56, 1, 1, 0),
    ("l2_3x3_128_128_s2", 128, 128, 56, 3, 2, 1),
    ("l2_1x1_128_512", 128, 512, 28, 1, 1, 0),
    ("l2_down_1x1_256_512_s2", 256, 512, 56, 1, 2, 0),
    ("l2_3x3_128_128", 128, 128, 28, 3, 1, 1),
    ("l3_3x3_256_256", 256, 256, 14, 3, 1, 1),
    ("l3_1x1_256_1024", 256, 1024, 14, 1, 1, 0),
    ("l3_1x1_1024_256", 1024, 256, 14, 1, 1, 0),
    ("l4_3x3_512_512", 512, 512, 7, 3, 1, 1),
    ("l4_1x1_512_2048", 512, 2048, 7, 1, 1, 0),
    ("l4_1x1_2048_512", 2048, 512, 7, 1, 1, 0),
]
QUICK = {"conv1_7x7_s2", "l1_3x3_64_64", "l3_1x1_256_1024", "l4_3x3_512_512"}


def _best(fn, repeat):
    fn()  # warm-up
    times = []
    for _ in range(max(1, repeat)):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def _nhwc(a):
    """Same logical array, channels-last memory (a strided view)."""
    return np.ascontiguousarray(np.moveaxis(a, 1, -1)).transpose(0, 3, 1, 2)


def bench_conv(rng, results):
    N = ARGS.batch
    for name, C, K, H, R, s, p in RESNET50:
        if ARGS.quick and name not in QUICK:
            continue
        x = rng.standard_normal((N, C, H, H), dtype=np.float32)
        w = (rng.standard_normal((K, C, R, R), dtype=np.float32) * 0.05).astype(np.float32)
        O = (H + 2 * p - R) // s + 1
        flop = 2.0 * N * K * O * O * C * R * R
        entry = {"op": "conv2d_fwd", "name": name, "x": [N, C, H, H], "w": [K, C, R, R],
                 "stride": s, "pad": p, "gflop": flop / 1e9}
        for lay, xa in (("nchw", x), ("nhwc", _nhwc(x))):
            t = _best(lambda: conv.conv_fwd(xa, w, p, p, s, 1), ARGS.repeat)
            entry[f"numpy_{lay}_s"] = t
            entry[f"numpy_{lay}_gflops"] = flop / t / 1e9
        if torch is not None:
            tx, tw = torch.from_numpy(x), torch.from_numpy(w)
            with torch.no_grad():
                t = _best(lambda: F.conv2d(tx, tw, stride=s, padding=p), ARGS.repeat)
            entry["torch_s"] = t
            entry["torch_gflops"] = flop / t / 1e9
            entry["numpy_nchw_over_torch"] = entry["numpy_nchw_s"] / t
        results.append(entry)
        _print(entry)


def bench_conv_bwd(rng, results):
    """dgrad / wgrad on a few of the shapes (numpy vs torch.nn.grad when present)."""
    N = ARGS.batch
    for name, C, K, H, R, s, p in RESNET50:
        if name not in QUICK:
            continue
        x = rng.standard_normal((N, C, H, H), dtype=np.float32)
        w = (rng.standard_normal((K, C, R, R), dtype=np.float32) * 0.05).astype(np.float32)
        O = (H + 2 * p - R) // s + 1
        dy = rng.standard_normal((N, K, O, O), dtype=np.float32)
        flop = 2.0 * N * K * O * O * C * R * R
        for op, fn in (("conv2d_bwd_data", lambda: conv.conv_bwd_data(dy, w, x.shape, p, p, s, 1)),
                       ("conv2d_bwd_filter", lambda: conv.conv_bwd_filter(x, dy, w.shape, p, p, s, 1))):
            entry = {"op": op, "name": name, "x": [N, C, H, H], "w": [K, C, R, R], "stride": s, "pad": p,
                     "gflop": flop / 1e9}
            t = _best(fn, ARGS.repeat)
            entry["numpy_s"] = t
            entry["numpy_gflops"] = flop / t / 1e9
            if torch is not None:
                tx, tw, tdy = torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(dy)
                if op == "conv2d_bwd_data":
                    tfn = lambda: torch.nn.grad.conv2d_input(tx.shape, tw, tdy, stride=s, padding=p)  # noqa: E731
                else:
                    tfn = lambda: torch.nn.grad.conv2d_weight(tx, tw.shape, tdy, stride=s, padding=p)  # noqa: E731
                with torch.no_grad():
                    entry["torch_s"] = _best(tfn, ARGS.repeat)
                entry["numpy_over_torch"] = t / entry["torch_s"]
            results.append(entry)
            _print(entry)


def bench_pointwise(rng, results):
    shape = (ARGS.batch, 256, 56, 56)
    x = rng.standard_normal(shape, dtype=np.float32)
    b = rng.standard_normal((1, 256, 1, 1), dtype=np.float32)
    cases = [
        ("HIPDNN_POINTWISE_RELU_FWD", (x,), lambda tx, tb: torch.relu(tx)),
        ("HIPDNN_POINTWISE_ADD", (x, b), lambda tx, tb: tx + tb),
        ("HIPDNN_POINTWISE_GELU_FWD", (x,), lambda tx, tb: F.gelu(tx)),
        ("HIPDNN_POINTWISE_SIGMOID_FWD", (x,), lambda tx, tb: torch.sigmoid(tx)),
    ]
    for mode, inputs, tfn in cases:
        entry = {"op": "pointwise", "name": mode, "shape": list(shape), "elements": x.size}
        t = _best(lambda: pointwise.pointwise(mode, *inputs), ARGS.repeat)
        entry["numpy_s"] = t
        entry["numpy_gelem_per_s"] = x.size / t / 1e9
        if torch is not None:
            tx, tb = torch.from_numpy(x), torch.from_numpy(b)
            t = _best(lambda: tfn(tx, tb), ARGS.repeat)
            entry["torch_s"] = t
            entry["numpy_over_torch"] = entry["numpy_s"] / t
        results.append(entry)
        _print(entry)


def bench_batchnorm(rng, results):
    shape = (ARGS.batch, 256, 56, 56)
    C = shape[1]
    x = rng.standard_normal(shape, dtype=np.float32)
    scale = rng.uniform(0.5, 1.5, C).astype(np.float32)
    bias = rng.uniform(-1, 1, C).astype(np.float32)
    mean = rng.uniform(-1, 1, C).astype(np.float32)
    var = rng.uniform(0.5, 2, C).astype(np.float32)
    dy = rng.standard_normal(shape, dtype=np.float32)
    r = batchnorm.batchnorm_train_fwd(x, scale, bias, 1e-5)
    cases = [
        ("inference", lambda: batchnorm.batchnorm_inference_variance(x, scale, bias, mean, var, 1e-5),
         lambda tx: F.batch_norm(tx, tm, tv, ts, tb, training=False, eps=1e-5)),
        ("train_fwd", lambda: batchnorm.batchnorm_train_fwd(x, scale, bias, 1e-5, 0.1, mean, var),
         lambda tx: F.batch_norm(tx, tm.clone(), tv.clone(), ts, tb, training=True, momentum=0.1, eps=1e-5)),
        ("bwd", lambda: batchnorm.batchnorm_bwd(dy, x, scale, r.mean, r.inv_variance), None),
    ]
    if torch is not None:
        ts, tb, tm, tv = (torch.from_numpy(a) for a in (scale, bias, mean, var))
    for name, fn, tfn in cases:
        entry = {"op": "batchnorm", "name": name, "shape": list(shape)}
        entry["numpy_s"] = _best(fn, ARGS.repeat)
        if torch is not None and tfn is not None:
            tx = torch.from_numpy(x)
            with torch.no_grad():
                entry["torch_s"] = _best(lambda: tfn(tx), ARGS.repeat)
            entry["numpy_over_torch"] = entry["numpy_s"] / entry["torch_s"]
        results.append(entry)
        _print(entry)


def _print(entry):
    keys = [k for k in entry if k.endswith("_s") or k.endswith("gflops") or k.endswith("over_torch")]
    print(f"{entry['op']:>11} {entry['name']:<28} " + " ".join(f"{k}={entry[k]:.4g}" for k in keys), flush=True)


def main():
    rng = np.random.default_rng(0)
    results: list[dict] = []
    t0 = time.perf_counter()
    bench_conv(rng, results)
    bench_conv_bwd(rng, results)
    bench_pointwise(rng, results)
    bench_batchnorm(rng, results)
    meta = {
        "threads": ARGS.threads,
        "batch": ARGS.batch,
        "repeat": ARGS.repeat,
        "quick": ARGS.quick,
        "numpy": np.__version__,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "torch": None if torch is None else torch.__version__,
        "torch_skipped_reason": None if torch is not None else ("--no-torch" if ARGS.no_torch else "not importable"),
        "total_wall_s": time.perf_counter() - t0,
        "timing": "best of --repeat runs after one warm-up, seconds",
    }
    os.makedirs(os.path.dirname(os.path.abspath(ARGS.out)), exist_ok=True)
    with open(ARGS.out, "w") as f:
        json.dump({"meta": meta, "results": results}, f, indent=1)
    print(f"wrote {ARGS.out} ({len(results)} cases, {meta['total_wall_s']:.1f} s)")


if __name__ == "__main__":
    main()
