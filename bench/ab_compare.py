#!/usr/bin/env python3
"""Compare two gpu_bench.py result files of the same run (an A/B of two trees on one machine).

For every benchmark row present in both, the change of our time (``*ours_ms`` / ``capi_ms`` /
``*_us`` rows of ours) and of the ratio to the peer measured beside it (``ratio`` /
``capi_ratio``: peer time / ours, which cancels a machine's drift between the two runs).  A row
is within tolerance when either its time or its peer-normalised ratio moved by at most ``--tol``.

Usage: bench/ab_compare.py BASE.json NEW.json [--tol 0.05] [--out report.json]
"""
from __future__ import annotations

import argparse
import json

TIME_KEYS = ("ours_ms", "capi_ms", "g_execute_us", "hipdnnBackendExecute_us",
             "frontend_style_execute_us", "plugin_execute_us")
RATIO_KEYS = ("ratio", "capi_ratio")


def rows(d, path=()):
    """(path, row dict) for every dict that holds a timing of ours."""
    if isinstance(d, dict):
        if any(k in d for k in TIME_KEYS):
            yield "/".join(path), d
        for k, v in d.items():
            yield from rows(v, path + (k,))


def compare(base, new, tol):
    b, n = dict(rows(base)), dict(rows(new))
    out = []
    for key in sorted(set(b) & set(n)):
        rb, rn = b[key], n[key]
        rec = {"row": key}
        for k in TIME_KEYS:
            if isinstance(rb.get(k), (int, float)) and isinstance(rn.get(k), (int, float)) and rb[k] > 0:
                rec[k] = round(rn[k] / rb[k], 4)          # > 1: the new tree is slower
        for k in RATIO_KEYS:
            if isinstance(rb.get(k), (int, float)) and isinstance(rn.get(k), (int, float)) and rn[k] > 0:
                rec[k] = round(rb[k] / rn[k], 4)          # > 1: the new tree is slower vs its peer
        moves = [v for k, v in rec.items() if k != "row"]
        if not moves:
            continue
        rec["within"] = min(moves) <= 1 + tol
        out.append(rec)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("base")
    ap.add_argument("new")
    ap.add_argument("--tol", type=float, default=0.05)
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    with open(a.base) as f:
        base = json.load(f)
    with open(a.new) as f:
        new = json.load(f)
    recs = compare(base, new, a.tol)
    bad = [r for r in recs if not r["within"]]
    for r in recs:
        flag = "ok  " if r["within"] else "SLOW"
        print(flag, r["row"], {k: v for k, v in r.items() if k not in ("row", "within")})
    print(f"{len(recs) - len(bad)} of {len(recs)} rows within {a.tol:.0%}")
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"tol": a.tol, "rows": recs, "within": len(recs) - len(bad),
                       "total": len(recs)}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
