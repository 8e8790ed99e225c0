"""Serialized knob settings: ``KnobSetting`` FlatBuffers (engine_config.fbs) given to an ENGINECFG
with HIPDNN_ATTR_KNOB_CHOICE_SERIALIZED_VALUE, and the knob settings of a serialized
``EngineConfig`` (a heuristic policy's config for an engine).

A setting is ``(knob id, kind, value)`` with kind INT / FLOAT / STRING (the KnobValue union tags,
as in :mod:`.knob_choice`).  hipDNN accepts a buffer that verifies as a KnobSetting; it also
refuses, where it validates an engine config, an empty knob id, a missing or unknown value type and
a non-finite float: those are refused here at once.
"""
from __future__ import annotations

import math

from ...errors import BadParamError, NullPointerError
from .. import runtime
from .knob_choice import FLOAT, INT, MAX_KNOB_ID_LENGTH, MAX_KNOB_STRING_VALUE_LENGTH, STRING
from ...schemas._generated.FloatValue import FloatValue
from ...schemas._generated.IntValue import IntValue
from ...schemas._generated.StringValue import StringValue
from ...schemas import verifier
from ...schemas._generated.KnobSetting import KnobSetting
from ...schemas._generated.EngineConfig import EngineConfig

# A KnobSetting holds one id and one value: far below this.  A larger size is refused before the
# bytes are read (the pointer is the caller's; a lying size must not make us read far past it).
MAX_KNOB_SETTING_BYTES = 64 * 1024


def _setting(table) -> tuple:
    """(knob id, kind, value) of a generated KnobSetting table object, or a reason string."""
    kid = table.KnobId()
    if not kid:
        return "the knob id is empty"
    try:
        kid = kid.decode("utf-8")
    except UnicodeDecodeError:
        return "the knob id is not UTF-8"
    if len(kid.encode()) > MAX_KNOB_ID_LENGTH:
        return f"the knob id is longer than {MAX_KNOB_ID_LENGTH} bytes"
    kind = table.ValueType()
    tab = table.Value()
    if kind not in (INT, FLOAT, STRING) or tab is None:
        return f"knob {kid} has no int, float or string value"
    if kind == INT:
        v = IntValue()
        v.Init(tab.Bytes, tab.Pos)
        return kid, INT, int(v.Value())
    if kind == FLOAT:
        v = FloatValue()
        v.Init(tab.Bytes, tab.Pos)
        value = float(v.Value())
        if not math.isfinite(value):
            return f"knob {kid} has a non-finite value"
        return kid, FLOAT, value
    v = StringValue()
    v.Init(tab.Bytes, tab.Pos)
    raw = v.Value() or b""
    if len(raw) > MAX_KNOB_STRING_VALUE_LENGTH:
        return f"knob {kid}: string value longer than {MAX_KNOB_STRING_VALUE_LENGTH} bytes"
    try:
        return kid, STRING, raw.decode("utf-8")
    except UnicodeDecodeError:
        return f"knob {kid}: string value is not UTF-8"


def knob_setting_from_bytes(raw: bytes) -> tuple | str:
    """(knob id, kind, value), or a reason string when ``raw`` is not a valid KnobSetting."""
    try:
        verifier.verify(raw, "KnobSetting")
    except verifier.VerificationError as e:
        return f"not a KnobSetting FlatBuffer ({e})"
    return _setting(KnobSetting.GetRootAs(raw, 0))


def parse_knob_setting(what: str, ptr: int, size: int) -> tuple:
    """One ``hipdnnBackendFlatbufferData_t`` element of KNOB_CHOICE_SERIALIZED_VALUE (hipDNN's
    statuses: NULL pointer -> BAD_PARAM_NULL_POINTER, size 0 or a malformed buffer -> BAD_PARAM)."""
    if not ptr:
        raise NullPointerError(f"{what}: Flatbuffer data pointer is null.")
    if size == 0:
        raise BadParamError(f"{what}: Flatbuffer data size must be > 0.")
    if size > MAX_KNOB_SETTING_BYTES:
        raise BadParamError(f"{what}: Flatbuffer data size {size} is larger than a knob setting "
                            f"can be ({MAX_KNOB_SETTING_BYTES} bytes at most).")
    ffi = runtime.ffi
    raw = bytes(ffi.buffer(ffi.cast("char*", ptr), size))
    got = knob_setting_from_bytes(raw)
    if isinstance(got, str):
        raise BadParamError(f"{what}: Invalid knob setting flatbuffer: {got}.")
    return got


def engine_config_knobs(raw: bytes, engine_id: int) -> list | str:
    """The knob settings of a serialized EngineConfig for ``engine_id``, or a reason string when
    the config is malformed, names another engine, or sets a knob twice."""
    try:
        verifier.verify(raw, "EngineConfig")
    except verifier.VerificationError as e:
        return f"not an EngineConfig FlatBuffer ({e})"
    c = EngineConfig.GetRootAs(raw, 0)
    if c.EngineId() != engine_id:
        return f"the config is for engine {c.EngineId()}, not {engine_id}"
    out, seen = [], set()
    for i in range(c.KnobsLength()):
        got = _setting(c.Knobs(i))
        if isinstance(got, str):
            return got
        if got[0] in seen:
            return f"knob {got[0]} is set twice"
        seen.add(got[0])
        out.append(got)
    return out
