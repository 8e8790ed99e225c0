"""The operation catalog is the one source of every layer's operation tables
(docs/adding-an-operation.md): each catalog operation has a backend descriptor class, a frontend
builder (or a reason why not), a builder in each engine (or a reason why not) and a test."""
from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import pytest

from hipdnn_cabi.backend.descriptors import operations as backend_ops
from hipdnn_cabi.frontend import Graph
from hipdnn_cabi.frontend._ops import SPECS
from hipdnn_cabi.schemas import catalog
from hipdnn_cabi.schemas._generated.schema_table import TABLES

ROOT = pathlib.Path(__file__).resolve().parents[1]
OPS = [pytest.param(op, id=op.name) for op in catalog.OPS]


def test_generated_catalog_is_current():
    r = subprocess.run([sys.executable, str(ROOT / "tools/catalog/gen_catalog.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("op", OPS)
def test_backend_descriptor(op):
    cls = backend_ops.BY_DESCRIPTOR[op.descriptor]
    assert cls.SPEC.table == op.table and int(cls.SPEC.optype) == op.optype
    assert backend_ops.BY_UNION[op.union_index] is cls
    tensor_attrs = [a.attr for a in cls.SPEC.attrs if a.kind in ("tensor", "tensors")]
    assert tensor_attrs == [r.attr for r in op.roles]


@pytest.mark.parametrize("op", OPS)
def test_frontend_builder(op):
    if op.frontend is not None:
        assert op.name not in SPECS and op.frontend.strip()
        return
    assert callable(getattr(Graph, op.name, None)), f"Graph.{op.name} missing"
    spec = SPECS[op.name]
    assert [r for r, _ in spec.inputs] == list(op.inputs)
    assert [r for r, _ in spec.outputs] == list(op.outputs)


@pytest.mark.parametrize("op", OPS)
def test_operation_has_a_test(op):
    """Some test calls the operation's frontend builder, or builds its table by name."""
    pat = re.compile(rf"\.{op.name}\(|\b{op.table}\b")
    for p in ROOT.joinpath("tests").rglob("*.py"):
        if p.name != "test_catalog.py" and pat.search(p.read_text(errors="replace")):
            return
    pytest.fail(f"no test builds {op.name} ({op.table})")


def test_role_classes_name_existing_roles():
    for op in catalog.OPS:
        assert set(op.scalar_roles) <= set(op.by_role)
        for r in op.roles:
            assert r.type_class in (catalog.DATA, catalog.OUT, catalog.PARAM, catalog.INDEX,
                                    catalog.ANY)
            assert r.field in {f[1] for f in TABLES[op.table]}
