"""pytest plugin: ``pytest --hipdnn-plugin path/to/libplugin.so`` (or ``--hipdnn-backend [lib]``).

Registered through the ``pytest11`` entry point ``hipdnn_cabi_conformance``; without the entry
point use ``pytest -p hipdnn_cabi.conformance.pytest_plugin --hipdnn-plugin ...``.  Each check is
one test item, ``test_conformance[conform.<group>.<check>]``; ``-k`` selects as usual, and
``--hipdnn-xfail-file F`` marks ids (or id substrings) as expected failures.  A heuristic plugin
(hipdnnPluginGetType == HIPDNN_PLUGIN_TYPE_HEURISTIC) gets the heuristic-plugin checks.
"""
from __future__ import annotations

import os

import pytest

from .report import plugin_identity, to_json, write_json

SUITE_MODULE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_pytest_suite.py")


def pytest_addoption(parser):
    g = parser.getgroup("hipdnn-conformance", "hipDNN plugin ABI conformance")
    g.addoption("--hipdnn-plugin", metavar="SO", help="engine or heuristic plugin .so to check")
    g.addoption("--hipdnn-backend", metavar="LIB", nargs="?", const="", default=None,
                help="check a hipDNN backend library (default: this package's)")
    g.addoption("--hipdnn-plugin-dir", metavar="DIR",
                help="with --hipdnn-backend: engine plugins for the checks that need an engine; with a "
                "heuristic plugin: the engines of its host checks")
    g.addoption("--hipdnn-xfail-file", metavar="F", help="check ids expected to fail")
    g.addoption("--hipdnn-quick", action="store_true", help="reduced leak/thread iteration counts")
    g.addoption("--hipdnn-report", metavar="JSON", help="write the conformance JSON report")


def suite_kind(config) -> str:
    """"backend", "heuristic" or "plugin" (detected once per session from hipdnnPluginGetType)."""
    if config.getoption("--hipdnn-backend") is not None:
        return "backend"
    kind = getattr(config, "_hipdnn_kind", None)
    if kind is None:
        # lazy: pytest loads this plugin in every session, the suite (numpy) only on demand
        from .core import plugin_kind
        kind = config._hipdnn_kind = plugin_kind(config.getoption("--hipdnn-plugin"))
    return kind


def _active(config) -> bool:
    return bool(config.getoption("--hipdnn-plugin") or config.getoption("--hipdnn-backend") is not None)


def pytest_configure(config):
    if not _active(config):
        return
    try:
        from _pytest.config import Config
        explicit = config.args_source == Config.ArgsSource.ARGS
    except AttributeError:
        explicit = False
    if explicit:
        config.args.append(SUITE_MODULE)
    else:
        config.args[:] = [SUITE_MODULE]
    config._hipdnn_results = []


def pytest_sessionfinish(session):
    config = session.config
    if not _active(config) or not config.getoption("--hipdnn-report"):
        return
    suite = getattr(config, "_hipdnn_suite", None)
    backend = config.getoption("--hipdnn-backend") is not None
    subject = {"path": suite.plugin, "kind": "backend"} if (suite and backend) else \
        (plugin_identity(suite) if suite else {})
    write_json(config.getoption("--hipdnn-report"),
               to_json(config._hipdnn_results, subject, suite_kind(config), 0.0))


def pytest_unconfigure(config):
    suite = getattr(config, "_hipdnn_suite", None)
    if suite is not None:
        suite.close()
