#!/usr/bin/env python3
"""`make bench-gpu` group "models" (``bench/gpu_bench.py --only models``; ``models_llama`` /
``models_resnet`` for one of them): whole networks built from hipDNN graphs through the public
frontend (examples/llama_block.py, examples/resnet50_train.py) against PyTorch eager and
``torch.compile`` of the same model with the same weights, in one process:

* Llama-style decoder layer, bf16, batch 2 x 2048 tokens, hidden 4096, 32 heads of 128, SwiGLU
  FFN 11008, causal: forward, and training step (forward + backward: dx and every weight
  gradient);
* ResNet-50 training step, batch 32, 224 x 224, channels-last, fp16 (``HIPDNN_BENCH_RESNET_DTYPES``
  = ``fp16,bf16`` adds bf16): forward + backward of every layer, batchnorm in training mode,
  all parameter gradients (no gradient of the image, on either side).

Rows (``res["models"][name]``): ``ours_ms`` / ``eager_ms`` / ``compiled_ms`` (medians, CUDA
events on PyTorch's current stream, which is the handle's stream), ``ratio_eager`` /
``ratio_compiled`` (PyTorch / ours: > 1 means ours is faster), ``build_s`` (graph building, with
the kernels compiled in parallel first: ``prewarm_s``), and errors against a float32 reference
(the same model and weights in float32, TF32 off): ``err`` holds max |x - ref| / max |ref| per
output and gradient for ours and for eager PyTorch, ``err_max`` the largest (and which).
``--dry-run`` runs the hipDNN side at tiny sizes on the CPU reference engine with numpy (no
GPU, no torch): the code paths of this file short of PyTorch.
"""
from __future__ import annotations

import multiprocessing
import os
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for p in (ROOT, HERE, os.path.join(ROOT, "examples")):
    if p not in sys.path:
        sys.path.insert(0, p)

import numpy as np  # noqa: E402

import llama_block  # noqa: E402
import resnet50_train  # noqa: E402
from engine_plugins.hip_kernels import codegen  # noqa: E402
from engine_plugins.hip_kernels.engine import analyse  # noqa: E402
from gpu_bench import median_ms  # noqa: E402
from hipdnn_cabi import device, frontend as hf  # noqa: E402
from hipdnn_cabi.plugin_sdk import parse_graph  # noqa: E402

LLAMA = dict(batch=2, seq=2048, hidden=4096, heads=32, ffn=11008)
RESNET = dict(batch=32, image=224, width=64, layers=resnet50_train.LAYERS, classes=1000)
LLAMA_TINY = dict(batch=1, seq=16, hidden=128, heads=2, ffn=192)     # head dim 64, as the HIP engine needs
RESNET_TINY = dict(batch=2, image=32, width=8, layers=(1, 1, 1, 1), classes=10)
REPS, WARM = 10, 2
LOSS_SCALE = 256.0
EPS = 1e-5


# ------------------------------------------------------------------------------------ weights
def llama_weights(cfg, seed=0):
    """float32 numpy weights (matmuls scaled to unit-variance outputs), inputs and dy."""
    r = np.random.default_rng(seed)
    w = llama_block.random_weights(cfg["hidden"], cfg["ffn"], r, np.float32)
    x = r.standard_normal((cfg["batch"], cfg["seq"], cfg["hidden"]), dtype=np.float32)
    dy = r.standard_normal(x.shape, dtype=np.float32)
    return w, x, dy


def resnet_weights(cfg, seed=0):
    r = np.random.default_rng(seed)
    p = resnet50_train.init_params(r, cfg["layers"], cfg["width"], cfg["classes"], np.float32)
    x = r.standard_normal((cfg["batch"], cfg["image"], cfg["image"], 3), dtype=np.float32)
    x = x.transpose(0, 3, 1, 2)                                     # NCHW dims, NHWC memory
    # the gradient of a mean loss over the batch, times a loss scale (as torch.amp's GradScaler
    # applies): unscaled, float16 activation gradients of a 224 x 224 ResNet-50 fall below
    # float16's normal range on either side; errors are relative, so the scale changes nothing else
    dl = r.standard_normal((cfg["batch"], cfg["classes"]), dtype=np.float32) * (LOSS_SCALE / cfg["batch"])
    return p, x, dl


def is_low(name):
    """Parameters kept in the model's data type (matmul / conv / fc); the others (norm scales,
    batchnorm tensors) stay float32."""
    return name.startswith("w_") or name.endswith("conv1.weight") or ".conv" in name or \
        "downsample.0" in name or name.startswith("fc.")


# ------------------------------------------------------------------------------------ kernels
def graph_bytes(g):
    """The graph of a built frontend Graph as the backend serialises it for engines."""
    return g._two_call_bytes(g.api.lib.hipdnnBackendGetSerializedBinaryGraph_ext, g._gdesc)


def _compile_one(item):
    """Compile one source into the kernel cache: None, or why it failed (the plan build then
    compiles it again and reports the error where it belongs)."""
    try:
        src, arch = item
        device.get_runtime().compile(src, "model.hip", (), codegen.headers(), arch)
        return None
    except Exception as e:  # noqa: BLE001 - reported by prewarm
        return f"{type(e).__name__}: {e}"[:300]


def kernel_sources(graphs):
    """{(source, target)} of every kernel the HIP engine generates for ``graphs`` (its own
    analysis: the device's target and SM count), and the graphs it declines with why."""
    out, declined = set(), {}
    for g in graphs:
        a = analyse(parse_graph(graph_bytes(g)))
        if not a.ok:
            declined[g.name] = a.reason
            continue
        for st in a.program.steps:
            if st[0] == "launch":
                opts = st[6] if len(st) > 6 and isinstance(st[6], dict) else {}
                out.add((st[1], opts.get("arch")))
    return out, declined


def prewarm_model(kind, cfg, dtype, compile_=True, **model_args):
    """:func:`prewarm` on the twin of a model (closed afterwards)."""
    twin = twin_graphs(kind, cfg, dtype, **model_args)
    try:
        return prewarm(twin.G.graphs, compile_)
    finally:
        twin.close()


def prewarm(graphs, compile_=True):
    """Compile the kernels of ``graphs`` in parallel into the kernel cache (one NVRTC per
    process), so building the plans then compiles nothing.  Returns (n sources, seconds,
    declined graphs); compile failures are printed."""
    t0 = time.perf_counter()
    srcs, declined = kernel_sources(graphs)
    if compile_ and srcs:
        # spawned workers: this process has a CUDA context (torch), which forked ones must not use
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=max(1, min(14, (os.cpu_count() or 2) - 1)),
                                 mp_context=ctx) as ex:
            errors = [e for e in ex.map(_compile_one, sorted(srcs, key=str)) if e]
        if errors:
            print(f"prewarm: {len(errors)} of {len(srcs)} sources failed to compile; first: "
                  f"{errors[0]}", flush=True)
    return len(srcs), time.perf_counter() - t0, declined


def twin_graphs(kind, cfg, dtype, **model_args):
    """The model on host stand-ins (zeros) with its graphs lowered but not planned (no engine
    compiles anything): the same graphs the device model builds, for :func:`prewarm`."""
    dt = {"bfloat16": np.uint16, "float16": np.float16, "float32": np.float32}[dtype]
    if kind == "llama":
        D, F = cfg["hidden"], cfg["ffn"]
        shapes = {"attn_norm": (D,), "w_qkv": (D, 3 * D), "w_o": (D, D), "ffn_norm": (D,),
                  "w_gate_up": (D, 2 * F), "w_down": (F, D)}
        w = {k: np.zeros(s, dt if is_low(k) else np.float32) for k, s in shapes.items()}
        return llama_block.LlamaBlock(w, cfg["batch"], cfg["seq"], cfg["heads"], dtype=dtype, plans=False,
                                      **model_args)
    shapes = resnet50_train.param_shapes(cfg["layers"], cfg["width"], cfg["classes"])
    p = {k: np.zeros(s, dt if is_low(k) else np.float32) for k, s in shapes.items()}
    return resnet50_train.ResNet50(p, cfg["batch"], cfg["image"], cfg["layers"], dtype=dtype, plans=False,
                                   **model_args)


# ------------------------------------------------------------------------------------ errors
def rel_err(got, ref):
    got, ref = got.double(), ref.double()
    return float((got - ref).abs().max() / ref.abs().max().clamp_min(1e-30))


def err_summary(errs):
    k = max(errs, key=errs.get)
    return {"err": errs, "err_max": errs[k], "err_max_of": k}


# ------------------------------------------------------------------------------------ torch models
def torch_llama(torch, w, x, heads, eps=EPS):
    """The same layer in PyTorch: RMSnorm in float32 (weights float32), matmuls, causal
    scaled_dot_product_attention, SwiGLU; returns y in x's type."""
    import torch.nn.functional as F
    B, S, D = x.shape
    Fd = w["w_down"].shape[0]

    def rms(z, s):
        zf = z.float()
        return (zf * torch.rsqrt((zf * zf).mean(-1, keepdim=True) + eps) * s).to(z.dtype)
    qkv = rms(x, w["attn_norm"]) @ w["w_qkv"]
    q, k, v = (t.reshape(B, S, heads, D // heads).transpose(1, 2) for t in qkv.split(D, -1))
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    x2 = x + o.transpose(1, 2).reshape(B, S, D) @ w["w_o"]
    gate, up = (rms(x2, w["ffn_norm"]) @ w["w_gate_up"]).split(Fd, -1)
    return x2 + (F.silu(gate) * up) @ w["w_down"]


def torch_resnet(torch, p, x, layers, running=None, eps=EPS, momentum=0.1):
    """ResNet-50 in PyTorch (functional, torchvision's structure), batchnorm in training mode
    with float32 parameters; ``running``: the running-statistics tensors to update (default:
    those of ``p``)."""
    import torch.nn.functional as F
    run = p if running is None else running

    def bn(z, pre):
        return F.batch_norm(z, run[pre + ".running_mean"], run[pre + ".running_var"],
                            p[pre + ".weight"], p[pre + ".bias"], training=True,
                            momentum=momentum, eps=eps)
    h = F.max_pool2d(F.relu(bn(F.conv2d(x, p["conv1.weight"], stride=2, padding=3), "bn1")), 3, 2, 1)
    for pre, _, _, st, proj in resnet50_train.block_names(layers, p["conv1.weight"].shape[0]):
        a = F.relu(bn(F.conv2d(h, p[pre + ".conv1.weight"]), pre + ".bn1"))
        a = F.relu(bn(F.conv2d(a, p[pre + ".conv2.weight"], stride=st, padding=1), pre + ".bn2"))
        a = bn(F.conv2d(a, p[pre + ".conv3.weight"]), pre + ".bn3")
        sc = bn(F.conv2d(h, p[pre + ".downsample.0.weight"], stride=st), pre + ".downsample.1") \
            if proj else h
        h = F.relu(a + sc)
    return h.mean((2, 3)) @ p["fc.weight"].t() + p["fc.bias"]


def _fp32_off(torch):
    """TF32 off (a true float32 reference); returns a function that restores the settings."""
    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False

    def restore():
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved
    return restore


def _compile_enabled():
    return os.environ.get("HIPDNN_BENCH_TORCH_COMPILE", "1") not in ("0", "off")


def _time_torch(torch, median_ms, fn, label, row, key):
    """Time ``fn`` into row[key] (ms) or record why it failed."""
    try:
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        first = time.perf_counter() - t0
        row[key] = median_ms(torch, fn, reps=REPS, warm=WARM)[0]
        if key == "compiled_ms":
            row["compile_s"] = first
        return row[key]
    except Exception as e:  # noqa: BLE001 - recorded in the row
        row[key.replace("_ms", "_error")] = f"{type(e).__name__}: {e}"[:500]
        print(f"   {label}: {type(e).__name__}: {e}"[:300], flush=True)
        return None


def _ratios(row):
    for k in ("eager", "compiled"):
        if row.get(f"{k}_ms") and row.get("ours_ms"):
            row[f"ratio_{k}"] = row[f"{k}_ms"] / row["ours_ms"]


def _print(name, row):
    parts = [f"ours {row.get('ours_ms', float('nan')):.2f} ms"]
    for k in ("eager", "compiled"):
        if f"{k}_ms" in row:
            parts.append(f"{k} {row[f'{k}_ms']:.2f} ms ({row.get(f'ratio_{k}', float('nan')):.2f}x)")
    e = row.get("err_max")
    print(f"models {name}: " + ", ".join(parts) +
          (f"; max err vs fp32 {e:.2e} ({row.get('err_max_of')})" if e is not None else ""), flush=True)


# ------------------------------------------------------------------------------------ Llama
def bench_llama(torch, E, res, cfg=None):
    cfg = dict(cfg or LLAMA)
    out = res.setdefault("models", {})
    B, S, H = cfg["batch"], cfg["seq"], cfg["heads"]
    dev, tdt = "cuda", torch.bfloat16
    nw, nx, ndy = llama_weights(cfg)
    W = {k: torch.from_numpy(v).to(dev).to(tdt if is_low(k) else torch.float32) for k, v in nw.items()}
    x = torch.from_numpy(nx).to(dev).to(tdt)
    dy = torch.from_numpy(ndy).to(dev).to(tdt)
    del nw
    n_src, pre_s, declined = prewarm_model("llama", cfg, "bfloat16")
    print(f"models llama: {n_src} kernel sources prewarmed in {pre_s:.0f} s"
          + (f"; declined by the HIP engine: {declined}" if declined else ""), flush=True)
    handle = hf.Handle(stream=torch.cuda.current_stream().cuda_stream)
    t0 = time.perf_counter()
    blk = llama_block.LlamaBlock(W, B, S, H, handle=handle)
    build_s = time.perf_counter() - t0
    base = {"config": dict(cfg, dtype="bf16", causal=True), "build_s": build_s, "prewarm_s": pre_s,
            "kernel_sources": n_src, "graphs": len(blk.G.graphs)}
    try:
        # fp32 reference: the same weights (their bf16 values) in float32, TF32 off
        restore = _fp32_off(torch)
        W32 = {k: v.detach().to(torch.float32, copy=True).requires_grad_() for k, v in W.items()}
        x32 = x.detach().to(torch.float32, copy=True).requires_grad_()
        y32 = torch_llama(torch, W32, x32, H)
        g32 = torch.autograd.grad(y32, [x32] + [W32[k] for k in llama_block.WEIGHTS], dy.float())
        restore()
        y32 = y32.detach()
        ref = dict(zip(["dx"] + [llama_block.GRADS[k] for k in llama_block.WEIGHTS], g32))
        del W32, x32
        # ours
        yo = blk.forward(x).clone()
        dxo, go = blk.backward(dy)
        torch.cuda.synchronize()
        errs = {"y": rel_err(yo, y32), "dx": rel_err(dxo, ref["dx"])}
        errs.update({k: rel_err(go[k], ref[k]) for k in go})
        row_f = dict(base, engines=blk.engines(), **err_summary({"y": errs["y"]}))
        row_f["ours_ms"] = median_ms(torch, lambda: blk.forward(x), reps=REPS, warm=WARM)[0]

        def ours_train():
            blk.forward(x)
            blk.backward(dy)
        row_t = dict(base, engines=blk.engines(), **err_summary(errs))
        row_t["ours_ms"] = median_ms(torch, ours_train, reps=REPS, warm=WARM)[0]
        # PyTorch: eager and compiled, the same weights as leaf tensors
        Wt = {k: v.detach().clone().requires_grad_() for k, v in W.items()}
        xt = x.detach().clone().requires_grad_()
        params = [xt] + [Wt[k] for k in llama_block.WEIGHTS]
        yt = torch_llama(torch, Wt, xt, H)
        gt = torch.autograd.grad(yt, params, dy)
        terr = {"y": rel_err(yt.detach(), y32), "dx": rel_err(gt[0], ref["dx"])}
        terr.update({llama_block.GRADS[k]: rel_err(g, ref[llama_block.GRADS[k]])
                     for k, g in zip(llama_block.WEIGHTS, gt[1:])})
        row_f["torch_err"] = {"y": terr["y"]}
        row_f["torch_err_max"] = terr["y"]
        row_t["torch_err"] = terr
        row_t["torch_err_max"] = max(terr.values())
        row_t["torch_err_max_of"] = max(terr, key=terr.get)
        del yt, gt

        def eager_fwd():
            with torch.no_grad():
                return torch_llama(torch, Wt, x, H)

        def eager_train():
            return torch.autograd.grad(torch_llama(torch, Wt, xt, H), params, dy)
        _time_torch(torch, median_ms, eager_fwd, "eager forward", row_f, "eager_ms")
        _time_torch(torch, median_ms, eager_train, "eager training step", row_t, "eager_ms")
        if _compile_enabled():
            cl = torch.compile(lambda w_, x_: torch_llama(torch, w_, x_, H))

            def comp_fwd():
                with torch.no_grad():
                    return cl(Wt, x)

            def comp_train():
                return torch.autograd.grad(cl(Wt, xt), params, dy)
            _time_torch(torch, median_ms, comp_fwd, "compiled forward", row_f, "compiled_ms")
            _time_torch(torch, median_ms, comp_train, "compiled training step", row_t, "compiled_ms")
        for name, row in (("llama_fwd_bf16", row_f), ("llama_train_bf16", row_t)):
            _ratios(row)
            out[name] = row
            _print(name, row)
    finally:
        blk.close()
        handle.close()


# ------------------------------------------------------------------------------------ ResNet-50
def bench_resnet(torch, E, res, cfg=None, dtypes=None):
    cfg = dict(cfg or RESNET)
    out = res.setdefault("models", {})
    names = {"fp16": ("float16", torch.float16), "bf16": ("bfloat16", torch.bfloat16)}
    dtypes = dtypes or os.environ.get("HIPDNN_BENCH_RESNET_DTYPES", "fp16").split(",")
    N, image, layers = cfg["batch"], cfg["image"], cfg["layers"]
    npar, nx, ndl = resnet_weights(cfg)
    cl = torch.channels_last
    for short in dtypes:
        dtype, tdt = names[short.strip()]
        key = f"resnet50_train_{short.strip()}"
        P = {}
        for k, v in npar.items():
            t = torch.from_numpy(v).to("cuda").to(tdt if is_low(k) else torch.float32)
            P[k] = t.contiguous(memory_format=cl) if t.dim() == 4 else t
        x = torch.from_numpy(np.ascontiguousarray(nx)).to("cuda").to(tdt).contiguous(memory_format=cl)
        dl = torch.from_numpy(ndl).to("cuda").to(tdt)
        n_src, pre_s, declined = prewarm_model("resnet", cfg, dtype)
        print(f"models {key}: {n_src} kernel sources prewarmed in {pre_s:.0f} s"
              + (f"; declined by the HIP engine: {declined}" if declined else ""), flush=True)
        handle = hf.Handle(stream=torch.cuda.current_stream().cuda_stream)
        t0 = time.perf_counter()
        net = resnet50_train.ResNet50(P, N, image, layers, handle=handle)
        build_s = time.perf_counter() - t0
        row = {"config": dict(cfg, layers=list(layers), dtype=short, layout="NHWC"), "build_s": build_s,
               "prewarm_s": pre_s, "kernel_sources": n_src, "graphs": len(net.G.graphs),
               "convolutions": net.n_convolutions()}
        try:
            trainable = [k for k in P if "running" not in k]
            # fp32 reference (running statistics on copies: they are not compared)
            restore = _fp32_off(torch)
            P32 = {k: v.detach().to(torch.float32, copy=True).requires_grad_(k in trainable)
                   for k, v in P.items()}
            l32 = torch_resnet(torch, P32, x.float(), layers)
            g32 = dict(zip(trainable, torch.autograd.grad(l32, [P32[k] for k in trainable], dl.float())))
            restore()
            l32 = l32.detach()
            del P32
            # ours (the first step also updates the model's running statistics)
            lo = net.step(x, dl).clone()
            torch.cuda.synchronize()
            errs = {"logits": rel_err(lo, l32)}
            errs.update({k: rel_err(net.grads[k], g32[k]) for k in trainable})
            row.update(engines=net.engines(), **err_summary(errs))
            row["ours_ms"] = median_ms(torch, lambda: net.step(x, dl), reps=REPS, warm=WARM)[0]
            # PyTorch, the same weights as leaf tensors, its own running statistics
            Pt = {k: (v.detach().clone().requires_grad_() if k in trainable else v.detach().clone())
                  for k, v in P.items()}
            params = [Pt[k] for k in trainable]
            lt = torch_resnet(torch, Pt, x, layers)
            gt = dict(zip(trainable, torch.autograd.grad(lt, params, dl)))
            terr = {"logits": rel_err(lt.detach(), l32)}
            terr.update({k: rel_err(gt[k], g32[k]) for k in trainable})
            row["torch_err_max"] = max(terr.values())
            row["torch_err_max_of"] = max(terr, key=terr.get)
            row["torch_err"] = terr
            del lt, gt, g32

            def eager_train():
                return torch.autograd.grad(torch_resnet(torch, Pt, x, layers), params, dl)
            _time_torch(torch, median_ms, eager_train, "eager training step", row, "eager_ms")
            if _compile_enabled():
                cm = torch.compile(lambda p_, x_: torch_resnet(torch, p_, x_, layers))

                def comp_train():
                    return torch.autograd.grad(cm(Pt, x), params, dl)
                _time_torch(torch, median_ms, comp_train, "compiled training step", row, "compiled_ms")
            _ratios(row)
            out[key] = row
            _print(key, row)
        finally:
            net.close()
            handle.close()
        torch.cuda.empty_cache()


def bench_models(torch, E, res):
    for fn in (bench_llama, bench_resnet):
        try:
            fn(torch, E, res)
        except Exception as e:  # noqa: BLE001 - record and go on
            import traceback
            traceback.print_exc()
            res.setdefault("models", {})[f"{fn.__name__}_error"] = f"{type(e).__name__}: {e}"[:2000]
        torch.cuda.empty_cache()


STEPS = [("models_llama", bench_llama), ("models_resnet", bench_resnet)]


# ------------------------------------------------------------------------------------ dry run
def _host_ms(fn, reps=3):
    fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts)


def dry_run(llama_cfg=None, resnet_cfg=None):
    """The hipDNN side of every row at tiny sizes with numpy on the CPU reference engine (no
    GPU, no torch): weights, the twin graphs and the HIP engine's analysis of them (no
    compilation), building, a forward and training step each, the timing loop.  Returns the
    rows."""
    lc, rc = dict(llama_cfg or LLAMA_TINY), dict(resnet_cfg or RESNET_TINY)
    rows = {}
    nw, nx, ndy = llama_weights(lc)
    n_src, pre_s, declined = prewarm_model("llama", lc, "bfloat16", compile_=False)
    blk = llama_block.LlamaBlock(nw, lc["batch"], lc["seq"], lc["heads"])
    try:
        blk.forward(nx)
        blk.backward(ndy)
        rows["llama_fwd"] = {"ours_ms": _host_ms(lambda: blk.forward(nx)), "engines": blk.engines(),
                             "kernel_sources": n_src, "declined": declined}
        rows["llama_train"] = {"ours_ms": _host_ms(lambda: (blk.forward(nx), blk.backward(ndy)))}
    finally:
        blk.close()
    p, x, dl = resnet_weights(rc)
    n_src, pre_s, declined = prewarm_model("resnet", rc, "float16", compile_=False)
    net = resnet50_train.ResNet50(p, rc["batch"], rc["image"], rc["layers"])
    try:
        net.step(x, dl)
        rows["resnet50_train"] = {"ours_ms": _host_ms(lambda: net.step(x, dl)), "engines": net.engines(),
                                  "kernel_sources": n_src, "declined": declined,
                                  "convolutions": net.n_convolutions()}
    finally:
        net.close()
    return rows


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dry-run", action="store_true", help="tiny sizes, CPU reference engine, numpy")
    a = ap.parse_args()
    if a.dry_run:
        for k, v in dry_run().items():
            print(k, v)
    else:
        sys.exit(os.system(f"{sys.executable} {os.path.join(HERE, 'gpu_bench.py')} --only models"))
