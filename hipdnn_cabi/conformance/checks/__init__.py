"""Conformance checks, one module per C-function group; ids are ``conform.<group>.<check>``
(the heuristic-plugin and backend suites: one module each, ``conform.heuristic.*``, ``conform.backend.*``)."""
from . import (symbols, plugin_info, api_version, last_error, lifecycle, engine_ids,  # noqa: F401
               applicable, engine_details, workspace, execute, null_args, serialization,
               threads, leak, backend, runtime_pbv, overrides, heuristic)
