#!/usr/bin/env python3
"""`make bench`: run every benchmark side by side and write JSON + PNG under bench/results/.

Each benchmark is a script or C program; missing optional pieces (e.g. torch) are skipped.
Results are ratios measured in one run on this machine, never assertions.
"""
from __future__ import annotations

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


def bench_api():
    exe = os.path.join(ROOT, "build", "api_bench")
    compile_c(os.path.join(ROOT, "bench", "api_bench.c"), exe)
    out = subprocess.run([exe, "20000"], capture_output=True, text=True, check=True).stdout
    r = json.loads(out)
    labels = [k[:-3] for k in r if k.endswith("_ns") and not isinstance(r[k], dict)]
    vals = [r[k + "_ns"] for k in labels]
    floor = r["c_floor_ns"]
    # issue 15: Set/Get <= 0.3 us, create+destroy <= 0.5 us (TENSOR, operations, variant packs)
    goals_ns = {"create_destroy_ns": 500, "set_int64_scalar_ns": 300, "set_int64_x8_ns": 300,
                "get_size_query_ns": 300, "get_fetch_x8_ns": 300, "get_int64_scalar_ns": 300,
                "op_create_destroy_ns": 500, "op_set_enum_ns": 300, "op_set_double_ns": 300,
                "op_set_i64vec_ns": 300, "op_get_enum_ns": 300, "op_get_double_ns": 300,
                "vp_create_destroy_ns": 500, "vp_set_x3_ns": 300, "vp_get_x3_ns": 300}
    thr = r.get("threads", {})
    r["threads_speedup_8_vs_1"] = {k: round(v["8"] / v["1"], 2) for k, v in thr.items()
                                   if isinstance(v, dict) and v.get("1")}
    # what the machine allowed in this run: each kind's 8-thread speedup over the C floor's
    fl = r["threads_speedup_8_vs_1"].get("c_floor_calls_per_s")
    if fl:
        r["threads_speedup_8_vs_1_over_c_floor"] = {k: round(v / fl, 2) for k, v in
                                                    r["threads_speedup_8_vs_1"].items()}
    r["ratio_to_c_floor"] = {k: round(v / max(floor, 0.1), 1) for k, v in r.items()
                             if k.endswith("_ns") and k != "c_floor_ns"}
    r["goals"] = goals_ns
    r["meets_goal"] = {k: r[k] <= g for k, g in goals_ns.items()}
    bar_chart(os.path.join(RESULTS, "api.png"), "Backend C API per-call cost (ns, log scale; red = goal)",
              labels, vals, "ns per call", [goals_ns.get(k + "_ns") for k in labels])
    return r


BENCHES = {"api": bench_api}


def extra_scripts():
    """Other issues' benchmark scripts (bench/*_bench.py), each writing its own results."""
    for f in sorted(os.listdir(os.path.join(ROOT, "bench"))):
        if f.endswith("_bench.py") and f != "gpu_bench.py":  # gpu_bench: make bench-gpu
            yield f


def main():
    os.makedirs(RESULTS, exist_ok=True)
    meta = {"machine": platform.machine(), "python": platform.python_version(),
            "cpus": os.cpu_count(), "when": time.strftime("%Y-%m-%dT%H:%M:%S")}
    for name, fn in BENCHES.items():
        print(f"bench {name} ...")
        res = fn()
        res["meta"] = meta
        with open(os.path.join(RESULTS, f"{name}.json"), "w") as fh:
            json.dump(res, fh, indent=2)
        print(json.dumps(res, indent=2))
    for script in extra_scripts():
        print(f"bench {script} ...")
        r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", script)])
        if r.returncode != 0:
            print(f"  {script} failed with {r.returncode}")
    # issue 15: the execute threads rows (execute.json) beside the Set/Get ones in api.json
    try:
        with open(os.path.join(RESULTS, "execute.json")) as fh:
            thr = json.load(fh)["so_plugin"]["threads"]
        with open(os.path.join(RESULTS, "api.json")) as fh:
            api = json.load(fh)
        api["execute_threads"] = thr
        with open(os.path.join(RESULTS, "api.json"), "w") as fh:
            json.dump(api, fh, indent=2)
    except (OSError, KeyError, ValueError) as e:
        print(f"  (no execute threads rows in api.json: {e})")


if __name__ == "__main__":
    main()
