#!/usr/bin/env python3
"""`make bench`: run every benchmark side by side and write JSON + PNG under bench/results/.

Each benchmark is a script or C program; missing optional pieces (e.g. torch) are skipped.
Results are ratios measured in one run on this machine, never assertions.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "bench", "results")
LIBDIR = os.path.join(ROOT, "hipdnn_cabi", "lib")


def compile_c(src, exe):
    subprocess.run(["gcc", "-O2", "-std=c11", "-I", os.path.join(ROOT, "include"), src, "-o", exe,
                    "-L", LIBDIR, "-lhipdnn_backend", f"-Wl,-rpath,{LIBDIR}", "-pthread", "-ldl"],
                   check=True)


def bar_chart(path, title, labels, values, unit, goals=None):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"  (matplotlib not installed: no {os.path.basename(path)})")
        return
    fig, ax = plt.subplots(figsize=(8, 4))
    bars = ax.bar(labels, values, color="#4c72b0")
    for b, v in zip(bars, values):
        ax.text(b.get_x() + b.get_width() / 2, v, f"{v:,.0f}", ha="center", va="bottom", fontsize=8)
    if goals:
        for i, g in enumerate(goals):
            if g:
                ax.hlines(g, i - 0.4, i + 0.4, colors="red", linestyles="dashed")
    ax.set_ylabel(unit)
    ax.set_yscale("log")
    ax.set_title(title)
    plt.xticks(rotation=20, ha="right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def bench_api(threads=8, results=RESULTS, suffix=""):
    exe = os.path.join(ROOT, "build", "api_bench")
    os.makedirs(os.path.dirname(exe), exist_ok=True)
    compile_c(os.path.join(ROOT, "bench", "api_bench.c"), exe)
    out = subprocess.run([exe, "20000", str(threads)], capture_output=True, text=True, check=True).stdout
    r = json.loads(out)
    labels = [k[:-3] for k in r if k.endswith("_ns") and not isinstance(r[k], dict)]
    vals = [r[k + "_ns"] for k in labels]
    floor = r["c_floor_ns"]
    # Set/Get <= 0.3 us, create+destroy <= 0.5 us (TENSOR, operations, variant packs)
    goals_ns = {"create_destroy_ns": 500, "set_int64_scalar_ns": 300, "set_int64_x8_ns": 300,
                "get_size_query_ns": 300, "get_fetch_x8_ns": 300, "get_int64_scalar_ns": 300,
                "op_create_destroy_ns": 500, "op_set_enum_ns": 300, "op_set_double_ns": 300,
                "op_set_i64vec_ns": 300, "op_get_enum_ns": 300, "op_get_double_ns": 300,
                "vp_create_destroy_ns": 500, "vp_set_x3_ns": 300, "vp_get_x3_ns": 300}
    thr = r.get("threads", {})
    r["threads_speedup_8_vs_1"] = {k: round(v["8"] / v["1"], 2) for k, v in thr.items()
                                   if isinstance(v, dict) and v.get("1") and "8" in v}
    top = str(max((int(t) for v in thr.values() if isinstance(v, dict) for t in v), default=1))
    if top not in ("1", "8"):
        r[f"threads_speedup_{top}_vs_1"] = {k: round(v[top] / v["1"], 2) for k, v in thr.items()
                                            if isinstance(v, dict) and v.get("1") and top in v}
    # what the machine allowed in this run: each kind's 8-thread speedup over the C floor's
    fl = r["threads_speedup_8_vs_1"].get("c_floor_calls_per_s")
    if fl:
        r["threads_speedup_8_vs_1_over_c_floor"] = {k: round(v / fl, 2) for k, v in
                                                    r["threads_speedup_8_vs_1"].items()}
    r["ratio_to_c_floor"] = {k: round(v / max(floor, 0.1), 1) for k, v in r.items()
                             if k.endswith("_ns") and k != "c_floor_ns"}
    r["goals"] = goals_ns
    r["meets_goal"] = {k: r[k] <= g for k, g in goals_ns.items()}
    bar_chart(os.path.join(results, f"api{suffix}.png"), "Backend C API per-call cost (ns, log scale; red = goal)",
              labels, vals, "ns per call", [goals_ns.get(k + "_ns") for k in labels])
    return r


BENCHES = {"api": bench_api}


def extra_scripts():
    """Other issues' benchmark scripts (bench/*_bench.py), each writing its own results."""
    for f in sorted(os.listdir(os.path.join(ROOT, "bench"))):
        if f.endswith("_bench.py") and f != "gpu_bench.py":  # gpu_bench: make bench-gpu
            yield f


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="",
                    help="comma-separated benchmarks: api and the stems of bench/*_bench.py "
                         "(execute, frontend, graph, ...); default all")
    ap.add_argument("--out-suffix", default="",
                    help="appended to each result name: api<suffix>.json, execute<suffix>.json "
                         "(api and execute only)")
    ap.add_argument("--threads", type=int, default=8,
                    help="largest thread count of the threads rows (1, 2, 4, ... up to it)")
    ap.add_argument("--results-dir", default=RESULTS)
    args = ap.parse_args()
    only = {x.strip() for x in args.only.split(",") if x.strip()}
    results, sfx = os.path.abspath(args.results_dir), args.out_suffix
    os.makedirs(results, exist_ok=True)
    meta = {"machine": platform.machine(), "python": platform.python_version(),
            "cpus": os.cpu_count(), "when": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "load_average": list(os.getloadavg())}
    for name, fn in BENCHES.items():
        if only and name not in only:
            continue
        print(f"bench {name} ...")
        res = fn(threads=args.threads, results=results, suffix=sfx)
        res["meta"] = meta
        with open(os.path.join(results, f"{name}{sfx}.json"), "w") as fh:
            json.dump(res, fh, indent=2)
        print(json.dumps(res, indent=2))
    for script in extra_scripts():
        stem = script[:-len("_bench.py")]
        if only and stem not in only:
            continue
        print(f"bench {script} ...")
        cmd = [sys.executable, os.path.join(ROOT, "bench", script)]
        env = dict(os.environ)
        if stem == "execute":
            cmd += ["--out", os.path.join(results, f"execute{sfx}.json")]
            env["EXECUTE_BENCH_THREADS"] = str(args.threads)
        r = subprocess.run(cmd, env=env)
        if r.returncode != 0:
            print(f"  {script} failed with {r.returncode}")
    # the execute threads rows (execute.json) beside the Set/Get ones in api.json
    try:
        with open(os.path.join(results, f"execute{sfx}.json")) as fh:
            thr = json.load(fh)["so_plugin"]["threads"]
        with open(os.path.join(results, f"api{sfx}.json")) as fh:
            api = json.load(fh)
        api["execute_threads"] = thr
        with open(os.path.join(results, f"api{sfx}.json"), "w") as fh:
            json.dump(api, fh, indent=2)
    except (OSError, KeyError, ValueError) as e:
        print(f"  (no execute threads rows in api{sfx}.json: {e})")


if __name__ == "__main__":
    main()
