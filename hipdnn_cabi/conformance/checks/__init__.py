"""Conformance checks, one module per C-function group; ids are ``conform.<group>.<check>``
(the heuristic-plugin and backend suites: one module each, ``conform.heuristic.*``, ``conform.backend.*``)."""
from ..core import BACKEND_CHECKS, HEURISTIC_CHECKS, PLUGIN_CHECKS
# Each group module registers its checks (core.check) when imported.
from . import (symbols, plugin_info, api_version, last_error, lifecycle, engine_ids,  # noqa: F401
               applicable, engine_details, workspace, execute, null_args, serialization,
               threads, leak, backend, runtime_pbv, overrides, heuristic)


def load_checks():
    return PLUGIN_CHECKS, BACKEND_CHECKS


def registry(kind: str) -> dict:
    """The checks of one suite: "plugin" (engine plugins), "heuristic" or "backend"."""
    return {"plugin": PLUGIN_CHECKS, "engine": PLUGIN_CHECKS, "heuristic": HEURISTIC_CHECKS,
            "backend": BACKEND_CHECKS}[kind]
