"""``hipdnn-cabi conform``: the plugin ABI conformance suite (or ``--backend``: the backend-API checks).

    hipdnn-cabi conform path/to/libplugin.so [--report report.json] [-k EXPR] [--xfail-file F]
    hipdnn-cabi conform path/to/libheuristic.so [--plugin-dir ENGINES]   # a heuristic plugin
    hipdnn-cabi conform --backend [path/to/libhipdnn_backend.so] [--plugin-dir DIR]

A plugin whose hipdnnPluginGetType answers HIPDNN_PLUGIN_TYPE_HEURISTIC gets the heuristic-plugin
checks (``--kind`` forces a suite).

Exit status: 0 when every selected must-pass check passes (skips and xfails allowed), 1 when one
fails, 2 on usage errors, 3 when the verdict is INCONCLUSIVE (no graph of the corpus — including
the ``--graph`` ones — was applicable, so the checks that execute never ran).
"""
from __future__ import annotations

import argparse
import os
import sys
import time

from .checks import registry
from .core import (Scale, Suite, default_backend, keyword_matcher, make_suite,  # noqa: F401
                   plugin_kind, read_xfail_file, run_checks)
from .report import plugin_identity, table, to_json, verdict_line, write_json


def parser():
    p = argparse.ArgumentParser(prog="hipdnn-cabi conform", description=__doc__.split("\n\n")[0])
    p.add_argument("plugin", nargs="?", help="engine or heuristic plugin shared object (.so)")
    p.add_argument("--kind", choices=("auto", "engine", "heuristic"), default="auto",
                   help="which plugin suite (default: from hipdnnPluginGetType)")
    p.add_argument("--backend", nargs="?", const="", default=None, metavar="LIB",
                   help="check a backend library instead (default: this package's libhipdnn_backend.so)")
    p.add_argument("--plugin-dir", metavar="DIR",
                   help="--backend: engine plugins for the checks that need an engine (default: none, they "
                   "skip); a heuristic plugin: the engines its host checks order (default: the backend's own)")
    p.add_argument("--graph", action="append", default=[], metavar="FILE",
                   help="add your own graph to the corpus: a Graph FlatBuffer (.bin) or its JSON form "
                        "(.json); repeatable.  Inputs are random, expected outputs come from the CPU "
                        "reference engine")
    p.add_argument("--report", metavar="JSON", help="write the JSON report here")
    p.add_argument("-k", dest="keyword", metavar="EXPR", help="select checks: substrings with and/or/not")
    p.add_argument("--xfail-file", metavar="F", help="file of check ids (or id substrings) expected to fail")
    p.add_argument("--list", action="store_true", help="list the check ids and exit")
    p.add_argument("--quick", action="store_true", help="reduced iteration counts (leak, threads, lifecycle)")
    p.add_argument("--leak-cycles", type=int, help="create/destroy cycles for conform.leak (default 10000)")
    p.add_argument("--timeout", type=float, help="seconds per child process (default 30)")
    p.add_argument("-j", "--jobs", type=int, default=min(8, os.cpu_count() or 1), help="checks run in parallel")
    p.add_argument("--workdir", help="keep the driver, graphs and cases here (default: a temp dir)")
    p.add_argument("-q", "--quiet", action="store_true", help="print only the summary line")
    return p


def main(argv=None) -> int:
    a = parser().parse_args(argv)
    backend_mode = a.backend is not None
    if backend_mode:
        kind = "backend"
    elif a.kind != "auto":
        kind = "plugin" if a.kind == "engine" else "heuristic"
    elif a.plugin and os.path.exists(a.plugin):
        kind = plugin_kind(a.plugin, timeout=a.timeout or 30.0)
    else:
        kind = "plugin"
    sel = keyword_matcher(a.keyword)
    checks = [c for c in registry(kind).values() if sel(c.id)]
    if a.list:
        for c in checks:
            print(f"{c.id}{'' if c.mustpass else '  (advisory)'}  {c.doc}")
        return 0
    scale = Scale.quick() if a.quick else Scale()
    if a.leak_cycles:
        scale.leak_cycles = a.leak_cycles
    if a.timeout:
        scale.timeout = a.timeout
    if backend_mode:
        target = a.backend or a.plugin or default_backend()
    else:
        if not a.plugin:
            parser().error("a plugin .so is required (or --backend)")
        target = a.plugin
    if not os.path.exists(target):
        print(f"hipdnn-cabi conform: {target}: no such file", file=sys.stderr)
        return 2
    t0 = time.monotonic()
    try:
        if kind == "heuristic":
            suite = make_suite(target, kind, scale=scale, workdir=a.workdir, plugin_dir=a.plugin_dir)
        else:
            suite = Suite(target, scale=scale, workdir=a.workdir, plugin_dir=a.plugin_dir,
                          user_graphs=a.graph)
    except (OSError, ValueError) as e:
        print(f"hipdnn-cabi conform: --graph: {e}", file=sys.stderr)
        return 2
    try:
        results = run_checks(suite, checks, xfails=read_xfail_file(a.xfail_file), jobs=a.jobs)
        subject = ({"path": suite.plugin, "kind": "backend"} if backend_mode else plugin_identity(suite))
        # the checks that matter execute corpus graphs: none applicable -> no verdict
        inconclusive = kind == "plugin" and not suite.applicable_pairs_or_none()
        data = to_json(results, subject, kind, time.monotonic() - t0, inconclusive)
    finally:
        suite.close()
    if a.report:
        write_json(a.report, data)
    if not a.quiet:
        if not backend_mode:
            print(f"{'heuristic ' if kind == 'heuristic' else ''}plugin {subject.get('name')!r} version {subject.get('version')!r} "
                  f"API {subject.get('api_version')!r}: {suite.plugin}")
        else:
            print(f"backend: {suite.plugin}")
        print(table(results, inconclusive=data["summary"]["verdict"] == "INCONCLUSIVE"))
    else:
        print(verdict_line(data["summary"]))
    return {"CONFORMANT": 0, "NOT CONFORMANT": 1, "INCONCLUSIVE": 3}[data["summary"]["verdict"]]


if __name__ == "__main__":
    sys.exit(main())
