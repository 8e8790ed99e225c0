"""hipDNN plugin ABI conformance suite (``hipdnn-cabi conform``; pytest: ``--hipdnn-plugin``).

Runs every check against an engine plugin ``.so`` in child processes (a C driver compiled once
per run), so crashes and hangs become failed checks.  A heuristic plugin (hipdnnPluginGetType ==
HIPDNN_PLUGIN_TYPE_HEURISTIC) gets the heuristic-plugin checks instead.  See docs/conformance.md.

    from hipdnn_cabi.conformance import run_plugin_suite
    results = run_plugin_suite("libmyplugin.so")      # [Result(id, verdict, message, ...)]
"""
from __future__ import annotations

from .checks import load_checks, registry  # noqa: F401
from .core import (Fail, HeuristicSuite, Result, Scale, Skip, Suite, keyword_matcher,  # noqa: F401
                   make_suite, plugin_kind, run_checks)


def run_plugin_suite(path: str, *, keyword=None, xfails=(), scale=None, jobs: int = 8, backend=False,
                     plugin_dir=None, kind=None, backend_lib=None):
    """kind: "plugin" (engine), "heuristic", or None = detect (hipdnnPluginGetType, in a child).
    For a heuristic plugin, ``plugin_dir`` names the engine plugins of the host checks (default:
    the backend's own) and ``backend_lib`` the backend they run in (default: ours)."""
    if backend:
        kind = "backend"
    elif kind is None:
        kind = plugin_kind(path)
    sel = keyword_matcher(keyword)
    checks = [c for c in registry(kind).values() if sel(c.id)]
    suite = make_suite(path, kind, scale=scale, plugin_dir=plugin_dir, backend_lib=backend_lib)
    try:
        return run_checks(suite, checks, xfails=xfails, jobs=jobs)
    finally:
        suite.close()
