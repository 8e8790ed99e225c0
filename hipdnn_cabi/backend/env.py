"""The backend's environment variables, read from the C environment when they are consulted.

A C program that calls ``setenv("HIPDNN_PLUGIN_DIR", ...)`` after its first hipDNN call changes
the process environment (``environ``), not Python's ``os.environ`` — that mapping is a copy taken
when the embedded interpreter started.  hipDNN reads each variable at the moment it needs it (spec
§7: the plugin directory when the plugin manager is built, the heuristic variables at every
heuristic finalize, …), so every backend reader goes through :func:`get`, which asks libc's
``getenv`` through the embedded library.

Without the library (pure-Python unit tests) :func:`get` reads ``os.environ``; in a Python host
that is the same thing, because assigning to ``os.environ`` calls ``putenv``.
"""
from __future__ import annotations

import os

from . import runtime


def get(name: str, default: str | None = None) -> str | None:
    """The value of environment variable ``name`` now, or ``default`` when it is not set."""
    lib = runtime.lib
    getenv = getattr(lib, "hipdnn_cabi_getenv", None) if lib is not None else None
    if getenv is None:
        return os.environ.get(name, default)
    p = getenv(name.encode())
    if p == runtime.ffi.NULL:
        return default
    # copied at once: a later setenv may free the string getenv returned
    return os.fsdecode(runtime.ffi.string(p))


def get_stripped(name: str) -> str:
    """``get(name)`` with surrounding whitespace removed; "" when unset."""
    return (get(name) or "").strip()
