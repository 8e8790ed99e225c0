"""Autotuning (RFC 0013) with the frontend: strategies (SINGLE_SHOT, FIXED_AVERAGE, RUN_UNTIL_STABLE
with its coefficient-of-variation stop), modes (STANDARD, EXHAUSTIVE priming), knob sweeps, the
engine-override configuration file it writes, and that file read back by a fresh process through
HIPDNN_HEUR_CONFIG_PATH (SelectionHeuristic::Config): the same engine and knobs are selected; a
malformed or truncated file falls back to the next policy.  Engines: the CPU reference and
HIPDNN_CABI_FE_TEST_SLOW_ENGINE (knob fe_test.sleep_ms), in child processes."""
from __future__ import annotations

import json

import pytest

from hipdnn_cabi import errors
from hipdnn_cabi.frontend.graph import autotune as at
from test_frontend_selection import run_child

pytestmark = pytest.mark.needs_cpu_engine


# ------------------------------------------------------------------------------ strategies
def _timer(values):
    it = iter(values)
    calls = []

    def run():
        calls.append(1)
        return next(it)
    return run, calls


def test_single_shot_and_fixed_average():
    run, calls = _timer([5.0, 4.0, 3.0])
    assert at.measure(at.AutotuneConfig(strategy=at.AutotuneStrategy.SINGLE_SHOT), run) == ([5.0], True)
    run, calls = _timer([1.0, 2.0, 3.0, 4.0])
    cfg = at.AutotuneConfig(strategy=at.AutotuneStrategy.FIXED_AVERAGE, timed_iterations=3)
    assert at.measure(cfg, run) == ([1.0, 2.0, 3.0], True)


def test_run_until_stable_stops_when_the_window_is_stable():
    # the last 3 runs' coefficient of variation drops below 5 % at the 6th run
    times = [9.0, 1.0, 5.0, 2.0, 2.02, 2.01, 7.0, 7.0]
    run, calls = _timer(times)
    cfg = at.AutotuneConfig(window_size=3, stability_threshold=0.05, max_iterations=20)
    got, conv = at.measure(cfg, run)
    assert conv and got == times[:6]
    assert at.coefficient_of_variation(times[3:6]) < 0.05 <= at.coefficient_of_variation(times[2:5])


def test_run_until_stable_gives_up_at_max_iterations():
    run, _ = _timer([1.0, 10.0] * 10)
    got, conv = at.measure(at.AutotuneConfig(window_size=2, max_iterations=7), run)
    assert not conv and len(got) == 7


@pytest.mark.parametrize("kw", [dict(window_size=1), dict(window_size=5, max_iterations=4),
                                dict(stability_threshold=0.0), dict(stability_threshold=1.0),
                                dict(warmup_iterations=-1),
                                dict(strategy=at.AutotuneStrategy.FIXED_AVERAGE, timed_iterations=0)])
def test_config_validation(kw):
    with pytest.raises(errors.BadParamError):
        at.AutotuneConfig(**kw).validate()


def test_sweep_variants_are_the_cartesian_product():
    spec = at.EngineSweepSpec(42, axes={"SPLIT_K": [1, 2, 4], "TILE": [0, 1],
                                        "global.benchmarking": [0, 1], "EMPTY": []},
                              fixed_settings={"MODE": 1})
    v = at.sweep_variants(spec)
    assert len(v) == 6 and all(d["MODE"] == 1 and "global.benchmarking" not in d for d in v)
    assert {(d["SPLIT_K"], d["TILE"]) for d in v} == {(s, t) for s in (1, 2, 4) for t in (0, 1)}
    with pytest.raises(errors.BadParamError):
        at.sweep_variants(at.EngineSweepSpec(1, axes={"A": list(range(101)), "B": list(range(100))}))


# ------------------------------------------------------------------------------ end to end
TUNE = """
g, x, y = relu_graph()
g.create_execution_plans()
g.build_plans()
ya = np.zeros(6, np.float32)
slow = fnv1a64(SLOW)
res = []
cfg = hf.AutotuneConfig(strategy=hf.AutotuneStrategy.FIXED_AVERAGE, timed_iterations=2,
                        warmup_iterations=0, engine_id_filter=FILTER)
ranked = g.autotune({x: xa, y: ya}, config=cfg, results=res,
                    storage=hf.AutotuneStorageConfig(file_path=os.environ["CFG_FILE"]),
                    sweeps=[hf.EngineSweepSpec(slow, axes={"fe_test.sleep_ms": [20, 2]})])
out["ranked"] = [(g._engine_name_of(e), ms) for e, ms in ranked]
out["results"] = [(r.engine_name, r.knob_settings, r.rank, r.succeeded, r.iterations_run) for r in res]
out["active"] = [g.engine_name, g.get_knob_settings()]
ya[:] = 0
g.execute({x: xa, y: ya})
out["ok"] = bool(np.allclose(ya, np.maximum(xa, 0)))
out["file"] = json.load(open(os.environ["CFG_FILE"]))
"""

READ = """
import time
g, x, y = relu_graph("fresh process, other name")
g.create_execution_plans()
g.build_plans()
out["order"] = names(g)
out["active"] = [g.engine_name, g.get_knob_settings()]
ya = np.zeros(6, np.float32)
t0 = time.perf_counter(); g.execute({x: xa, y: ya}); out["ms"] = (time.perf_counter() - t0) * 1e3
out["ok"] = bool(np.allclose(ya, np.maximum(xa, 0)))
g2 = hf.Graph(handle=h, io_data_type=F32, compute_data_type=F32, name="other shape")
x2 = g2.tensor(name="x", dim=[7])
g2.relu(x2).set_output(True).set_name("y")
g2.build_operation_graph()
g2.create_execution_plans()
out["other_shape"] = names(g2)
"""


def _pair(tmp_path, filt):
    cfgf = tmp_path / "autotune.json"
    tuned = run_child(TUNE.replace("FILTER", filt), tmp_path, CFG_FILE=str(cfgf))
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    read = run_child(READ, fresh, HIPDNN_HEUR_CONFIG_PATH=str(cfgf))
    return tuned, read, cfgf


def test_sweep_winner_round_trips_across_processes(tmp_path):
    """Knob sweep on the slow engine only: sleep_ms 2 beats 20 and the default 30; the file holds
    the winner with its knob; a fresh process (its own empty cache) selects that engine with that
    knob through HIPDNN_HEUR_CONFIG_PATH; a graph of another shape keeps StaticOrdering."""
    tuned, read, cfgf = _pair(tmp_path, "[fnv1a64(SLOW)]")
    assert [n for n, _ in tuned["ranked"]] == ["HIPDNN_CABI_FE_TEST_SLOW_ENGINE"] * 3
    res = tuned["results"]
    assert [r[1] for r in res] == [{"fe_test.sleep_ms": 2}, {"fe_test.sleep_ms": 20}, {}]
    assert [r[2] for r in res] == [0, 1, 2] and all(r[3] and r[4] == 2 for r in res)
    assert tuned["active"] == ["HIPDNN_CABI_FE_TEST_SLOW_ENGINE", {"fe_test.sleep_ms": 2}]
    assert tuned["ok"]
    doc = tuned["file"]
    assert doc["version"] == 2 and len(doc["engine_overrides"]) == 1
    e = doc["engine_overrides"][0]
    assert e["op"] == "pointwise" and e["engine_name"] == "HIPDNN_CABI_FE_TEST_SLOW_ENGINE"
    assert list(e["criteria"]) == ["pointwise_mode"]
    assert e["tensors"] == [{"tensor_id": "in_0_tensor_uid", "dim": [6], "stride": [1]}]
    m = e["autotune_metadata"]
    assert m["knobs"] == [{"knob_id": "fe_test.sleep_ms", "type": "int", "value": 2}]
    assert m["rank"] == 0 and m["mode"] == "standard" and m["strategy"] == "fixed_average"
    assert m["iterations_run"] == 2 and m["min_time_ms"] > 0 and "converged" not in m
    assert m["timestamp"].endswith("Z") and len(m["graph_key"]) == 64
    assert read["order"][0] == "HIPDNN_CABI_FE_TEST_SLOW_ENGINE"
    assert read["active"] == ["HIPDNN_CABI_FE_TEST_SLOW_ENGINE", {"fe_test.sleep_ms": 2}]
    assert read["ok"]
    assert read["other_shape"] == ["HIPDNN_CABI_FE_TEST_SLOW_ENGINE",
                                   "HIPDNN_CABI_CPU_REFERENCE_ENGINE"]


def test_winner_engine_round_trips_and_bad_files_fall_back(tmp_path):
    """Without a filter the CPU reference engine wins (StaticOrdering would put the slow engine
    first): a fresh process selects it from the file; the same process with the file truncated or
    garbled falls back to StaticOrdering; appending a second graph keeps both entries."""
    tuned, read, cfgf = _pair(tmp_path, "()")
    assert tuned["ranked"][0][0] == "HIPDNN_CABI_CPU_REFERENCE_ENGINE"
    assert read["order"][0] == "HIPDNN_CABI_CPU_REFERENCE_ENGINE"
    assert read["active"] == ["HIPDNN_CABI_CPU_REFERENCE_ENGINE", {}]
    good = cfgf.read_text()
    for i, bad in enumerate((good[: len(good) // 3], "{not json", json.dumps({"foreign": 1}))):
        f = tmp_path / f"bad{i}.json"
        f.write_text(bad)
        d = tmp_path / f"r{i}"
        d.mkdir()
        r = run_child(READ, d, HIPDNN_HEUR_CONFIG_PATH=str(f))
        assert r["order"][0] == "HIPDNN_CABI_FE_TEST_SLOW_ENGINE" and r["ok"], (i, r)


APPEND = """
g, x, y = relu_graph()
g.create_execution_plans(); g.build_plans()
ya = np.zeros(6, np.float32)
cfg = hf.AutotuneConfig(strategy=hf.AutotuneStrategy.SINGLE_SHOT, warmup_iterations=0,
                        mode=hf.TuneMode.EXHAUSTIVE)
res = []
g.autotune({x: xa, y: ya}, config=cfg, results=res, write_cache=False,
           storage=hf.AutotuneStorageConfig(file_path=os.environ["CFG_FILE"]))
out["exhaustive"] = [(r.engine_name, r.supports_exhaustive, r.ran_exhaustive, r.iterations_run)
                     for r in res]
g2 = hf.Graph(handle=h, io_data_type=F32, compute_data_type=F32, name="g2")
x2 = g2.tensor(name="x", dim=[9])
y2 = g2.relu(x2).set_output(True).set_name("y")
g2.build_operation_graph(); g2.create_execution_plans(); g2.build_plans()
g2.autotune({x2: np.ones(9, np.float32), y2: np.zeros(9, np.float32)}, write_cache=False,
            config=hf.AutotuneConfig(strategy=hf.AutotuneStrategy.RUN_UNTIL_STABLE, window_size=2,
                                     max_iterations=3, warmup_iterations=0),
            storage=hf.AutotuneStorageConfig(file_path=os.environ["CFG_FILE"]))
g.autotune({x: xa, y: ya}, config=cfg, write_cache=False,
           storage=hf.AutotuneStorageConfig(file_path=os.environ["CFG_FILE"]))
out["file"] = json.load(open(os.environ["CFG_FILE"]))
open(os.environ["V1_FILE"], "w").write(json.dumps({"engine_overrides": []}))
try:
    g.autotune({x: xa, y: ya}, config=cfg, write_cache=False,
               storage=hf.AutotuneStorageConfig(file_path=os.environ["V1_FILE"]))
    out["v1"] = "written"
except hf.BadParamError as e:
    out["v1"] = str(e)
out["v1_after"] = open(os.environ["V1_FILE"]).read()
open(os.environ["BAD_FILE"], "w").write("{truncated")
g.autotune({x: xa, y: ya}, config=cfg, write_cache=False,
           storage=hf.AutotuneStorageConfig(file_path=os.environ["BAD_FILE"]))
out["bad_after"] = json.load(open(os.environ["BAD_FILE"]))["version"]
out["aside"] = sorted(f for f in os.listdir(os.path.dirname(os.environ["BAD_FILE"]))
                      if ".corrupt-" in f)
"""


def test_exhaustive_mode_append_replace_and_refusals(tmp_path):
    r = run_child(APPEND, tmp_path, CFG_FILE=str(tmp_path / "a.json"),
                  V1_FILE=str(tmp_path / "v1.json"), BAD_FILE=str(tmp_path / "bad.json"))
    ex = {n: (s, ran, it) for n, s, ran, it in r["exhaustive"]}
    assert ex["HIPDNN_CABI_CPU_REFERENCE_ENGINE"] == (True, True, 1)     # primed (global.benchmarking)
    assert ex["HIPDNN_CABI_FE_TEST_SLOW_ENGINE"] == (False, False, 1)
    entries = r["file"]["engine_overrides"]
    assert len(entries) == 2                                              # replaced, not duplicated
    assert sorted(e["tensors"][0]["dim"] for e in entries) == [[6], [9]]
    nine = next(e for e in entries if e["tensors"][0]["dim"] == [9])
    assert nine["autotune_metadata"]["strategy"] == "run_until_stable"
    assert isinstance(nine["autotune_metadata"]["converged"], bool)
    six = next(e for e in entries if e["tensors"][0]["dim"] == [6])
    assert six["autotune_metadata"]["mode"] == "exhaustive"
    assert "not a version 2" in r["v1"] and r["v1_after"] == json.dumps({"engine_overrides": []})
    assert r["bad_after"] == 2 and len(r["aside"]) == 1
