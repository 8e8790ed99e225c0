"""Signature keys and the plan-builder registry of the CPU reference engine (RFC 004).

A :class:`SignatureKey` is built from one graph node and its tensors: the operation (the
NodeAttributes member name, plus the mode for pointwise / reduction nodes), the data type of
every tensor the node reads or writes (by role, as hipDNN enum *names*), the node's compute
data type and the *layout class* of the node's tensors.

The :class:`PlanBuilderRegistry` maps every supported key to the node plan builder that handles
it.  It is filled lazily, on first access, from the builders of :mod:`.ops`
(each builder class lists the keys it supports).  A node whose key is not in the registry makes
the whole engine NOT applicable to the graph - an unsupported combination never runs.

Data types are named as in ``hipdnnDataType_t`` without the prefix (``FLOAT``, ``HALF``,
``BFLOAT16``, ``DOUBLE``, ``INT8``, ``UINT8``, ``INT32``, ``INT64``, ``BOOLEAN``), mapped from
the FlatBuffers ``DataType`` enum *by name* (the two enums number their members differently).
The FlatBuffers schema has no BOOLEAN: the backend serialises a BOOLEAN tensor as ``UNSET``,
so ``UNSET`` reads as ``BOOLEAN``.

Layout classes: ``"strided"`` - every output tensor's (dims, strides) addresses each element
once (any packing: NCHW, NHWC, padded, permuted); inputs may use any strides, including 0
(broadcast) and negative ones.  ``"aliased"`` - some output element is addressed twice (a zero
or overlapping stride); no builder is registered for it.
"""
from __future__ import annotations

import threading
from typing import NamedTuple

# FlatBuffers enum value -> name, per schema enum (map by name, never by number), from the
# catalog; the HIP engine's codegen also imports it from here.
from hipdnn_cabi.schemas.catalog import FB_NAMES

FLOATS = ("FLOAT", "DOUBLE", "HALF", "BFLOAT16")
INTS = ("INT32", "INT8", "UINT8")
BOOL = "BOOLEAN"
SUPPORTED_TYPES = FLOATS + INTS + ("INT64", BOOL)

STRIDED, ALIASED = "strided", "aliased"


def dtype_name(fb_value) -> str:
    """FlatBuffers DataType value -> hipDNN type name (``UNSET`` -> ``BOOLEAN``)."""
    n = FB_NAMES["DataType"].get(int(fb_value), None)
    if n is None:
        return f"UNKNOWN_{int(fb_value)}"
    return BOOL if n == "UNSET" else n


def kernel_type(name: str) -> str:
    """hipDNN type name -> the kernels' ``HIPDNN_DATA_<NAME>`` key."""
    return "HIPDNN_DATA_" + name


def default_compute(types) -> str:
    """Compute type used when a node leaves it UNSET: DOUBLE when any operand is double."""
    return "DOUBLE" if "DOUBLE" in types else "FLOAT"


class SignatureKey(NamedTuple):
    """operation x (role, data type)... x compute data type x layout class."""
    op: str
    dtypes: tuple          # ((role, type name), ...) in the builder's role order
    compute: str
    layout: str = STRIDED

    def describe(self) -> str:
        ts = ", ".join(f"{r}={t}" for r, t in self.dtypes)
        return f"{self.op}({ts}; compute={self.compute}; layout={self.layout})"


def layout_class(outputs) -> str:
    """STRIDED when every output tensor addresses each of its elements exactly once."""
    for t in outputs:
        if not non_overlapping(t.dims, t.strides):
            return ALIASED
    return STRIDED


def non_overlapping(dims, strides) -> bool:
    pairs = sorted((abs(int(s)), int(d)) for d, s in zip(dims, strides) if int(d) > 1)
    need = 1
    for s, d in pairs:
        if s < need:
            return False
        need = s * d
    return True


class PlanBuilderRegistry:
    """SignatureKey -> node plan builder, initialised once on first access."""

    def __init__(self, builder_classes):
        self._classes = list(builder_classes)
        self._registry = None
        self._lock = threading.Lock()

    def _initialize(self):
        reg = {}
        for cls in self._classes:
            b = cls()
            for key in cls.supported_keys():
                if key in reg:
                    raise RuntimeError(f"duplicate signature key {key.describe()}")
                reg[key] = b
        self._registry = reg

    @property
    def registry(self) -> dict:
        if self._registry is None:
            with self._lock:
                if self._registry is None:
                    self._initialize()
        return self._registry

    def get_plan_builder(self, key: SignatureKey):
        return self.registry.get(key)

    def __len__(self):
        return len(self.registry)

    def __contains__(self, key):
        return key in self.registry

    def keys(self):
        return self.registry.keys()
