"""Human table and JSON report."""
from __future__ import annotations

import json
import platform
import textwrap
import time

from .. import __name__ as _pkg  # noqa: F401


def plugin_identity(suite) -> dict:
    out = {"path": suite.plugin, "name": None, "version": None, "api_version": None, "engine_ids": []}
    try:
        run = suite.probe
        for key, tag in (("name", "name"), ("version", "version"), ("api_version", "api_version")):
            rec = run.one("string", tag)
            if rec and rec["st1"] == 0:
                out[key] = rec["value"]
        ids = run.one("ids")
        if getattr(suite, "policy_names", None):   # a heuristic plugin: its policies
            out.pop("engine_ids")
            out["policy_ids"] = [int(x) for x in ids["ids"]] if ids else []
            out["policy_names"] = {r["id"]: r["name"] for r in run.of("policy_name") if r["st"] == 0}
            return out
        if ids:
            out["engine_ids"] = [int(x) for x in ids["ids"]]
        out["engine_names"] = {r["id"]: r["name"] for r in run.of("engine_name") if r["st"] == 0}
    except Exception as e:  # identity is best effort
        out["error"] = str(e)
    return out


INCONCLUSIVE = ("INCONCLUSIVE: no graph of the corpus was applicable (the execute, workspace and "
                "serialization checks never ran); add graphs the plugin supports with --graph "
                "file.json|file.bin (repeatable; expected outputs come from the CPU reference engine)")


def summary(results, inconclusive: bool = False) -> dict:
    c = {}
    for r in results:
        c[r.verdict] = c.get(r.verdict, 0) + 1
    failed_must = [r.id for r in results if r.verdict == "fail" and r.mustpass]
    failed_adv = [r.id for r in results if r.verdict == "fail" and not r.mustpass]
    verdict = ("NOT CONFORMANT" if failed_must else "INCONCLUSIVE" if inconclusive else "CONFORMANT")
    return {"counts": c, "failed_mustpass": failed_must, "failed_advisory": failed_adv,
            "conformant": verdict == "CONFORMANT", "verdict": verdict}


def verdict_line(s: dict) -> str:
    if s["verdict"] == "NOT CONFORMANT":
        return "NOT CONFORMANT: " + ", ".join(s["failed_mustpass"])
    return INCONCLUSIVE if s["verdict"] == "INCONCLUSIVE" else "CONFORMANT"


def to_json(results, subject: dict, kind: str, seconds: float, inconclusive: bool = False) -> dict:
    return {"kind": kind, "subject": subject, "summary": summary(results, inconclusive),
            "seconds": round(seconds, 2),
            "host": {"python": platform.python_version(), "machine": platform.machine()},
            "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "results": [r.as_dict() for r in results]}


def table(results, width: int = 110, inconclusive: bool = False) -> str:
    idw = max([len(r.id) for r in results] + [8])
    lines = [f"{'check':<{idw}}  {'verdict':<8}  message", "-" * min(width + idw, 200)]
    for r in results:
        tag = r.verdict.upper() + ("" if r.mustpass or r.verdict != "fail" else "*")
        msg = r.message.replace("\n", " ")
        wrapped = textwrap.wrap(msg, width - 12) or [""]
        lines.append(f"{r.id:<{idw}}  {tag:<8}  {wrapped[0]}")
        for w in wrapped[1:6]:
            lines.append(f"{'':<{idw}}  {'':<8}  {w}")
    s = summary(results, inconclusive)
    counts = ", ".join(f"{v} {k}" for k, v in sorted(s["counts"].items()))
    lines.append("-" * min(width + idw, 200))
    lines.append(f"{counts}.  " + verdict_line(s))
    if s["failed_advisory"]:
        lines.append("(* advisory check, not in the must-pass list)")
    return "\n".join(lines)


def write_json(path: str, data: dict):
    with open(path, "w") as f:
        json.dump(data, f, indent=2)
        f.write("\n")
