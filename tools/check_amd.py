#!/usr/bin/env python3
"""make check-amd: every kernel source the HIP engine can emit for AMD gfx942 and gfx90a,
compiled offline to amdgcn code objects with hiprtc's options, checked and summarised.

The corpus, per target:

* every kernel body ``engine_plugins/hip_kernels/kernels/*.hip`` on its own;
* every program the engine's public ``build_program`` makes for a set of graphs covering every
  operation family, data type and layout (the graph builders of tests/gpu: ``sample_graphs``,
  ``ext_sample_graphs``, the attention and fp8 configurations), under every engine option that
  applies on AMD (the matrix-unit switch, split-K, the SIMT-core knobs, the fp8 / block-scale
  knobs, TF32; the NVIDIA-only knobs too, which must change nothing);
* every program the engine emits while ``pytest -m gpu tests/gpu`` runs against a recording AMD
  device (``tests/amd/amd_record.py``: the GPU tests' own graphs, knobs and harnesses; the
  device is gfx942 and each plan is also built for gfx90a).

Sources are shared by content (a source is compiled once per target however many programs emit
it); results are cached by content hash under ``--cache`` (default build/amd).  Each code object
must be an amdgcn ELF for the target that defines every kernel the engine looks up in it
(``hipModuleGetFunction``), without spills or scratch; the GEMM / convolution / attention
kernels on the matrix cores must hold MFMA instructions.  Exit status 1 when any source fails.
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import contextlib
import hashlib
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [p for p in (ROOT, HERE, os.path.join(ROOT, "tests", "gpu")) if p not in sys.path]

import amd_toolchain as tc  # noqa: E402

TARGETS = {"gfx942": 304, "gfx90a": 110}      # target -> compute units (MI300X, MI250X GCD)
# kernels that run on the matrix cores on these targets: their code must hold MFMA
MFMA_KERNELS = ("hdn_gemm_mfma", "hdn_attn_fwd_mfma", "hdn_attn_bwd_mfma")
KDIR = os.path.join(ROOT, "engine_plugins", "hip_kernels", "kernels")
# engine options (environment knobs, docs/gpu.md) that the AMD path reads, and the NVIDIA-only
# ones (they must not change an AMD program: dedup by content shows it)
AMD_KNOBS = [{}, {"HIPDNN_CABI_HIP_MMA": "0"}, {"HIPDNN_CABI_HIP_GEMM": "simt"},
             {"HIPDNN_CABI_HIP_SPLITK": "0"}, {"HIPDNN_CABI_HIP_SPLITK": "3"},
             {"HIPDNN_CABI_HIP_SIMT_NHWC": "1"}, {"HIPDNN_CABI_HIP_SIMT_NHWC": "0"},
             {"HIPDNN_CABI_HIP_SIMT_MVEC": "0"}, {"HIPDNN_CABI_HIP_SIMT_ROWS": "0"},
             {"HIPDNN_CABI_HIP_SIMT_VEC": "0"}, {"HIPDNN_CABI_HIP_WGRAD_SWAP": "1"},
             {"HIPDNN_CABI_HIP_WGRAD_SWAP": "0"}, {"HIPDNN_CABI_HIP_STRIDED_DGRAD": "0"},
             {"HIPDNN_CABI_HIP_FP8_CVT": "0"}, {"HIPDNN_CABI_HIP_BSQ_LANES": "0"},
             {"HIPDNN_CABI_HIP_TF32": "1"}, {"HIPDNN_CABI_HIP_CONV_WINOGRAD": "1"}]
NVIDIA_KNOBS = [{"HIPDNN_CABI_HIP_TILE": "128x64"}, {"HIPDNN_CABI_HIP_STAGES": "3"},
                {"HIPDNN_CABI_HIP_TMA": "0"}, {"HIPDNN_CABI_HIP_ROWS": "0"},
                {"HIPDNN_CABI_HIP_ATTN": "mma"}, {"HIPDNN_CABI_HIP_WGRAD_TMA": "0"},
                {"HIPDNN_CABI_HIP_TMA_STORE": "1"}, {"HIPDNN_CABI_HIP_CONV1X1_TMA": "0"},
                {"HIPDNN_CABI_HIP_CONV_IM2COL": "1"}]
FAMILIES = [("hdn_gemm_mfma", "gemm/conv (MFMA)"), ("hdn_gemm_simt", "gemm/conv (SIMT)"),
            ("hdn_gemm_splitk", "gemm split-K finish"), ("hdn_transpose", "layout transpose"),
            ("hdn_attn", "attention"), ("hdn_bsq", "block-scale quantize"),
            ("hdn_bsdq", "block-scale dequantize"), ("hdn_moe", "MoE route / gather / wgrad"), ("hdn_bn", "batchnorm"),
            ("hdn_reduce", "reduction"), ("hdn_ln", "norms"), ("hdn_rms", "norms"),
            ("hdn_norm", "norms"), ("hdn_pool", "resample"), ("hdn_pw", "pointwise"),
            ("hdn_ew", "pointwise")]


def family(item):
    names = item["names"] if not item["body"] else set()
    if "hdn_moe_tile_active" in item["source"] and not item["body"]:
        return "MoE grouped GEMM (MFMA)" if "hdn_gemm_mfma" in names else "MoE grouped GEMM (SIMT)"
    for n in sorted(names):
        for p, f in FAMILIES:
            if n.startswith(p):
                return f
    return "other" if names else "body"


def headers():
    """What the engine hands the compiler as in-memory headers: every kernels/*.h."""
    out = {}
    for n in sorted(os.listdir(KDIR)):
        if n.endswith(".h"):
            with open(os.path.join(KDIR, n), encoding="utf-8") as f:
                out[n] = f.read()
    return out


@contextlib.contextmanager
def env(extra):
    old = {k: os.environ.get(k) for k in extra}
    os.environ.update(extra)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class Corpus:
    """Sources by (target, content hash): the kernel names looked up in each, where it came from."""

    def __init__(self):
        self.items = {}
        self.programs = {t: 0 for t in TARGETS}
        self.declined = {t: [] for t in TARGETS}

    def add(self, arch, src, names, origin, body=False):
        k = hashlib.sha256(f"{arch}\0{src}".encode()).hexdigest()
        it = self.items.get(k)
        if it is None:
            it = self.items[k] = {"key": k, "arch": arch, "source": src, "names": set(),
                                  "origins": [], "body": body}
        it["names"].update(names)
        if len(it["origins"]) < 3:
            it["origins"].append(origin)
        return it

    def add_program(self, arch, prog, origin):
        self.programs[arch] += 1
        for st in prog.steps:
            if st[0] == "launch":
                self.add(arch, st[1], {st[2]}, origin)


def engine_graphs():
    """(name, graph bytes) over every family, dtype and layout (the tests/gpu builders)."""
    from gpu_testlib import sample_graphs
    from ext_samples import ext_sample_graphs
    out = list(sample_graphs()) + list(ext_sample_graphs())
    import test_attention as ta
    for i, c in enumerate(ta.CONFIGS + ta.WG_CONFIGS):
        out.append((f"sdpa_fwd{i}", ta.fwd_graph(**c)[1]))
    for i, c in enumerate(ta.BWD_CONFIGS):
        cb = {k: v for k, v in c.items() if k not in ("bshd", "seq", "drop", "stats", "scale_mode")}
        out.append((f"sdpa_bwd{i}", ta.bwd_graph(**cb)[1]))
    # dropout and masks in the backward too, and the forward without stats / with a runtime scale
    extra = [dict(dt="HALF", B=2, H=2, Hkv=1, Sq=77, Skv=90, D=64, dropout_probability=0.3),
             dict(dt="BFLOAT16", B=1, H=2, Hkv=2, Sq=70, Skv=70, D=128, causal_mask=True,
                  dropout_probability=0.1)]
    for i, c in enumerate(extra):
        ts, g = ta.bwd_graph(**c)
        out.append((f"sdpa_bwd_drop{i}", _with_dropout_tensors(g, ta)))
    import test_fp8 as tf
    for dt in ("FP8_E4M3", "FP8_E5M2"):
        for o in (dt, "HALF", "FLOAT"):
            out.append((f"fp8_mm_{dt}_{o}", tf._mm_graph(dt, o)[-1]))
        for lay in ("nchw", "nhwc"):
            out.append((f"fp8_conv_{dt}_{lay}", tf._conv_graph(dt, lay, 16)[-1]))
    return out


def _with_dropout_tensors(g, ta):
    """A backward graph with seed / offset tensors (the builder of the tests has none)."""
    from hipdnn_cabi.plugin_sdk import parse_graph
    pg = parse_graph(g)
    a = pg.nodes[0].attrs
    from gpu_testlib import T, graph_bytes, node
    ts = []
    for u, t in sorted(pg.tensors.items()):
        ts.append(T(u, [int(d) for d in t.dims], _dt(t), strides=[int(s) for s in t.strides]))
    ts += [T(8, [1, 1, 1, 1], "INT64"), T(9, [1, 1, 1, 1], "INT64")]
    attrs = {k: v for k, v in a.items() if v is not None}
    attrs.update(seed_tensor_uid=8, offset_tensor_uid=9)
    return graph_bytes(ts, [node("SdpaBackwardAttributes", attrs)])


def _dt(t):
    from engine_plugins.hip_kernels.codegen import dtype_name
    return dtype_name(t.dtype)


def build_corpus(corpus, targets, log):
    from engine_plugins.hip_kernels.program import NotApplicable, build_program
    from hipdnn_cabi.plugin_sdk import parse_graph
    for arch in targets:
        for n in sorted(os.listdir(KDIR)):
            if n.endswith(".hip"):
                with open(os.path.join(KDIR, n), encoding="utf-8") as f:
                    corpus.add(arch, f.read(), set(), f"body {n}", body=True)
    graphs = [(n, parse_graph(g)) for n, g in engine_graphs()]
    for arch in targets:
        for knobs in AMD_KNOBS + NVIDIA_KNOBS:
            mma = knobs.get("HIPDNN_CABI_HIP_MMA", "1") != "0"
            tf32 = knobs.get("HIPDNN_CABI_HIP_TF32") == "1"
            with env(knobs):
                for name, g in graphs:
                    try:
                        prog = build_program(g, use_mma=mma, sms=TARGETS[arch], arch=arch, tf32=tf32)
                    except NotApplicable as e:
                        if not knobs:
                            corpus.declined[arch].append((name, str(e)))
                        continue
                    k = ",".join(f"{a[len('HIPDNN_CABI_HIP_'):]}={b}" for a, b in knobs.items())
                    corpus.add_program(arch, prog, f"{name}{' [' + k + ']' if k else ''}")
    log(f"check-amd: engine corpus: {len(graphs)} graphs x {len(AMD_KNOBS) + len(NVIDIA_KNOBS)} "
        f"option sets -> {sum(corpus.programs.values())} programs")


def record_gpu_tests(corpus, cache, log, pytest_args=()):
    """Run ``pytest -m gpu tests/gpu`` against the recording AMD device; add what it recorded."""
    out = os.path.join(cache, "gpu_tests_recorded.jsonl")
    if os.path.exists(out):
        os.remove(out)
    envx = dict(os.environ, HIPDNN_CABI_AMD_RECORD=out,
                PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "tests", "amd"), ROOT,
                                            os.environ.get("PYTHONPATH", "")]))
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "amd_record", "-m", "gpu",
           "-p", "no:cacheprovider", "-o", "addopts=", os.path.join(ROOT, "tests", "gpu"),
           *pytest_args]
    t0 = time.time()
    r = subprocess.run(cmd, cwd=ROOT, env=envx, capture_output=True, text=True)
    tail = (r.stdout.strip().splitlines() or [""])[-1]
    log(f"check-amd: tests/gpu on the recording AMD device ({time.time() - t0:.0f} s): {tail}")
    if not os.path.exists(out):
        raise SystemExit(f"check-amd: the tests/gpu recording wrote nothing:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    n = 0
    tests = set()
    with open(out) as f:
        for line in f:
            e = json.loads(line)
            if e["arch"] in corpus.programs:
                corpus.add(e["arch"], e["source"], {e["name"]}, f"tests/gpu {e['test']}")
                corpus.programs[e["arch"]] += e.get("program", 0)
                tests.add(e["test"])
                n += 1
    log(f"check-amd: recorded {n} launches from {len(tests)} tests")
    return {"tests": len(tests), "launches": n, "summary": tail}


# ---------------------------------------------------------------------------------- compile
def _declared(src):
    return set(re.findall(r'extern\s+"C"\s+__global__\s+(?:void\s+)?(?:__launch_bounds__\([^)]*\)\s*)?'
                          r'(?:void\s+)?(\w+)\s*\(', src))


def compile_one(chain, item, hdrs, hdr_hash, objdir):
    arch, src = item["arch"], item["source"]
    key = hashlib.sha256("\0".join([chain.identity, " ".join(chain.argv(arch)[1:]), hdr_hash,
                                    src]).encode()).hexdigest()
    cpath = os.path.join(objdir, key[:2], key + ".json")
    try:
        with open(cpath) as f:
            r = json.load(f)
        r["cached"] = True
        return r
    except (OSError, ValueError):
        pass
    t0 = time.time()
    r = {"cached": False}
    try:
        img = chain.compile(src, "kernel.hip", (), arch, hdrs)
    except RuntimeError as e:
        r.update(ok=False, error=str(e)[-4000:], seconds=time.time() - t0)
        return r                           # failures are not cached: always retried
    r["seconds"] = time.time() - t0
    try:
        r["defined"] = tc.kernels_defined(img)
        import tempfile
        with tempfile.NamedTemporaryFile(suffix=".co") as f:
            f.write(img)
            f.flush()
            md = chain.metadata(f.name)
            r["isa"] = chain.isa_counts(f.name)
        r["target"] = md["target"]
        r["kernels"] = md["kernels"]
        r["bytes"] = len(img)
        r["ok"] = True
    except (ValueError, subprocess.CalledProcessError) as e:
        r.update(ok=False, error=f"not an amdgcn code object: {e}")
        return r
    os.makedirs(os.path.dirname(cpath), exist_ok=True)
    tmp = cpath + f".{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump(r, f)
    os.replace(tmp, cpath)
    return r


def evaluate(item, r, launched):
    """The reasons this source fails (empty: it passes)."""
    if not r.get("ok"):
        return [r.get("error", "failed")]
    why = []
    arch = item["arch"]
    if r.get("target") != f"amdgcn-amd-amdhsa--{arch}":
        why.append(f"target {r.get('target')} is not {arch}")
    want = set(item["names"])
    if item["body"]:               # a body on its own: the kernels the engine launches from it
        want = _declared(item["source"]) & launched
    missing = sorted(want - set(r.get("defined", ())))
    if missing:
        why.append(f"kernels not defined: {', '.join(missing)} (hipModuleGetFunction would fail)")
    for k, md in r.get("kernels", {}).items():
        if md.get("vgpr_spill_count", 0) or md.get("sgpr_spill_count", 0):
            why.append(f"{k}: spills ({md.get('vgpr_spill_count')} VGPR, {md.get('sgpr_spill_count')} SGPR)")
        if md.get("private_segment_fixed_size", 0):
            why.append(f"{k}: {md['private_segment_fixed_size']} bytes of scratch per lane")
    for k in want:
        if k in MFMA_KERNELS and not any(x.startswith("v_mfma") for x in r.get("isa", {}).get(k, {})):
            why.append(f"{k}: no MFMA instruction")
    return why


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--install", action="store_true", help="apt-get the toolchain when missing")
    ap.add_argument("--jobs", "-j", type=int, default=int(os.environ.get("CHECK_AMD_JOBS", "2")))
    ap.add_argument("--cache", default=os.environ.get("CHECK_AMD_CACHE", os.path.join(ROOT, "build", "amd")))
    ap.add_argument("--targets", default=",".join(TARGETS))
    ap.add_argument("--no-gpu-tests", action="store_true", help="skip the tests/gpu recording")
    ap.add_argument("--report", default=None, help="JSON report path (default: <cache>/report.json)")
    ap.add_argument("--limit", type=int, default=0, help="compile at most N sources (debugging)")
    a = ap.parse_args(argv)
    t_start = time.time()
    log = lambda s: print(s, flush=True)  # noqa: E731
    if a.install:
        tc.install(log)
    chain = tc.Toolchain(a.cache)
    log(f"check-amd: {chain.version}; device libs {chain.devlibs}; hiprtc header "
        f"{'.'.join(map(str, tc.HIP_VERSION))}")
    targets = [t for t in a.targets.split(",") if t]
    corpus = Corpus()
    build_corpus(corpus, targets, log)
    rec = None if a.no_gpu_tests else record_gpu_tests(corpus, a.cache, log)
    items = list(corpus.items.values())
    if a.limit:
        items = items[:a.limit]
    hdrs = headers()
    hh = hashlib.sha256(json.dumps(hdrs, sort_keys=True).encode()).hexdigest()
    objdir = os.path.join(a.cache, "objs")
    per = ", ".join(f"{t}: {sum(1 for i in items if i['arch'] == t)}" for t in targets)
    log(f"check-amd: {len(items)} distinct sources ({per}), {a.jobs} jobs")
    t0 = time.time()
    results = {}
    with cf.ThreadPoolExecutor(max(1, a.jobs)) as ex:
        futs = {ex.submit(compile_one, chain, it, hdrs, hh, objdir): it["key"] for it in items}
        for i, fu in enumerate(cf.as_completed(futs), 1):
            results[futs[fu]] = fu.result()
            if i % 100 == 0:
                log(f"  {i}/{len(items)} ({time.time() - t0:.0f} s)")
    t_compile = time.time() - t0
    # a body on its own must define the kernels the engine launches from programs built on it
    launched = {}
    for it in items:
        if it["body"]:
            launched[it["key"]] = set().union(*[p["names"] for p in items if not p["body"] and
                                                p["arch"] == it["arch"] and it["source"] in p["source"]])
    report = {"toolchain": chain.version, "targets": {}, "failures": [],
              "compile_seconds": round(t_compile, 1), "gpu_tests": rec}
    fails = 0
    for t in targets:
        mine = [it for it in items if it["arch"] == t]
        fam, mf = {}, {}
        st = {"sources": len(mine), "bodies": sum(1 for i in mine if i["body"]),
              "programs": corpus.programs[t], "failed": 0, "compiled_now": 0, "max_vgpr": 0,
              "max_agpr": 0, "max_lds": 0, "spills": 0, "scratch": 0,
              "declined": corpus.declined[t][:20]}
        for it in mine:
            r = results[it["key"]]
            why = evaluate(it, r, launched.get(it["key"], set()))
            if it["body"]:
                st.setdefault("body_kernels", {})[it["origins"][0][5:]] = r.get("defined", [])
            f = family(it)
            e = fam.setdefault(f, {"sources": 0, "failed": 0, "mfma": {}})
            e["sources"] += 1
            st["compiled_now"] += int(r.get("ok", False) and not r.get("cached"))
            for k, md in r.get("kernels", {}).items():
                st["max_vgpr"] = max(st["max_vgpr"], md.get("vgpr_count", 0))
                st["max_agpr"] = max(st["max_agpr"], md.get("agpr_count", 0))
                st["max_lds"] = max(st["max_lds"], md.get("group_segment_fixed_size", 0))
                st["spills"] += md.get("vgpr_spill_count", 0) + md.get("sgpr_spill_count", 0)
                st["scratch"] += int(bool(md.get("private_segment_fixed_size", 0)))
            for k, ins in r.get("isa", {}).items():
                for m, c in ins.items():
                    if m.startswith("v_mfma"):
                        e["mfma"][m] = e["mfma"].get(m, 0) + c
                        mf[m] = mf.get(m, 0) + c
            if why:
                e["failed"] += 1
                st["failed"] += 1
                report["failures"].append({"arch": t, "names": sorted(it["names"]),
                                           "origins": it["origins"], "why": why})
        st["families"] = fam
        st["mfma"] = mf
        report["targets"][t] = st
        fails += st["failed"]
    report["seconds"] = round(time.time() - t_start, 1)
    path = a.report or os.path.join(a.cache, "report.json")
    with open(path, "w") as f:
        json.dump(report, f, indent=1, default=sorted)
    for t, st in report["targets"].items():
        log(f"\n{t}: {st['sources']} sources ({st['bodies']} bodies, {st['programs']} programs), "
            f"{st['failed']} failed; max {st['max_vgpr']} VGPR / {st['max_agpr']} AGPR, "
            f"LDS <= {st['max_lds']} B, spills {st['spills']}, kernels with scratch {st['scratch']}")
        bk = st.get("body_kernels", {})
        log("  bodies alone: " + ", ".join(f"{b} ({len(k)} kernels)" for b, k in sorted(bk.items())))
        for f, e in sorted(st["families"].items()):
            mfs = ", ".join(f"{m} x{c}" for m, c in sorted(e["mfma"].items()))
            log(f"  {f:24s} {e['sources']:4d} sources{'  FAILED ' + str(e['failed']) if e['failed'] else ''}"
                f"{'  ' + mfs if mfs else ''}")
    for fl in report["failures"][:30]:
        log(f"\nFAIL {fl['arch']} {','.join(fl['names']) or '(body)'} from {'; '.join(fl['origins'])}:\n  "
            + "\n  ".join(w[:1500] for w in fl["why"]))
    log(f"\ncheck-amd: {len(items)} sources, {fails} failed; compile {t_compile:.0f} s "
        f"({sum(1 for r in results.values() if r.get('cached'))} cached), total {report['seconds']:.0f} s; "
        f"report {path}")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
