"""Finding plugin files (spec §3.3): the engine and heuristic plugin hosts share these path rules;
a relative path is relative to libhipdnn_backend.so's directory."""
from __future__ import annotations

import os

from ...plugin_sdk import loader as pyloader
from .. import runtime
from ._logs import info as _info, warn as _warn

DEFAULT_ENGINE_DIR = "hipdnn_plugins/engines/"
DEFAULT_HEURISTIC_DIR = "hipdnn_plugins/heuristics/"


def backend_dir() -> str:
    """The folder of the path libhipdnn_backend.so was loaded by (a symlink's folder, not its
    target's), canonical: hipDNN's getCurrentModuleDirectory."""
    d = runtime.ffi.string(runtime.lib.hipdnn_cabi_library_dir()).decode("utf-8", "replace")
    return os.path.realpath(d) if d else os.getcwd()


def _resolve(p: str) -> str:
    if not os.path.isabs(p):
        p = os.path.join(backend_dir(), p)
    return os.path.realpath(p)  # weak canonical: works for missing paths too


def candidate_paths(search_paths) -> list:
    """The plugin files a set of plugin paths names (engine and heuristic plugins alike, spec
    §3.3): a directory lists its ``*.so`` files and the Python plugins that declare themselves; a
    Python plugin file or package is taken as named; a name without extension means
    ``lib<name>.so``; other file names are kept (the extension is checked at load time)."""
    out = set()
    for raw in search_paths:
        p = _resolve(raw)
        if pyloader.is_python_plugin_path(p):
            out.add(os.path.realpath(p))  # a Python plugin named directly (.py or package)
        elif os.path.isdir(p):
            out.update(pyloader.find_python_plugins(p))
            try:
                names = os.listdir(p)
            except OSError as e:
                _warn(f"Cannot list plugin directory {p}: {e}")
                continue
            for n in names:
                f = os.path.join(p, n)
                if os.path.splitext(n)[1] == ".so" and os.path.isfile(f):
                    out.add(os.path.realpath(f))
        elif os.path.basename(raw.rstrip("/")) and not raw.endswith("/"):
            d, base = os.path.split(p)
            if not os.path.splitext(base)[1]:
                out.add(os.path.realpath(os.path.join(d, f"lib{base}.so")))
            else:
                out.add(p)  # extension checked at load time
        elif raw in (DEFAULT_ENGINE_DIR, DEFAULT_HEURISTIC_DIR):
            _info(f"Default plugin directory {p} does not exist; no plugins from it")
        else:
            _warn(f"Plugin path {p} is neither a directory nor a file name; ignored")
    return sorted(out)
