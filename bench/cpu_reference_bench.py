#!/usr/bin/env python3
"""Micro benchmark of the CPU reference kernels (not a test).

Times conv2d forward on the ResNet-50 layer shapes (batch 8, float32, NCHW and
NHWC inputs), dgrad/wgrad on four of them, a few pointwise modes and batchnorm, and - when ``torch`` is
importable - the same work on torch CPU with the same thread count.  Writes
JSON to ``bench/results/cpu_reference.json`` (``--out`` to change) and, when matplotlib is
importable, a chart next to it (``.png``).

Ratios are *throughput* ratios ``torch_s / numpy_s`` (``ratio_vs_torch``: 1.0 = as fast as
PyTorch CPU, 0.5 = half its throughput).  Pointwise and batchnorm are also timed through the
engine itself (``engine_s``: the CPU reference plugin's plan executing a one-node graph on
host buffers, in-process), which is what a C caller gets minus the C-ABI call overhead.

torch is not a project dependency; install it next to the project for the benchmark only, e.g.
``pip install --target /tmp/torchpkgs torch==2.13.0`` and run with ``PYTHONPATH=/tmp/torchpkgs``.

    .venv/bin/python bench/cpu_reference_bench.py [--threads N] [--repeat R] [--quick]

The thread count is applied to OpenBLAS/OpenMP through environment variables
set before numpy is imported, and to torch with ``torch.set_num_threads``.
"""

from __future__ import annotations

import argparse
import contextlib
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
    ap.add_argument("--only", choices=("conv", "pointwise", "batchnorm", "sdpa"), action="append",
                    help="run only these groups (repeatable; default all)")
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
            entry["ratio_vs_torch"] = t / entry["numpy_nchw_s"]
            entry["ratio_vs_torch_nhwc"] = t / entry["numpy_nhwc_s"]
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
                entry["ratio_vs_torch"] = entry["torch_s"] / t
            results.append(entry)
            _print(entry)


def _best_rounds(fns, repeat, rounds=3):
    """{name: best seconds} for callables timed in alternating rounds: each round times every
    callable *repeat* times in a row (after a warm-up) and then pauses, so that this machine's
    drift hits every side alike while torch's idle OpenMP workers (they spin for a while after
    each parallel region, on the same two cores) have gone to sleep before numpy's threads run."""
    got = {k: float("inf") for k in fns}
    per = max(1, -(-repeat // rounds))
    for _ in range(rounds):
        for k, f in fns.items():
            got[k] = min(got[k], _best(f, per))
            time.sleep(0.05)
    return got


PW_REPEAT = 15   # pointwise / batchnorm cases are a few ms: more rounds, the best one counts


def bench_pointwise(rng, results):
    from engine_plugins.cpu_reference.kernels import blocked

    shape = (ARGS.batch, 256, 56, 56)
    x = rng.standard_normal(shape, dtype=np.float32)
    b = rng.standard_normal((1, 256, 1, 1), dtype=np.float32)
    out = np.empty_like(x)
    cases = [
        ("HIPDNN_POINTWISE_RELU_FWD", (x,), lambda tx, tb: torch.relu(tx),
         lambda tx, tb, to: torch.clamp_min(tx, 0.0, out=to)),
        ("HIPDNN_POINTWISE_ADD", (x, b), lambda tx, tb: tx + tb,
         lambda tx, tb, to: torch.add(tx, tb, out=to)),
        ("HIPDNN_POINTWISE_GELU_FWD", (x,), lambda tx, tb: F.gelu(tx),
         lambda tx, tb, to: torch._C._nn.gelu(tx, out=to)),
        ("HIPDNN_POINTWISE_SIGMOID_FWD", (x,), lambda tx, tb: torch.sigmoid(tx),
         lambda tx, tb, to: torch.sigmoid(tx, out=to)),
    ]
    repeat = max(ARGS.repeat, PW_REPEAT)
    for mode, inputs, tfn, tfn_out in cases:
        entry = {"op": "pointwise", "name": mode, "shape": list(shape), "elements": x.size}
        t = _best(lambda: pointwise.pointwise(mode, *inputs, out=out), repeat)
        entry["numpy_s"] = t
        entry["numpy_gelem_per_s"] = x.size / t / 1e9
        sides = {}
        run = _engine_pointwise(mode[len("HIPDNN_POINTWISE_"):], inputs)
        if run is not None:
            sides["engine"] = run
        if mode.endswith(("GELU_FWD", "SIGMOID_FWD")):
            # Lower bound for any numpy evaluation: numpy's own float32 exp over the tensor, split
            # over the same threads (sigmoid needs exp; an accurate erf needs exp or a ~20-pass
            # rational), so no numpy formula of this mode can beat it.
            xf, of = x.reshape(-1), out.reshape(-1)
            sides["exp_whole"] = lambda: blocked.par_ufunc(np.exp, x, out=out)
            sides["exp_blocks"] = lambda: blocked.run(
                lambda s, e: np.exp(xf[s:e], out=of[s:e]), xf.size, block=1 << 16)
        if torch is not None:
            tx, tb, to = torch.from_numpy(x), torch.from_numpy(b), torch.from_numpy(out)
            sides["torch_alloc"] = lambda: tfn(tx, tb)
            sides["torch_out"] = lambda: tfn_out(tx, tb, to)
        got = _best_rounds(sides, repeat)
        if "engine" in got:
            entry["engine_s"] = got["engine"]
        if "exp_whole" in got:
            entry["numpy_exp_floor_s"] = min(got["exp_whole"], got["exp_blocks"])
        if torch is not None:
            entry["torch_alloc_s"], entry["torch_out_s"] = got["torch_alloc"], got["torch_out"]
            t = entry["torch_s"] = min(got["torch_alloc"], got["torch_out"])
            entry["numpy_over_torch"] = entry["numpy_s"] / t
            entry["ratio_vs_torch"] = t / entry.get("engine_s", entry["numpy_s"])
            if "numpy_exp_floor_s" in entry:
                entry["floor_ratio_vs_torch"] = t / entry["numpy_exp_floor_s"]
        results.append(entry)
        _print(entry)


def _bn_variants(x, scale, bias, out):
    """The per-channel y = a*x + c (batchnorm inference once a, c are folded) in every numpy
    arrangement tried: whole-array passes split over the threads, and per-thread row blocks of
    several sizes (the second pass in cache).  {name: callable}."""
    from engine_plugins.cpu_reference.kernels import blocked

    N, C = x.shape[:2]
    x2, o2 = x.reshape(N * C, -1), out.reshape(N * C, -1)
    A2 = np.tile(scale, N)[:, None]
    C2 = np.tile(bias, N)[:, None]
    R = x2.shape[0]
    T = blocked.num_threads()

    def whole():
        blocked.par_ufunc(np.multiply, x2, A2, out=o2)
        blocked.par_ufunc(np.add, o2, C2, out=o2)

    def rows(rb):
        def part(lo, hi):
            for r0 in range(lo, hi, rb):
                r1 = min(hi, r0 + rb)
                o = o2[r0:r1]
                np.multiply(x2[r0:r1], A2[r0:r1], out=o)
                np.add(o, C2[r0:r1], out=o)

        def run():
            per = -(-R // T)
            cuts = [(k * per, min(R, (k + 1) * per)) for k in range(T)]
            pool = blocked._get_pool(max(1, T - 1))
            futs = [pool.submit(part, lo, hi) for lo, hi in cuts[1:]]
            part(*cuts[0])
            for f in futs:
                f.result()
        return run

    v = {"two_whole_passes": whole}
    for rb in (8, 32, 64, 128):
        v[f"row_blocks_{rb}"] = rows(rb)
    v["one_pass_only (not a result: a*x without +c)"] = (
        lambda: blocked.par_ufunc(np.multiply, x2, A2, out=o2))
    return v


def bench_batchnorm(rng, results):
    shape = (ARGS.batch, 256, 56, 56)
    C = shape[1]
    x = rng.standard_normal(shape, dtype=np.float32)
    scale = rng.uniform(0.5, 1.5, C).astype(np.float32)
    bias = rng.uniform(-1, 1, C).astype(np.float32)
    mean = rng.uniform(-1, 1, C).astype(np.float32)
    var = rng.uniform(0.5, 2, C).astype(np.float32)
    dy = rng.standard_normal(shape, dtype=np.float32)
    out = np.empty_like(x)
    r = batchnorm.batchnorm_train_fwd(x, scale, bias, 1e-5)
    cases = [
        ("inference", lambda: batchnorm.batchnorm_inference_variance(x, scale, bias, mean, var, 1e-5,
                                                                     out=out),
         lambda tx: F.batch_norm(tx, tm, tv, ts, tb, training=False, eps=1e-5)),
        ("train_fwd", lambda: batchnorm.batchnorm_train_fwd(x, scale, bias, 1e-5, 0.1, mean, var),
         lambda tx: F.batch_norm(tx, tm.clone(), tv.clone(), ts, tb, training=True, momentum=0.1, eps=1e-5)),
        ("bwd", lambda: batchnorm.batchnorm_bwd(dy, x, scale, r.mean, r.inv_variance), None),
    ]
    if torch is not None:
        ts, tb, tm, tv = (torch.from_numpy(a) for a in (scale, bias, mean, var))
    repeat = max(ARGS.repeat, PW_REPEAT)
    for name, fn, tfn in cases:
        entry = {"op": "batchnorm", "name": name, "shape": list(shape)}
        entry["numpy_s"] = _best(fn, repeat)
        sides = {}
        if name == "inference":
            run = _engine_bn_inference(x, scale, bias, mean, var)
            if run is not None:
                sides["engine"] = run
            sides.update({"variant:" + k: f for k, f in _bn_variants(x, scale, bias, out).items()})
        if torch is not None and tfn is not None:
            tx = torch.from_numpy(x)
            sides["torch"] = lambda: tfn(tx)
        with (torch.no_grad() if torch is not None else contextlib.nullcontext()):
            got = _best_rounds(sides, repeat)
        if "engine" in got:
            entry["engine_s"] = got["engine"]
        variants = {k[len("variant:"):]: v for k, v in got.items() if k.startswith("variant:")}
        if variants:
            entry["numpy_variants_s"] = variants
        if "torch" in got:
            entry["torch_s"] = got["torch"]
            entry["numpy_over_torch"] = entry["numpy_s"] / entry["torch_s"]
            entry["ratio_vs_torch"] = entry["torch_s"] / entry.get("engine_s", entry["numpy_s"])
            if variants:
                entry["variants_ratio_vs_torch"] = {k: entry["torch_s"] / v
                                                    for k, v in variants.items()}
        results.append(entry)
        _print(entry)


# ----------------------------------------------------------------- through the engine's plan
def _engine_plan(tensors, nodes, bufs):
    """(plan, DeviceBuffers) for a graph of (uid, array, virtual) tensors, or None when the
    plugin SDK cannot be imported."""
    try:
        from hipdnn_cabi.backend import graph_fb
        from hipdnn_cabi.plugin_sdk import DeviceBuffers, parse_graph
        from engine_plugins.cpu_reference.engine import CpuReferencePlanBuilder
    except Exception as e:  # pragma: no cover - environment dependent
        print(f"engine timing skipped: {e}")
        return None
    g = {"name": "bench", "compute_data_type": 1, "tensors": tensors, "nodes": nodes}
    graph = parse_graph(graph_fb.build("Graph", g))
    pb = CpuReferencePlanBuilder()
    assert pb.is_applicable(None, graph)
    plan = pb.build_plan(None, graph, None)
    db = DeviceBuffers({u: a.ctypes.data for u, a in bufs.items()})
    return lambda _keep=bufs: plan.execute(None, db, 0)   # _keep: the arrays outlive the plan


def _t(uid, a):
    return {"uid": uid, "data_type": 1, "dims": list(a.shape),
            "strides": [s // a.itemsize for s in a.strides]}


_PW_FB = {"ADD": 2, "RELU_FWD": 34, "GELU_FWD": 21, "SIGMOID_FWD": 37}


def _engine_pointwise(mode, inputs):
    out = np.empty(inputs[0].shape, np.float32)
    bufs = {i + 1: a for i, a in enumerate(inputs)}
    bufs[9] = out
    attrs = {"operation": _PW_FB[mode], "in_0_tensor_uid": 1, "out_0_tensor_uid": 9}
    if len(inputs) > 1:
        attrs["in_1_tensor_uid"] = 2
    nodes = [{"name": "pw", "compute_data_type": 1, "attributes": (2, attrs)}]
    return _engine_plan([_t(u, a) for u, a in bufs.items()], nodes, bufs)


def _engine_bn_inference(x, scale, bias, mean, var):
    C = x.shape[1]
    inv = (1.0 / np.sqrt(var + 1e-5)).astype(np.float32)
    bufs = {1: x, 2: mean.reshape(1, C, 1, 1), 3: inv.reshape(1, C, 1, 1),
            4: scale.reshape(1, C, 1, 1), 5: bias.reshape(1, C, 1, 1), 6: np.empty_like(x)}
    attrs = {"x_tensor_uid": 1, "mean_tensor_uid": 2, "inv_variance_tensor_uid": 3,
             "scale_tensor_uid": 4, "bias_tensor_uid": 5, "y_tensor_uid": 6}
    nodes = [{"name": "bn", "compute_data_type": 1, "attributes": (1, attrs)}]
    return _engine_plan([_t(u, a) for u, a in bufs.items()], nodes, bufs)


def bench_sdpa(rng, results):
    """SDPA forward / backward, B=1, H=8, S=512, D=64 float32: the CPU reference through the
    frontend (the public C API path) and its kernel alone, vs torch's CPU sdpa."""
    from engine_plugins.cpu_reference.kernels import sdpa as ks
    B, H, S, D = 1, 8, 512, 64
    q, k, v, do = (rng.standard_normal((B, H, S, D), dtype=np.float32) for _ in range(4))
    for causal in (False, True):
        name = f"B{B}_H{H}_S{S}_D{D}" + ("_causal" if causal else "")
        flop = 4.0 * B * H * S * S * D / (2 if causal else 1)
        entry = {"op": "sdpa_fwd", "name": name, "gflop": flop / 1e9}
        p = ks.SdpaParams(scale=1 / np.sqrt(D), causal=causal)
        entry["kernel_s"] = _best(lambda: ks.sdpa_fwd(q, k, v, p), ARGS.repeat)
        try:
            from hipdnn_cabi import frontend as hf
            F32 = hf.DataType.HIPDNN_DATA_FLOAT
            g = hf.Graph(io_data_type=F32, intermediate_data_type=F32, compute_data_type=F32)
            tq, tk, tv = (g.tensor(name=n, dim=[B, H, S, D]) for n in "qkv")
            o, st = g.sdpa(tq, tk, tv, attn_scale=float(1 / np.sqrt(D)), use_causal_mask=causal)
            o.set_output(True)
            st.set_output(True)
            g.build()
            oa = np.empty((B, H, S, D), np.float32)
            sa = np.empty((B, H, S, 1), np.float32)
            pack = {tq: q, tk: k, tv: v, o: oa, st: sa}
            entry["numpy_s"] = _best(lambda: g.execute(pack), ARGS.repeat)
            entry["path"] = "frontend -> libhipdnn_backend.so C API -> CPU reference engine"
        except Exception as e:  # noqa: BLE001
            entry["frontend_error"] = f"{type(e).__name__}: {e}"
            entry["numpy_s"] = entry["kernel_s"]
        entry["numpy_gflops"] = flop / entry["numpy_s"] / 1e9
        st_ = ks.sdpa_fwd(q, k, v, p)
        entry["bwd_kernel_s"] = _best(lambda: ks.sdpa_bwd(q, k, v, st_[0], do, st_[1], p),
                                      ARGS.repeat)
        if torch is not None:
            tq_, tk_, tv_ = (torch.from_numpy(x) for x in (q, k, v))
            with torch.no_grad():
                t = _best(lambda: F.scaled_dot_product_attention(tq_, tk_, tv_, is_causal=causal),
                          ARGS.repeat)
            entry["torch_s"] = t
            entry["ratio_vs_torch"] = t / entry["numpy_s"]
        results.append(entry)
        _print(entry)


def _summary(results):
    out = {}
    for op in ("conv2d_fwd", "pointwise", "batchnorm", "sdpa_fwd"):
        r = [e["ratio_vs_torch"] for e in results if e["op"] == op and "ratio_vs_torch" in e]
        if r:
            out[op] = {"min": min(r), "geomean": float(np.exp(np.mean(np.log(r)))), "n": len(r)}
    return out


def _chart(results, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not importable: no chart")
        return None
    rows = [e for e in results if "ratio_vs_torch" in e]
    if not rows:
        return None
    labels = [f"{e['op']}:{e['name'].replace('HIPDNN_POINTWISE_', '')}" for e in rows]
    vals = [e["ratio_vs_torch"] for e in rows]
    colors = ["#4c72b0" if e["op"].startswith("conv2d_fwd") else
              "#dd8452" if e["op"] == "pointwise" else
              "#55a868" if e["op"] == "batchnorm" else "#8172b3" for e in rows]
    fig, ax = plt.subplots(figsize=(9, 0.28 * len(rows) + 1.5))
    ax.barh(range(len(rows)), vals, color=colors)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(labels, fontsize=7)
    ax.invert_yaxis()
    labelled = False
    for i, e in enumerate(rows):   # the most any numpy formula of the op reached / could reach
        f = e.get("floor_ratio_vs_torch") or max((v for k, v in (e.get("variants_ratio_vs_torch") or {}).items()
                                                  if "not a result" not in k), default=None)
        if f:
            ax.plot([f], [i], marker="|", color="k", markersize=11, mew=2,
                    label=None if labelled else "numpy bound (exp alone / best arrangement)")
            labelled = True
    if labelled:
        ax.legend(loc="lower right", fontsize=7)
    ax.axvline(1.0, color="k", lw=0.8)
    ax.axvline(0.5, color="r", lw=0.6, ls="--")
    ax.axvline(0.7, color="g", lw=0.6, ls="--")
    ax.set_xlabel("throughput vs PyTorch CPU (torch_s / ours_s), same threads")
    ax.set_title("CPU reference engine vs PyTorch CPU (batch %d, float32, %d threads)"
                 % (ARGS.batch, ARGS.threads), fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


def _print(entry):
    keys = [k for k in entry if (k.endswith("_s") or k.endswith("gflops") or "ratio" in k)
            and isinstance(entry[k], float)]
    print(f"{entry['op']:>11} {entry['name']:<28} " + " ".join(f"{k}={entry[k]:.4g}" for k in keys), flush=True)


def main():
    rng = np.random.default_rng(0)
    results: list[dict] = []
    t0 = time.perf_counter()
    only = set(ARGS.only or ("conv", "pointwise", "batchnorm", "sdpa"))
    if "conv" in only:
        bench_conv(rng, results)
        bench_conv_bwd(rng, results)
    if "pointwise" in only:
        bench_pointwise(rng, results)
    if "batchnorm" in only:
        bench_batchnorm(rng, results)
    if "sdpa" in only:
        bench_sdpa(rng, results)
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
    summary = _summary(results)
    png = _chart(results, os.path.splitext(ARGS.out)[0] + ".png")
    meta["chart"] = os.path.basename(png) if png else None
    with open(ARGS.out, "w") as f:
        json.dump({"meta": meta, "summary_ratio_vs_torch": summary, "results": results}, f, indent=1)
    for op, v in summary.items():
        print(f"{op:>11}: throughput vs torch min {v['min']:.2f} geomean {v['geomean']:.2f} ({v['n']} cases)")
    print(f"wrote {ARGS.out} ({len(results)} cases, {meta['total_wall_s']:.1f} s)")


if __name__ == "__main__":
    main()
