"""The CPU reference engine against the operation catalog (hipdnn_cabi.schemas.catalog): every
catalog operation has a builder registered for its table, or a reason why the engine does not
implement it; each builder's role lists are the catalog's."""
from __future__ import annotations

import pytest

from engine_plugins.cpu_reference.engine import REGISTRY
from engine_plugins.cpu_reference.ops import BUILDERS, BY_KIND, FAMILIES
from hipdnn_cabi.schemas import catalog

ENGINE = "cpu_reference"
OPS = [pytest.param(op, id=op.name) for op in catalog.OPS]
BUILDER_PARAMS = [pytest.param(b, id=b.__name__) for b in BUILDERS]


@pytest.fixture(scope="module")
def registered():
    """The builder classes the PlanBuilderRegistry holds keys for."""
    return {type(b) for b in REGISTRY.registry.values()}


@pytest.mark.parametrize("op", OPS)
def test_operation_has_a_builder_or_a_reason(op, registered):
    why = op.not_applicable(ENGINE)
    if why is not None:
        assert why.strip()
        assert op.table not in BY_KIND, f"{op.name} has a CPU builder and a not-applicable reason"
        return
    cls = BY_KIND.get(op.table)
    assert cls is not None, f"no CPU builder for {op.name} ({op.table})"
    assert cls in registered, f"{cls.__name__} has no signature key in the registry"
    assert cls.OP is op
    assert cls.__module__.rsplit(".", 1)[1] == op.family


@pytest.mark.parametrize("cls", BUILDER_PARAMS)
def test_builder_roles_are_the_catalogs(cls):
    op = catalog.by_table(cls.KIND)
    assert op is not None and cls.OP is op
    declined = frozenset(cls.DECLINED)
    # a declined role must be optional: a node without it still runs
    assert declined <= op.optional, sorted(declined - op.optional)
    assert cls.INPUTS == tuple(r for r in op.inputs if r not in declined)
    assert cls.OUTPUTS == tuple(r for r in op.outputs if r not in declined)
    assert cls.OPTIONAL == op.optional - declined
    # the signature key names mandatory tensors of the node only
    assert set(cls.KEY_ROLES) <= set(cls.INPUTS + cls.OUTPUTS)
    assert not set(cls.KEY_ROLES) & cls.OPTIONAL


def test_one_builder_per_table():
    assert len(BY_KIND) == len(BUILDERS)


def test_families_are_the_catalogs():
    implemented = {op.family for op in catalog.OPS if op.not_applicable(ENGINE) is None}
    assert set(FAMILIES) == implemented
    assert list(FAMILIES) == [f for f in catalog.FAMILIES if f in implemented]
