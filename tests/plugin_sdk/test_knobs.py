"""The plugin SDK's knobs (hipdnn_cabi/plugin_sdk/knobs.py): declarations written into
EngineDetails, hipDNN's global knobs, knob settings resolved against an engine's knobs (unknown
ids ignored, a wrong type or an invalid value refused when strict), HIPDNN_FORCE_BENCHMARKING,
and the benchmarking plan."""
from __future__ import annotations

import types

import pytest

from hipdnn_cabi.plugin_sdk import knobs
from hipdnn_cabi.plugin_sdk.errors import BAD_PARAM, INVALID_VALUE, PluginError


def cfg(**settings):
    tag = {int: "IntValue", float: "FloatValue", str: "StringValue"}
    return types.SimpleNamespace(knobs={k.replace("__", "."): {"type": tag[type(v)],
                                                                "value": {"value": v}}
                                        for k, v in settings.items()})


def test_global_knob_names_are_hipdnns():
    assert knobs.BENCHMARKING_KNOB_NAME == "global.benchmarking"
    assert knobs.WORKSPACE_SIZE_LIMIT_KNOB_NAME == "global.workspace_size_limit"
    assert knobs.FORCE_BENCHMARKING_ENV_NAME == "HIPDNN_FORCE_BENCHMARKING"
    assert [k.knob_id for k in knobs.GLOBAL_KNOBS] == ["global.benchmarking",
                                                       "global.workspace_size_limit"]


def test_specs_round_trip_through_engine_details():
    from hipdnn_cabi.backend.descriptors.knob_info import from_flatbuffer
    from hipdnn_cabi.plugin_sdk.graph import build_engine_details
    from hipdnn_cabi.schemas._generated.EngineDetails import EngineDetails
    specs = (*knobs.GLOBAL_KNOBS,
             knobs.KnobSpec("x.scale", knobs.FLOAT, 0.5, "a float", -1.0, 1.0),
             knobs.KnobSpec("x.algo", knobs.STRING, "a", "a string", valid=("a", "b"), max_length=4),
             knobs.KnobSpec("x.old", knobs.INT, 3, deprecated=True))
    raw = build_engine_details(7, (), "E", lambda b: [s.build(b) for s in specs])
    d = EngineDetails.GetRootAs(raw, 0)
    got = {k.knob_id: k for k in (from_flatbuffer(d.Knobs(i)) for i in range(d.KnobsLength()))}
    assert got["global.benchmarking"].default == (1, 0)
    assert (got["global.benchmarking"].minimum, got["global.benchmarking"].maximum) == ((1, 0), (1, 1))
    assert got["global.workspace_size_limit"].default == (1, knobs.INT64_MAX)
    assert got["x.scale"].minimum == (2, -1.0) and got["x.algo"].valid_strings == ["a", "b"]
    assert got["x.algo"].string_max_length == 4 and got["x.old"].deprecated


def test_resolve_defaults_unknown_and_wrong_types(monkeypatch):
    monkeypatch.delenv("HIPDNN_FORCE_BENCHMARKING", raising=False)
    logs = []
    log = lambda sev, msg: logs.append((sev, msg))
    g = knobs.GLOBAL_KNOBS
    assert knobs.resolve(None, g) == {"global.benchmarking": 0,
                                      "global.workspace_size_limit": knobs.INT64_MAX}
    v = knobs.resolve(cfg(global__benchmarking=1, nope=3), g, log=log, engine="E")
    assert v["global.benchmarking"] == 1
    assert any("knob nope is not a knob of this engine; ignored" in m for _, m in logs)
    with pytest.raises(PluginError) as e:                  # a float for an int knob
        knobs.resolve(cfg(global__benchmarking=1.0), g, engine="E")
    assert e.value.status == BAD_PARAM and "takes a int value, not a float value" in str(e.value)
    with pytest.raises(PluginError) as e:                  # outside [0, 1]
        knobs.resolve(cfg(global__benchmarking=2), g)
    assert e.value.status == INVALID_VALUE
    with pytest.raises(PluginError):
        knobs.resolve(cfg(global__workspace_size_limit=-1), g)
    # not strict (the workspace query): the default stands
    assert knobs.resolve(cfg(global__benchmarking=1.0), g, strict=False)["global.benchmarking"] == 0


@pytest.mark.parametrize("value, want", [("1", 1), ("TRUE", 1), (" yes ", 1), ("enabled", 1),
                                         ("0", 0), ("off", 0), ("Disable", 0)])
def test_force_benchmarking_env(monkeypatch, value, want):
    monkeypatch.setenv("HIPDNN_FORCE_BENCHMARKING", value)
    other = 1 - want
    assert knobs.resolve(cfg(global__benchmarking=other), knobs.GLOBAL_KNOBS)[
        "global.benchmarking"] == want


def test_force_benchmarking_env_unrecognised_is_ignored_with_a_warning(monkeypatch):
    monkeypatch.setenv("HIPDNN_FORCE_BENCHMARKING", "maybe")
    logs = []
    v = knobs.resolve(cfg(global__benchmarking=1), knobs.GLOBAL_KNOBS,
                      log=lambda s, m: logs.append((s, m)))
    assert v["global.benchmarking"] == 1
    assert (knobs.SEV_WARN, "ignoring unrecognized value for HIPDNN_FORCE_BENCHMARKING: 'maybe'") in logs


def test_workspace_limit_problem():
    assert knobs.workspace_limit_problem("E", 64, 64) is None
    assert "needs 65 bytes of workspace, more than global.workspace_size_limit = 64" in \
        knobs.workspace_limit_problem("E", 65, 64)


class _Plan:
    def __init__(self, cost, ran):
        self.cost, self.ran = cost, ran

    def get_workspace_size(self, handle):
        return self.cost

    def execute(self, handle, buffers, workspace):
        self.ran.append(self.cost)
        _Clock.now += self.cost


class _Clock:
    now = 0.0

    def __call__(self):
        return _Clock.now


def test_benchmarking_plan_times_every_variant_once_then_keeps_the_fastest():
    ran, logs = [], []
    plugin = types.SimpleNamespace(log=lambda s, m: logs.append(m))
    handle = types.SimpleNamespace(plugin=plugin)
    p = knobs.BenchmarkingPlan("E", [("slow", _Plan(3.0, ran)), ("fast", _Plan(1.0, ran)),
                                     ("mid", _Plan(2.0, ran))], clock=_Clock())
    assert p.get_workspace_size(handle) == 3
    p.execute(handle, None, 0)
    assert ran == [3.0, 1.0, 2.0]                      # each variant once, timed
    assert p.chosen == "fast" and [lb for lb, _ in p.timings] == ["slow", "fast", "mid"]
    assert p.timings[0][1] == pytest.approx(3000.0)
    assert logs == ["benchmarking: E: slow 3000.000 ms, fast 1000.000 ms, mid 2000.000 ms; "
                    "keeping fast"]
    p.execute(handle, None, 0)
    p.execute(handle, None, 0)
    assert ran == [3.0, 1.0, 2.0, 1.0, 1.0]            # then the fastest alone

