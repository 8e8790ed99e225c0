"""Operation descriptors (spec §1.13): one descriptor class per operation of the catalog.

* :mod:`._base`: the shared, table-driven machinery: :class:`OpSpec` / :class:`A` (the
  declaration vocabulary, built from a catalog record by :meth:`OpSpec.from_catalog`), the enum
  maps, the C <-> FlatBuffers data type mapping, the generic :class:`OperationDescriptor`
  (set / finalize / get, ``to_node`` / ``from_node``) and the per-kind setters and getters.
* this package: for every operation of :mod:`hipdnn_cabi.schemas.catalog`, its declaration (in
  :data:`OPS`) and its descriptor class (an :class:`OperationDescriptor` subclass named after its
  FlatBuffers table, e.g. ``LayernormOperationDescriptor``, with ``SPEC``, ``DESCRIPTOR_TYPE`` and
  ``NAME``), plus :data:`BY_DESCRIPTOR` (descriptor type -> class) and :data:`BY_UNION`
  (NodeAttributes union index -> class).  The descriptor factory finds the classes by walking the
  Descriptor subclasses after importing this package.

Adding an operation needs nothing here: see docs/adding-an-operation.md.
"""
from __future__ import annotations

from ....schemas import catalog
from ._base import *  # noqa: F401,F403  (the machinery's public names)
from ._base import OpSpec, OperationDescriptor


def _descriptor_class(spec: OpSpec) -> type:
    return type(spec.cls_name, (OperationDescriptor,),
                {"SPEC": spec, "DESCRIPTOR_TYPE": spec.dtype, "NAME": spec.cls_name,
                 "__module__": __name__,
                 "__doc__": f"{spec.dtype.name}: the {spec.table} operation."})


OPS: list[OpSpec] = [OpSpec.from_catalog(op) for op in catalog.OPS]
CLASSES: tuple = tuple(_descriptor_class(s) for s in OPS)
BY_DESCRIPTOR: dict[int, type] = {int(c.SPEC.dtype): c for c in CLASSES}
BY_UNION: dict[int, type] = {c.SPEC.union_index: c for c in CLASSES}
globals().update({c.__name__: c for c in CLASSES})
