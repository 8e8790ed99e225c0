"""hipdnnBackendDescriptorType_t → descriptor class (spec §1.2's factory switch)."""
from __future__ import annotations

import importlib

from ..._generated.enums import DescriptorType
from ...errors import NotSupportedError
from .base import Descriptor

# Modules that define descriptor classes; each class registers through its DESCRIPTOR_TYPE.
_MODULES = ["tensor"]
_OPTIONAL_MODULES = ["graph", "operations", "engine_heuristic", "engine", "engine_config",
                     "execution_plan", "variant_pack", "knob_choice", "knob_info", "profiling_control"]

CLASSES: dict[int, type] = {}


def _load():
    def walk(cls):
        for sub in cls.__subclasses__():
            if sub.DESCRIPTOR_TYPE is not None and int(sub.DESCRIPTOR_TYPE) >= 0 and \
                    not getattr(sub, "c_resident", False) and "_c_base" not in vars(sub):
                # (not: views of C-resident packs, the store-backed twin of a class)
                CLASSES[int(sub.DESCRIPTOR_TYPE)] = sub
            walk(sub)

    for m in _MODULES:
        importlib.import_module(f"{__package__}.{m}")
    for m in _OPTIONAL_MODULES:
        try:
            importlib.import_module(f"{__package__}.{m}")
        except ModuleNotFoundError as e:
            if e.name != f"{__package__}.{m}":
                raise
    walk(Descriptor)


def create(dtype: int):
    if not CLASSES:
        _load()
    try:
        cls = CLASSES[dtype]
    except KeyError:
        try:
            name = DescriptorType(dtype).name
        except ValueError:
            name = str(dtype)
        raise NotSupportedError(f"Descriptor type {name} is not supported.") from None
    return cls()
