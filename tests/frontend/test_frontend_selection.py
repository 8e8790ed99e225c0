"""Frontend engine selection (cudnn-frontend pygraph's API; frontend/graph/selection.py): behaviour
note filters, deselected engines, plan count, heuristic modes A/B/FALLBACK, and autotune (PROFILING
_CONTROL_EXT timing, the ranking written to the autotune cache and used by later heuristics).
Engines: the CPU reference and HIPDNN_CABI_FE_TEST_SLOW_ENGINE (sleeps 30 ms, RUNTIME_COMPILATION),
in a child process."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

PRELUDE = '''
import json, os
import numpy as np
from hipdnn_cabi import frontend as hf
from hipdnn_cabi.backend.plugins.loader import fnv1a64
F32 = hf.DataType.HIPDNN_DATA_FLOAT
SLOW, CPU = "HIPDNN_CABI_FE_TEST_SLOW_ENGINE", "HIPDNN_CABI_CPU_REFERENCE_ENGINE"
hf.set_engine_plugin_paths([os.environ["SELECTION_PLUGINS"]])   # ADDITIVE: the defaults stay
h = hf.Handle()
hf.set_engine_memory_kind(SLOW, "host")      # it dereferences host memory
out = {}
def relu_graph(name="g"):
    g = hf.Graph(handle=h, io_data_type=F32, compute_data_type=F32, name=name)
    x = g.tensor(name="x", dim=[6])
    y = g.relu(x).set_output(True).set_name("y")
    g.build_operation_graph()
    return g, x, y
def names(g):
    return [g._engine_name_of(e) for e in g.get_engine_ids()]
xa = np.linspace(-1, 1, 6).astype(np.float32)
'''


def run_child(body: str, tmp_path, timeout=240, **env):
    code = PRELUDE + textwrap.dedent(body) + "\nprint('RESULT=' + json.dumps(out))\n"
    e = {**os.environ, "PYTHONPATH": ROOT,
         "SELECTION_PLUGINS": os.path.join(HERE, "plugins_selection"),
         "HIPDNN_CABI_NO_ENTRY_POINT_PLUGINS": "1",
         "HIPDNN_CACHE_DIR": str(tmp_path / "cache"),
         "HIPDNN_HEURISTIC_PLUGIN_DIR": str(tmp_path / "noheur")}
    e.pop("HIPDNN_PLUGIN_DIR", None)
    e.update(env)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=timeout, cwd=ROOT, env=e)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT=")][-1]
    return json.loads(line[len("RESULT="):])


def test_filters_and_plan_count(tmp_path):
    r = run_child("""
g, x, y = relu_graph()
g.create_execution_plans()
out["default"] = names(g)
out["count"] = g.get_execution_plan_count()
g.build_plans()
out["notes"] = [int(n) for n in g.get_behavior_notes()]
g2, _, _ = relu_graph("g2")
g2.deselect_behavior_notes([hf.BehaviorNote.HIPDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION])
g2.create_execution_plans()
out["desel_note"] = names(g2)
g3, _, _ = relu_graph("g3")
g3.select_behavior_notes(["RUNTIME_COMPILATION"])
g3.create_execution_plans()
out["sel_note"] = names(g3)
g4, _, _ = relu_graph("g4")
g4.deselect_engines([CPU])
g4.create_execution_plans()
out["desel_engine"] = names(g4)
g5, _, _ = relu_graph("g5")
g5.deselect_engines([CPU, fnv1a64(SLOW)])
try:
    g5.create_execution_plans()
    out["all_gone"] = None
except hf.GraphNotSupportedError as e:
    out["all_gone"] = str(e)
try:
    relu_graph("g6")[0].deselect_behavior_notes(["NOPE"])
except hf.BadParamError as e:
    out["bad_note"] = str(e)
""", tmp_path)
    assert r["default"] == ["HIPDNN_CABI_FE_TEST_SLOW_ENGINE", "HIPDNN_CABI_CPU_REFERENCE_ENGINE"]
    assert r["count"] == 2
    assert r["notes"] == [0, 4]     # the slow engine: RUNTIME_COMPILATION + plan serialization
    assert r["desel_note"] == ["HIPDNN_CABI_CPU_REFERENCE_ENGINE"]
    assert r["sel_note"] == ["HIPDNN_CABI_FE_TEST_SLOW_ENGINE"]
    assert r["desel_engine"] == ["HIPDNN_CABI_FE_TEST_SLOW_ENGINE"]
    assert "deselected" in r["all_gone"]
    assert "unknown behaviour note" in r["bad_note"]


def test_autotune_picks_faster_and_heuristics_remember(tmp_path):
    r = run_child("""
g, x, y = relu_graph()
g.create_execution_plans()
g.build_plans()
out["before"] = g.engine_name
ya = np.zeros(6, np.float32)
res = g.autotune({x: xa, y: ya}, iterations=3, warmup=1)
out["ranked"] = [g._engine_name_of(e) for e, _ in res]
out["times"] = [ms for _, ms in res]
out["active"] = g.engine_name
out["outcome"] = g.autotune_outcome
ya[:] = 0
g.execute({x: xa, y: ya})
out["ok"] = bool(np.allclose(ya, np.maximum(xa, 0)))
g2, _, _ = relu_graph("same shape, other name")
g2.create_execution_plans()
out["cached_order"] = names(g2)
g3, _, _ = relu_graph("g3")
g3.create_execution_plans([hf.heur_mode.FALLBACK])
out["fallback_order"] = names(g3)
g4, _, _ = relu_graph("g4")
g4.create_execution_plans([hf.heur_mode.B])
out["b_order"] = names(g4)
""", tmp_path)
    assert r["before"] == "HIPDNN_CABI_FE_TEST_SLOW_ENGINE"
    assert r["ranked"] == ["HIPDNN_CABI_CPU_REFERENCE_ENGINE", "HIPDNN_CABI_FE_TEST_SLOW_ENGINE"]
    assert r["times"][1] >= 25.0 and r["times"][0] < r["times"][1]
    assert r["active"] == "HIPDNN_CABI_CPU_REFERENCE_ENGINE" and r["ok"]
    assert r["outcome"] == 0                                   # WRITTEN
    assert r["cached_order"] == r["ranked"]                    # Config policy: the cache
    assert r["fallback_order"] == ["HIPDNN_CABI_FE_TEST_SLOW_ENGINE",
                                   "HIPDNN_CABI_CPU_REFERENCE_ENGINE"]  # StaticOrdering only
    assert r["b_order"] == r["ranked"]                          # no plugin policies: as A
