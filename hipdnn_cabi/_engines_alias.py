"""``hipdnn_cabi.engines`` in a source checkout.

The default engines live in the repository's top-level ``engine_plugins/`` folder.  A wheel installs
that folder as the package ``hipdnn_cabi.engines`` (setup.py maps it with ``package_dir``), so no
generic top-level ``engine_plugins`` package lands in site-packages.  In a source checkout (also an
editable install) there is no ``hipdnn_cabi/engines/`` directory; this finder makes
``hipdnn_cabi.engines[.X...]`` the *same module objects* as ``engine_plugins[.X...]``, so code and
tests may use either name without getting two copies of an engine.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import os
import sys

PREFIX = "hipdnn_cabi.engines"
REAL = "engine_plugins"


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, real: str):
        self.real = real

    def create_module(self, spec):
        return importlib.import_module(self.real)

    def exec_module(self, module):  # already executed under its real name
        pass


class _AliasFinder(importlib.abc.MetaPathFinder):
    def __init__(self, root: str):
        self.root = root

    def find_spec(self, fullname, path=None, target=None):
        if fullname != PREFIX and not fullname.startswith(PREFIX + "."):
            return None
        real = REAL + fullname[len(PREFIX):]
        if REAL not in sys.modules and importlib.util.find_spec(REAL) is None:
            if self.root not in sys.path:
                sys.path.append(self.root)
        try:
            spec = importlib.util.find_spec(real)
        except ModuleNotFoundError:
            return None
        if spec is None:
            return None
        return importlib.util.spec_from_loader(
            fullname, _AliasLoader(real), is_package=spec.submodule_search_locations is not None)


def install(package_dir: str) -> None:
    """Install the alias when ``package_dir`` (hipdnn_cabi/) has no ``engines`` package but its
    parent holds ``engine_plugins/`` (a source checkout)."""
    if os.path.isdir(os.path.join(package_dir, "engines")):
        return
    root = os.path.dirname(package_dir)
    if not os.path.isfile(os.path.join(root, REAL, "__init__.py")):
        return
    if not any(isinstance(f, _AliasFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _AliasFinder(root))
