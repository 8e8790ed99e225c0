#!/usr/bin/env python3
"""Many GPUs in one process: conv / GEMM throughput on 1 GPU and on N GPUs at once,
N threads, one hipDNN handle (with its own stream) per device, through the public C API
(``hipdnn_cabi.frontend``: hipdnnCreate / hipdnnSetStream / hipdnnBackendExecute on the
HIP kernel engine), with one finalized variant pack per device reused for every execute (the C
fast path: only the engine's Python execute runs per call).

Per workload: one thread on device 0 runs ``--iters`` executes (after warm-up) and syncs its
stream -> executes/s; then N threads, thread i on device i (its device current, as a program
calling ``cudaSetDevice(i)`` would have it), start together behind a barrier, each runs
``--iters`` executes -> aggregate executes/s over the wall time from the first start to the last
stream drained.  ``scaling`` = aggregate / one-GPU (goal: >= 1.8 on 2 GPUs).
``host_us_per_execute``: the mean host time one execute call takes (the Python part, which the
threads share through the GIL).  With PyTorch present the same shapes run through torch (cuBLAS /
cuDNN), 1 vs N threads, side by side, as the reference for what the machine scales to.

  python3 bench/multi_gpu_bench.py [--gpus N] [--iters 200] [--only gemm,conv]
                                   [--out bench/results/multi_gpu.json]
  python3 bench/multi_gpu_bench.py --fake 2     # CI smoke run on a fake two-device platform

Needs a machine with N >= 2 GPUs for a meaningful number; on one GPU it reports scaling 1.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests", "gpu"), os.path.join(ROOT, "tests")]

WORKLOADS = {
    # name: (kind, shape, dtype, flops)
    "gemm_fp16_4096": ("gemm", (4096, 4096, 4096), "HALF", 2 * 4096 ** 3),
    "gemm_fp32_2048": ("gemm", (2048, 2048, 2048), "FLOAT", 2 * 2048 ** 3),
    "conv_fp16_conv3_3x3_b32": ("conv", (32, 128, 28, 128, 3, 1), "HALF",
                                2 * 32 * 128 * 28 * 28 * 128 * 9),
}


def _hf():
    from hipdnn_cabi import frontend as hf
    return hf


def build(hf, h, kind, shape, dtype):
    """A frontend graph on handle ``h`` pinned to the HIP engine; returns (graph, tensors)."""
    DT = {"HALF": hf.DataType.HIPDNN_DATA_HALF, "FLOAT": hf.DataType.HIPDNN_DATA_FLOAT}[dtype]
    F32 = hf.DataType.HIPDNN_DATA_FLOAT
    g = hf.Graph(handle=h, io_data_type=DT, intermediate_data_type=F32, compute_data_type=F32,
                 name=f"{kind}_{dtype}")
    if kind == "gemm":
        m, n, k = shape
        a = g.tensor(name="a", dim=[1, m, k])
        b = g.tensor(name="b", dim=[1, k, n])
        c = g.matmul(a, b).set_output(True)
        ts = (a, b, c)
    else:
        N, C, H, K, R, pad = shape
        x = g.tensor(name="x", dim=[N, C, H, H], stride=[C * H * H, 1, H * C, C])
        w = g.tensor(name="w", dim=[K, C, R, R], stride=[C * R * R, 1, R * C, C])
        y = g.conv_fprop(x, w, padding=[pad, pad], stride=[1, 1], dilation=[1, 1])
        P = H + 2 * pad - R + 1
        y.set_dim([N, K, P, P]).set_stride([K * P * P, 1, P * K, K]).set_output(True)
        ts = (x, w, y)
    g.set_preferred_engine_name_ext("HIPDNN_CABI_HIP_KERNELS_ENGINE")
    g.build()
    return g, ts


def _nbytes(t, dtype):
    n = 1
    for d in t.get_dim():
        n *= d
    return n * (2 if dtype == "HALF" else 4)


class Worker:
    """One device: handle + stream + plan + buffers, built in the thread that runs it."""

    def __init__(self, dev, kind, shape, dtype):
        import numpy as np
        from hipdnn_cabi import device
        hf = _hf()
        self.dev = dev
        self.rt = rt = device.get_runtime(dev)
        with rt.bound():                       # this device current, as cudaSetDevice(dev)
            self.stream = rt.stream_create()
            self.h = hf.Handle(stream=self.stream)
            self.g, ts = build(hf, self.h, kind, shape, dtype)
            self.ptrs = {}
            rng = np.random.default_rng(dev)
            for t in ts:
                nb = _nbytes(t, dtype)
                p = rt.malloc(nb)
                host = (rng.standard_normal(nb // 2).astype(np.float16) if dtype == "HALF"
                        else rng.standard_normal(nb // 4).astype(np.float32))
                rt.memcpy_htod(p, host.ctypes.data, nb)
                self.ptrs[t] = p
            ws = self.g.get_workspace_size()
            self.ws = rt.malloc(ws) if ws else 0
            self.vp = self._pack(ts)
            self.plan = self.g._need_plan()

    def _pack(self, ts):
        """A finalized variant pack kept for every execute: after the first one, executes take
        the backend's C fast path (what a C program that reuses its pack gets)."""
        from hipdnn_cabi._generated.enums import AttributeName as A, AttributeType as T
        from hipdnn_cabi._generated.enums import DescriptorType as D
        api = self.g.api
        ffi = api.ffi
        vp = api.create(D.HIPDNN_BACKEND_VARIANT_PACK_DESCRIPTOR)
        api.set(vp, A.HIPDNN_ATTR_VARIANT_PACK_DATA_POINTERS, T.HIPDNN_TYPE_VOID_PTR,
                [ffi.cast("void*", self.ptrs[t]) for t in ts])
        api.set(vp, A.HIPDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, T.HIPDNN_TYPE_INT64, [t.uid for t in ts])
        api.set(vp, A.HIPDNN_ATTR_VARIANT_PACK_WORKSPACE, T.HIPDNN_TYPE_VOID_PTR,
                [ffi.cast("void*", self.ws)])
        api.finalize(vp, "finalize variant pack")
        return vp

    def run(self, iters):
        api, h, plan, vp = self.g.api, self.h.raw, self.plan, self.vp
        ex = api.lib.hipdnnBackendExecute
        with self.rt.bound():
            t0 = time.perf_counter()
            for _ in range(iters):
                st = ex(h, plan, vp)
                if st:
                    api.check(st, "hipdnnBackendExecute")
            t1 = time.perf_counter()
            self.rt.stream_synchronize(self.stream)
            t2 = time.perf_counter()
        return t0, t1, t2

    def close(self):
        with self.rt.bound():
            self.g.api.destroy(self.vp)
            self.h.close()
            for p in self.ptrs.values():
                self.rt.free(p)
            if self.ws:
                self.rt.free(self.ws)


def run_concurrent(devs, kind, shape, dtype, iters, warm):
    """N threads (one per device) build, warm up, then run together; -> (execs/s, host us)."""
    ws, errs = {}, []
    ready = threading.Barrier(len(devs))
    times = {}

    def body(d):
        try:
            w = ws[d] = Worker(d, kind, shape, dtype)
            w.run(warm)
            ready.wait()
            times[d] = w.run(iters)
        except BaseException as e:  # noqa: BLE001
            errs.append(f"device {d}: {type(e).__name__}: {e}")
            try:
                ready.abort()
            except Exception:  # noqa: BLE001
                pass

    ts = [threading.Thread(target=body, args=(d,)) for d in devs]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for w in ws.values():
        w.close()
    if errs:
        raise RuntimeError("; ".join(errs))
    start = min(t[0] for t in times.values())
    end = max(t[2] for t in times.values())
    host_us = sum(t[1] - t[0] for t in times.values()) / (iters * len(devs)) * 1e6
    return iters * len(devs) / (end - start), host_us


def torch_concurrent(torch, devs, kind, shape, dtype, iters, warm):
    import torch.nn.functional as F
    tdt = torch.float16 if dtype == "HALF" else torch.float32
    errs, times = [], {}
    ready = threading.Barrier(len(devs))

    def body(d):
        try:
            dev = torch.device("cuda", d)
            torch.cuda.set_device(dev)
            s = torch.cuda.Stream(dev)
            with torch.cuda.stream(s):
                if kind == "gemm":
                    m, n, k = shape
                    a = torch.randn(m, k, device=dev, dtype=tdt)
                    b = torch.randn(k, n, device=dev, dtype=tdt)
                    c = torch.empty(m, n, device=dev, dtype=tdt)
                    fn = lambda: torch.matmul(a, b, out=c)  # noqa: E731
                else:
                    N, C, H, K, R, pad = shape
                    cl = torch.channels_last
                    x = torch.randn(N, C, H, H, device=dev, dtype=tdt).to(memory_format=cl)
                    w = torch.randn(K, C, R, R, device=dev, dtype=tdt).to(memory_format=cl)
                    fn = lambda: F.conv2d(x, w, padding=pad)  # noqa: E731
                for _ in range(warm):
                    fn()
                s.synchronize()
                ready.wait()
                t0 = time.perf_counter()
                for _ in range(iters):
                    fn()
                s.synchronize()
                times[d] = (t0, time.perf_counter())
        except BaseException as e:  # noqa: BLE001
            errs.append(f"torch device {d}: {e}")
            try:
                ready.abort()
            except Exception:  # noqa: BLE001
                pass

    ts = [threading.Thread(target=body, args=(d,)) for d in devs]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errs:
        raise RuntimeError("; ".join(errs))
    return iters * len(devs) / (max(t[1] for t in times.values()) - min(t[0] for t in times.values()))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gpus", type=int, default=0, help="devices to use (default: all)")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--warm", type=int, default=10)
    ap.add_argument("--only", default=",".join(WORKLOADS))
    ap.add_argument("--out", default=os.path.join(HERE, "results", "multi_gpu.json"))
    ap.add_argument("--fake", type=int, default=0, metavar="N",
                    help="smoke run on a fake N-device platform (tests/gpu/fake_devices.py)")
    ap.add_argument("--no-torch", action="store_true")
    a = ap.parse_args(argv)
    if a.fake:
        import fake_devices
        fake_devices.install(a.fake)
    from hipdnn_cabi import device
    if not device.available():
        print(f"no GPU runtime: {device.unavailable_reason()}", file=sys.stderr)
        return 2
    n = a.gpus or device.device_count()
    n = min(n, device.device_count())
    torch = None
    if not a.no_torch and not a.fake:
        try:
            import torch  # noqa: F811
            if torch.cuda.device_count() < n:
                torch = None
        except Exception:  # noqa: BLE001
            torch = None
    res = {"device": device.get_runtime(0).describe(), "gpus": n, "iters": a.iters,
           "warm": a.warm, "path": "public C API (frontend -> hipdnnBackendExecute), HIP engine",
           "target_scaling_2gpu": 1.8, "date": time.strftime("%Y-%m-%d %H:%M:%S"),
           "torch": getattr(torch, "__version__", None), "cases": {}}
    for name in a.only.split(","):
        kind, shape, dtype, flops = WORKLOADS[name]
        one, host1 = run_concurrent([0], kind, shape, dtype, a.iters, a.warm)
        many, hostn = run_concurrent(list(range(n)), kind, shape, dtype, a.iters, a.warm)
        row = {"one_gpu_per_s": one, "n_gpu_per_s": many, "scaling": many / one,
               "one_gpu_tflops": one * flops / 1e12, "n_gpu_tflops": many * flops / 1e12,
               "host_us_per_execute_1": host1, "host_us_per_execute_n": hostn}
        if torch is not None:
            t1 = torch_concurrent(torch, [0], kind, shape, dtype, a.iters, a.warm)
            tn = torch_concurrent(torch, list(range(n)), kind, shape, dtype, a.iters, a.warm)
            row.update({"torch_one_gpu_per_s": t1, "torch_n_gpu_per_s": tn,
                        "torch_scaling": tn / t1, "ratio_vs_torch_n": many / tn})
        res["cases"][name] = row
        print(f"{name}: 1 GPU {one:.1f}/s ({row['one_gpu_tflops']:.1f} TF/s), {n} GPUs "
              f"{many:.1f}/s -> scaling {many / one:.2f}x; host {host1:.1f}/{hostn:.1f} us/execute"
              + (f"; torch scaling {row['torch_scaling']:.2f}x" if torch is not None else ""),
              flush=True)
    if a.out and not a.fake:
        os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)
    elif a.fake:
        print("RESULT" + json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
