"""hipDNN plugin ABI conformance suite (``hipdnn-cabi conform``; pytest: ``--hipdnn-plugin``).

Runs every check against an engine plugin ``.so`` in child processes (a C driver compiled once
per run), so crashes and hangs become failed checks.  See docs/conformance.md.

    from hipdnn_cabi.conformance import run_plugin_suite
    results = run_plugin_suite("libmyplugin.so")      # [Result(id, verdict, message, ...)]
"""
from __future__ import annotations

from .core import Fail, Result, Scale, Skip, Suite, load_checks, run_checks  # noqa: F401


def run_plugin_suite(path: str, *, keyword=None, xfails=(), scale=None, jobs: int = 8, backend=False,
                     plugin_dir=None):
    from .core import keyword_matcher
    plugin, back = load_checks()
    sel = keyword_matcher(keyword)
    checks = [c for c in (back if backend else plugin).values() if sel(c.id)]
    suite = Suite(path, scale=scale, plugin_dir=plugin_dir)
    try:
        return run_checks(suite, checks, xfails=xfails, jobs=jobs)
    finally:
        suite.close()
