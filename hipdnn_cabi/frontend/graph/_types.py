"""Types shared by the ``Graph`` modules: errors, info records, constants, the node record."""
from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from ..._generated.enums import BehaviorNote, DataType, PointwiseMode
from ...errors import BadParamError, NotSupportedError
from .._ops import SPECS


class GraphNotSupportedError(NotSupportedError):
    """No engine configuration supports the graph (a frontend-only condition)."""


@dataclass(frozen=True)
class KnobInfo:
    """One tunable knob of an engine (KNOB_INFO descriptor, spec §1.12 / §2.8).  ``type`` is
    "int", "float" or "string"; unset optional fields are None (lists: empty)."""
    id: str
    description: str
    type: str
    default: object
    deprecated: bool = False
    minimum: object = None
    maximum: object = None
    stride: int | None = None
    valid_values: tuple = ()
    max_length: int | None = None


@dataclass(frozen=True)
class EngineConfigInfo:
    """One engine configuration the heuristics proposes (``get_engine_configs``)."""
    engine_id: int
    name: str | None
    workspace_size: int
    knobs: tuple


class BuildPlanPolicy(enum.Enum):
    HEURISTICS_CHOICE = "heuristics_choice"
    ALL = "all"


NO_ENGINE_MSG = "No engine configurations available for the graph."
DECLINE_MARK = " declined the graph: "


def decline_parts(text: str) -> list:
    """[(engine name or None, "<engine> declined the graph: <why>")] from the backend's
    "; "-joined decline reasons (a reason may itself contain "; ")."""
    if not text or DECLINE_MARK not in text:
        return []
    starts = [m.start(1) for m in re.finditer(r"(?:^|[;:] )(\S+)" + re.escape(DECLINE_MARK), text)]
    out = []
    for k, st in enumerate(starts):
        end = starts[k + 1] - 2 if k + 1 < len(starts) else len(text)
        chunk = text[st:end].rstrip("; ")
        out.append((chunk.split(DECLINE_MARK, 1)[0], chunk))
    return out
_SERIALIZE_PLAN_NOTE = int(BehaviorNote.HIPDNN_BEHAVIOR_NOTE_SUPPORTS_EXECUTION_PLAN_SERIALIZATION)
_CONTENT_PLAN = 2  # HIPDNN_SERIALIZED_CONTENT_EXECUTION_PLAN


def _enum_arg(enum, value, prefix, what):
    """``enum(value)`` from a member, an int or a (short) name; BadParamError listing the valid
    names otherwise (never a bare KeyError / ValueError)."""
    if isinstance(value, str):
        key = value.strip().upper()
        for cand in (key, prefix + key):
            if cand in enum.__members__:
                return enum[cand]
    else:
        try:
            return enum(value)
        except (ValueError, TypeError):
            pass
    names = ", ".join(m.name[len(prefix):] if m.name.startswith(prefix) else m.name for m in enum)
    raise BadParamError(f"unknown {what} {value!r} (one of: {names})")


def _pw(name):
    return _enum_arg(PointwiseMode, name, "HIPDNN_POINTWISE_", "pointwise mode")


class _Node:
    __slots__ = ("kind", "inputs", "outputs", "arrays", "attrs", "compute_data_type", "name")

    def __init__(self, kind, inputs, outputs, attrs, compute_data_type, name, arrays=None):
        self.kind = kind
        self.inputs = inputs          # role -> Tensor | None
        self.outputs = outputs        # role -> Tensor | None
        self.arrays = arrays or {}    # role -> [Tensor]
        self.attrs = attrs
        self.compute_data_type = DataType(compute_data_type) if compute_data_type is not None else None
        self.name = name

    def tensors(self):
        spec = SPECS[self.kind]
        out = []
        for role, _ in spec.inputs:
            if self.inputs.get(role) is not None:
                out.append(self.inputs[role])
        for role, _ in spec.outputs:
            if self.outputs.get(role) is not None:
                out.append(self.outputs[role])
        for role, _ in spec.arrays:
            out.extend(self.arrays.get(role) or ())
        # a ragged tensor's offsets tensor is a graph tensor too, ahead of the tensor it offsets
        withaux = []
        for t in out:
            aux = getattr(t, "_ragged", None)
            if aux is not None:
                withaux.append(aux)
            withaux.append(t)
        return withaux

    def input_tensors(self):
        return [t for t in self.inputs.values() if t is not None] + \
            [t for ts in self.arrays.values() for t in ts]

    def output_tensors(self):
        return [t for t in self.outputs.values() if t is not None]


