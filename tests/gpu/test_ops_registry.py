"""CI (no GPU): the HIP engine's operation families follow the catalog, and no engine imports
another engine.

Every catalog operation is either implemented by the module of its family in
``engine_plugins/hip_kernels/ops/`` (``KINDS`` from the catalog, ``check`` and ``emit``) or marked
not applicable on this engine in tools/catalog/overlay.toml; the role lists the engine works
with are the catalog's."""
from __future__ import annotations

import ast
import os

import pytest

from engine_plugins.hip_kernels import ops
from engine_plugins.hip_kernels.ops import _base
from hipdnn_cabi.schemas import catalog

ENGINES_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "engine_plugins")


def test_families_are_the_catalogs():
    implemented = [f for f in catalog.FAMILIES if _base.kinds(f)]
    assert list(ops.FAMILIES) == implemented
    for m in ops.MODULES:
        fam = m.__name__.rsplit(".", 1)[1]
        assert m.KINDS == _base.kinds(fam), fam
        assert callable(m.check) and callable(m.emit), fam


@pytest.mark.parametrize("op", catalog.OPS, ids=lambda o: o.name)
def test_every_operation_has_a_family_module_or_a_reason(op):
    why = op.not_applicable(_base.ENGINE)
    if why:
        assert op.table not in ops.FAMILY
        return
    assert ops.FAMILY[op.table].__name__.endswith(f".ops.{op.family}")


def test_runtime_scalars_are_catalog_scalar_roles():
    for kind, roles in ops.RUNTIME_SCALARS.items():
        assert set(roles) <= set(catalog.by_table(kind).scalar_roles), kind


def _imports(path):
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            yield from ((a.name, 0) for a in n.names)
        elif isinstance(n, ast.ImportFrom):
            yield (n.module or ""), n.level
            if n.level and not n.module:
                yield from ((a.name, n.level) for a in n.names)


def test_no_engine_imports_another_engine():
    engines = sorted(d for d in os.listdir(ENGINES_DIR)
                     if os.path.isfile(os.path.join(ENGINES_DIR, d, "__init__.py")))
    assert "hip_kernels" in engines and "cpu_reference" in engines
    bad = []
    for eng in engines:
        root = os.path.join(ENGINES_DIR, eng)
        for dirpath, _, files in os.walk(root):
            for f in files:
                if not f.endswith(".py"):
                    continue
                path = os.path.join(dirpath, f)
                depth = os.path.relpath(dirpath, root).count(os.sep) + (dirpath != root)
                for mod, level in _imports(path):
                    head = mod.split(".")
                    if level == 0:
                        target = head[1] if head[0] == "engine_plugins" and len(head) > 1 else \
                            head[2] if head[:2] == ["hipdnn_cabi", "engines"] and len(head) > 2 else None
                    elif level == depth + 2:      # relative, from engine_plugins/
                        target = head[0] or None
                    else:
                        target = None
                    if target and target != eng and target in engines:
                        bad.append(f"{os.path.relpath(path, ENGINES_DIR)} imports {target}")
    assert not bad, bad
