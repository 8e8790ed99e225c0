"""Finding Python plugins and turning one into a C function table.

A Python plugin is a ``.py`` file or a package directory (with ``__init__.py``) — or an importable
module name, or a ``hipdnn_cabi.engine_plugins`` entry point — whose module exposes either
``hipdnn_plugin`` (an :class:`EnginePluginBase` instance or subclass) or ``create_plugin()``.

:func:`load_python_plugin` returns the same shape the host's .so loader
(``hipdnn_cabi.backend.plugins.loader.load_shared_object``) produces as its table:
``{C function name: function pointer as int}`` — here the addresses of static slot functions
inside libhipdnn_backend.so — so the host runs one code path for both kinds::

    table = load_python_plugin(path)
    plugin = EnginePlugin(path, table, 0)        # hipdnn_cabi.backend.plugins.loader.EnginePlugin
    plugin.initialize(cb)
    ...
    unload_python_plugin(table)                   # frees the slot (after the host is done)
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys

from . import slots
from .cabi import CAdapter
from .core import EnginePluginBase
from .heuristics import HeuristicCAdapter, HeuristicPluginBase, is_heuristic_plugin

ENTRY_POINT_GROUP = "hipdnn_cabi.engine_plugins"
_loaded: dict = {}   # id(table) -> slot


def is_python_plugin_path(path: str) -> bool:
    if os.path.isdir(path):
        return os.path.isfile(os.path.join(path, "__init__.py"))
    return path.endswith(".py") and os.path.isfile(path)


PLUGIN_NAMES = ("hipdnn_plugin", "create_plugin")


def declares_plugin(path: str) -> bool:
    """Whether a ``.py`` file (or a package's ``__init__.py``) declares itself a hipDNN plugin:
    its module top level binds ``hipdnn_plugin`` or ``create_plugin`` (an assignment, a def/class,
    or an import of that name).  Decided by parsing the source with :mod:`ast` — nothing is
    executed, so helper scripts beside a plugin never run."""
    import ast
    f = os.path.join(path, "__init__.py") if os.path.isdir(path) else path
    try:
        with open(f, "rb") as fh:
            tree = ast.parse(fh.read(), filename=f)
    except (OSError, SyntaxError, ValueError):
        return False
    for st in tree.body:
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and \
                st.name in PLUGIN_NAMES:
            return True
        if isinstance(st, (ast.Import, ast.ImportFrom)):
            if any((a.asname or a.name) in PLUGIN_NAMES for a in st.names):
                return True
        targets = []
        if isinstance(st, ast.Assign):
            targets = st.targets
        elif isinstance(st, (ast.AnnAssign, ast.AugAssign)):
            targets = [st.target]
        for t in targets:
            for n in ast.walk(t):
                if isinstance(n, ast.Name) and n.id in PLUGIN_NAMES:
                    return True
    return False


def find_python_plugins(directory: str) -> list:
    """Python plugins in a plugin directory: ``*.py`` files and package dirs that declare
    themselves (:func:`declares_plugin`); other Python files are never imported."""
    out = []
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return out
    for n in names:
        if n.startswith(("_", ".")):
            continue
        p = os.path.join(directory, n)
        if is_python_plugin_path(p) and declares_plugin(p):
            out.append(os.path.realpath(p))
    return out


def entry_point_plugins() -> list:
    """(name, loaded object) for every ``hipdnn_cabi.engine_plugins`` entry point."""
    from importlib.metadata import entry_points
    try:
        eps = entry_points(group=ENTRY_POINT_GROUP)
    except TypeError:  # Python < 3.10
        eps = entry_points().get(ENTRY_POINT_GROUP, [])
    return [(ep.name, ep) for ep in eps]


def import_plugin_module(spec: str):
    """A module from a ``.py`` path, a package directory or a module name."""
    if os.path.exists(spec):
        path = os.path.realpath(spec)
        if os.path.isdir(path):
            init = os.path.join(path, "__init__.py")
            if not os.path.isfile(init):
                raise ImportError(f"{path} is not a Python package (no __init__.py)")
            file, search = init, [path]
        else:
            file, search = path, None
        stem = os.path.splitext(os.path.basename(path.rstrip("/")))[0]
        modname = "_hipdnn_pyplugin_%s_%s" % (stem, hashlib.sha1(path.encode()).hexdigest()[:10])
        if modname in sys.modules:
            return sys.modules[modname]
        s = importlib.util.spec_from_file_location(modname, file,
                                                   submodule_search_locations=search)
        mod = importlib.util.module_from_spec(s)
        sys.modules[modname] = mod
        try:
            s.loader.exec_module(mod)
        except BaseException:
            sys.modules.pop(modname, None)
            raise
        return mod
    return importlib.import_module(spec)


def plugin_object(obj):
    """The plugin instance behind a module / class / instance / factory."""
    bases = (EnginePluginBase, HeuristicPluginBase)
    if isinstance(obj, bases):
        return obj
    if isinstance(obj, type) and issubclass(obj, bases):
        return obj()
    if hasattr(obj, "hipdnn_plugin"):
        return plugin_object(obj.hipdnn_plugin)
    if hasattr(obj, "create_plugin"):
        return plugin_object(obj.create_plugin())
    if callable(obj) and not isinstance(obj, type(os)):
        return plugin_object(obj())
    raise TypeError(f"{obj!r} exposes neither hipdnn_plugin nor create_plugin()")


def resolve(path_or_module):
    """Plugin instance from a path, module name, module object or plugin object."""
    if isinstance(path_or_module, str):
        return plugin_object(import_plugin_module(path_or_module))
    if hasattr(path_or_module, "load") and hasattr(path_or_module, "group"):  # entry point
        return plugin_object(path_or_module.load())
    return plugin_object(path_or_module)


def load_python_plugin(path_or_module) -> dict:
    """Bind the plugin to a free slot of libhipdnn_backend.so and return its function table
    ``{C function name: address}``.  Must run inside the embedded backend (its slots installed)."""
    backend = slots.backend()
    if backend is None:
        raise RuntimeError("load_python_plugin needs the embedded libhipdnn_backend.so")
    ffi, lib = backend
    plugin = resolve(path_or_module)
    adapter = make_adapter(plugin, ffi)
    k = slots.BACKEND.bind(adapter)
    table = {}
    for name in adapter.provided():
        p = lib.hipdnn_cabi_plugin_slot_fn(k, name.encode())
        if not p:
            slots.BACKEND.unbind(k)
            raise RuntimeError(f"no slot function for {name}")
        table[name] = int(p)
    slots.set_fast_execute(k, adapter)
    _loaded[id(table)] = (k, table)
    return table


def make_adapter(plugin, ffi):
    """The C ABI adapter for a plugin object: engine (CAdapter) or heuristic (HeuristicCAdapter)."""
    return HeuristicCAdapter(plugin, ffi) if is_heuristic_plugin(plugin) else CAdapter(plugin, ffi)


def unload_python_plugin(table: dict) -> None:
    """Free the slot behind a table returned by load_python_plugin (its pointers become inert:
    they return HIPDNN_PLUGIN_STATUS_NOT_INITIALIZED)."""
    ent = _loaded.pop(id(table), None)
    if ent is not None:
        slots.set_fast_execute(ent[0], None)
        slots.BACKEND.unbind(ent[0])
