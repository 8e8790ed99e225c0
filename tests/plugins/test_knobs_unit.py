"""Knob FlatBuffer round trip and EngineConfig serialization (pure Python, no library)."""
from __future__ import annotations

from hipdnn_cabi.backend.descriptors import knob_info
from hipdnn_cabi.backend.descriptors.engine_config import serialize_engine_config
from hipdnn_cabi.backend.descriptors.knob_choice import FLOAT, INT, STRING
from hipdnn_cabi.backend.plugins.loader import fnv1a64, hex_id, parse_version
from hipdnn_cabi.schemas import verifier
from hipdnn_cabi.schemas._generated.EngineConfig import EngineConfig
from hipdnn_cabi.schemas._generated.Knob import Knob


def _roundtrip(k):
    raw = knob_info.serialize_knob(k)
    verifier.verify(raw, "Knob")
    return knob_info.from_flatbuffer(Knob.GetRootAs(raw, 0))


def test_knob_roundtrip_int_float_string():
    k = knob_info.KnobInfoDescriptor()
    k.knob_id, k.description, k.default = "tile", "tile size", (INT, 64)
    k.minimum, k.maximum, k.stride, k.valid_ints = (INT, 16), (INT, 256), 16, [16, 64]
    k.deprecated = True
    r = _roundtrip(k)
    assert (r.knob_id, r.description, r.default, r.minimum, r.maximum, r.stride, r.valid_ints,
            r.deprecated) == ("tile", "tile size", (INT, 64), (INT, 16), (INT, 256), 16, [16, 64], True)
    f = knob_info.KnobInfoDescriptor()
    f.knob_id, f.default, f.minimum, f.maximum = "alpha", (FLOAT, 0.5), (FLOAT, 0.0), (FLOAT, 1.0)
    r = _roundtrip(f)
    assert (r.default, r.minimum, r.maximum) == ((FLOAT, 0.5), (FLOAT, 0.0), (FLOAT, 1.0))
    s = knob_info.KnobInfoDescriptor()
    s.knob_id, s.default, s.valid_strings, s.string_max_length = "algo", (STRING, "a"), ["a", "bb"], 8
    r = _roundtrip(s)
    assert (r.default, r.valid_strings, r.string_max_length) == ((STRING, "a"), ["a", "bb"], 8)


def test_engine_config_flatbuffer():
    raw = serialize_engine_config(-5, [("tile", INT, 32), ("alpha", FLOAT, 0.25), ("algo", STRING, "x")])
    verifier.verify(raw, "EngineConfig")
    c = EngineConfig.GetRootAs(raw, 0)
    assert c.EngineId() == -5 and c.KnobsLength() == 3
    assert [c.Knobs(i).KnobId() for i in range(3)] == [b"tile", b"alpha", b"algo"]
    assert [c.Knobs(i).ValueType() for i in range(3)] == [INT, FLOAT, STRING]
    verifier.verify(serialize_engine_config(7), "EngineConfig")


def test_loader_helpers():
    assert hex_id(-2) == "0xFFFFFFFFFFFFFFFE"
    assert fnv1a64("") == fnv1a64(b"") and fnv1a64("a") & (2**64 - 1) == 0xAF63DC4C8601EC8C
    assert parse_version("1.2.3") == (1, 2, 3) and parse_version("1.2.3.4") == (1, 2, 3)
    assert parse_version("1.2") is None and parse_version("x.y.z") is None
