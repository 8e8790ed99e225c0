"""Backend-API checks (``hipdnn-cabi conform --backend LIB``): C call sequences, two-call rules and
misuse statuses of the spec (shared/spec/backend-behavior.md §1.2-1.4, §4), run by
``backend_driver.c`` in child processes against any hipDNN backend library."""
from __future__ import annotations

import os

from ...backend.plugins.loader import parse_version
from ..core import Fail, Skip, build_driver, check, fmt_call, run_child
from ..corpus import ADD, PW, CorpusGraph, Op, T

SUCCESS, NOT_INITIALIZED, BAD_PARAM, NULLPTR, NOT_SUPPORTED = 0, 1, 2, 3, 8
SIZE_INSUFFICIENT = 6
CONTENT_GRAPH, CONTENT_PLAN = 1, 2
ENGINE_ID_MESSAGE = "EngineDescriptor::finalize() failed: Engine id is not in a valid range of engine IDs"


# Calls of a mode that only set up the calls under test: when one of them fails (a backend without
# tensor descriptors, say), the check reports that call, not the statuses that followed from it.
SETUP = {
    "tensor": ("create", "set_uid", "set_dtype", "set_dims", "set_strides", "finalize",
               "create2", "set2_uid", "set2_dtype", "set2_dims", "set2_strides"),
    "last_error": ("success",),
    "graph": ("op_finalize", "graph_finalize"),
}


def brun(s, mode, *args, plugins=False):
    """Run a backend_driver mode; plugins=False: HIPDNN_PLUGIN_DIR is an empty directory (only the
    backend itself is tested); True: the suite's --plugin-dir (the check skips without one)."""
    if plugins and not s.plugin_dir:
        raise Skip("needs an engine: give --plugin-dir DIR (e.g. a directory with the C sample plugin)")

    def go():
        drv = s.memo("backend_driver", lambda: build_driver("backend_driver.c", s.workdir))
        if plugins:
            pdir = s.plugin_dir
        else:
            pdir = os.path.join(s.workdir, "no_plugins")
            os.makedirs(pdir, exist_ok=True)
        env = dict(os.environ, HIPDNN_PLUGIN_DIR=pdir)
        run = run_child([drv, mode, s.plugin, *args], s.scale.timeout, env=env, subject="backend")
        run.setup = SETUP.get(mode, ())
        return run
    return s.finished(s.memo(("backend", mode, plugins), go))


def setup_ok(run, table=()):
    """Fail naming the first setup call of the run that did not succeed (calls under test excluded)."""
    for tag in getattr(run, "setup", ()):
        if tag in table:
            continue
        c = run.one("call", tag)
        if c is not None and c["st"] != SUCCESS:
            raise Fail(f"setup failed: {fmt_call(c)}; the calls under test depend on it and were "
                       f"not judged")


def expect(run, table: dict):
    setup_ok(run, table)
    bad = []
    for tag, want in table.items():
        c = run.one("call", tag)
        if c is None:
            bad.append(f"{tag}: not reached")
        elif c["st"] not in (want if isinstance(want, tuple) else (want,)):
            bad.append(f"{fmt_call(c)}; expected status {want}")
    if bad:
        raise Fail("; ".join(bad))
    return f"{len(table)} call(s) as specified"


@check("conform.backend.handle_create_destroy", backend=True)
def handle_create_destroy(s):
    """hipdnnCreate/hipdnnDestroy succeed (one handle, then 16 live handles)."""
    run = brun(s, "handle")
    msg = expect(run, {"create": SUCCESS, "destroy": SUCCESS})
    if run.one("handle")["null"]:
        raise Fail("hipdnnCreate(&handle) -> SUCCESS with a NULL handle")
    if run.one("many")["failures"]:
        raise Fail(f"{run.one('many')['failures']} failures creating/destroying 16 handles")
    return msg


@check("conform.backend.handle_null", backend=True)
def handle_null(s):
    """hipdnnCreate(NULL) and hipdnnDestroy(NULL) -> BAD_PARAM_NULL_POINTER."""
    return expect(brun(s, "handle"), {"create_null": NULLPTR, "destroy_null": NULLPTR})


@check("conform.backend.descriptor_unknown_type", backend=True)
def descriptor_unknown_type(s):
    """CreateDescriptor of an unknown or non-creatable type -> NOT_SUPPORTED."""
    return expect(brun(s, "descriptor"), {"unknown_type": NOT_SUPPORTED, "not_creatable": NOT_SUPPORTED})


@check("conform.backend.descriptor_null", backend=True)
def descriptor_null(s):
    """CreateDescriptor(type, NULL), DestroyDescriptor(NULL), Finalize(NULL) -> BAD_PARAM_NULL_POINTER."""
    return expect(brun(s, "descriptor"), {"create_null": NULLPTR, "destroy_null": NULLPTR, "finalize_null": NULLPTR})


@check("conform.backend.tensor_finalize_rules", backend=True)
def tensor_finalize_rules(s):
    """Tensor finalize: nothing set -> BAD_PARAM; dims/strides length mismatch -> BAD_PARAM; complete -> SUCCESS."""
    return expect(brun(s, "tensor"), {"finalize_empty": BAD_PARAM, "finalize_mismatch": BAD_PARAM,
                                      "finalize": SUCCESS})


@check("conform.backend.tensor_set_misuse", backend=True)
def tensor_set_misuse(s):
    """SetAttribute misuse: wrong type BAD_PARAM, NULL array NULL_POINTER, bad counts BAD_PARAM, unknown name NOT_SUPPORTED, after finalize NOT_INITIALIZED."""
    return expect(brun(s, "tensor"), {"set_wrong_type": BAD_PARAM, "set_null_array": NULLPTR,
                                      "set_scalar_count2": BAD_PARAM, "set_vector_count0": BAD_PARAM,
                                      "set_unknown_attr": NOT_SUPPORTED, "set_after_finalize": NOT_INITIALIZED})


@check("conform.backend.tensor_get_two_call", backend=True)
def tensor_get_two_call(s):
    """GetAttribute: before finalize NOT_INITIALIZED; size query gives the length; fetch truncates silently; wrong type BAD_PARAM."""
    run = brun(s, "tensor")
    msg = expect(run, {"get_before_finalize": NOT_INITIALIZED, "get_size_query": SUCCESS,
                       "get_size_query_null_count": NULLPTR, "get_truncated": SUCCESS, "get_full": SUCCESS,
                       "get_wrong_type": BAD_PARAM})
    sq, tr, full = run.one("size_query"), run.one("truncated"), run.one("full")
    if sq["n"] != 2:
        raise Fail(f"size query of TENSOR_DIMENSIONS {{2,3}} -> elementCount {sq['n']}, expected 2")
    if tr["n"] != 1 or tr["v0"] != 2 or tr["v1"] != -5:
        raise Fail(f"GetAttribute(DIMENSIONS, requested 1) -> count {tr['n']}, values {tr['v0']},{tr['v1']}: "
                   "expected 1 element copied (silent truncation)")
    if full["n"] != 2 or (full["v0"], full["v1"]) != (2, 3):
        raise Fail(f"GetAttribute(DIMENSIONS, requested 4) -> count {full['n']}, values {full['v0']},{full['v1']}")
    return msg


@check("conform.backend.last_error_get_peek", backend=True)
def last_error_get_peek(s):
    """Failures set the last error; success keeps it; Peek does not clear it; Get returns then clears it; NULL buffers are safe."""
    run = brun(s, "last_error")
    setup_ok(run)
    r = run.one("last_error")
    if not r["full"]:
        raise Fail(f"{fmt_call(run.one('call', 'fail'))} left an empty last error")
    if r["after_success"] != r["full"]:
        raise Fail(f"a successful call changed the last error from {r['full']!r} to {r['after_success']!r}")
    if r["get"] != r["full"]:
        raise Fail(f"hipdnnGetLastErrorString -> {r['get']!r}, Peek gave {r['full']!r}")
    if r["after_get"]:
        raise Fail(f"hipdnnGetLastErrorString did not clear the slot (Peek then gave {r['after_get']!r})")
    if not run.one("null_buf_ok"):
        raise Fail("hipdnnGetLastErrorString(NULL, 16) did not return")
    return "ok"


@check("conform.backend.last_error_truncation", backend=True)
def last_error_truncation(s):
    """A buffer of 8 bytes receives the first 7 characters and a NUL."""
    r = brun(s, "last_error").one("last_error")
    if not r["small_nul"] or r["small"] != r["full"][:7]:
        raise Fail(f"hipdnnPeekLastErrorString_ext(buf, 8) -> {r['small']!r} (NUL {bool(r['small_nul'])}); "
                   f"expected {r['full'][:7]!r}")
    return repr(r["small"])


@check("conform.backend.error_and_version_strings", backend=True)
def error_and_version_strings(s):
    """hipdnnGetErrorString names statuses with static strings (unknown -> HIPDNN_STATUS_UNKNOWN); hipdnnVersionString_ext is MAJOR.MINOR.PATCH.TWEAK."""
    run = brun(s, "strings")
    want = {0: "HIPDNN_STATUS_SUCCESS", 3: "HIPDNN_STATUS_BAD_PARAM_NULL_POINTER", 8: "HIPDNN_STATUS_NOT_SUPPORTED",
            9999: "HIPDNN_STATUS_UNKNOWN"}
    for r in run.of("error_string"):
        if r["value"] != want[r["code"]] or not r["same_ptr"]:
            raise Fail(f"hipdnnGetErrorString({r['code']}) -> {r['value']!r} (static: {bool(r['same_ptr'])}), "
                       f"expected {want[r['code']]!r}")
    v = run.one("version")["value"]
    parts = (v or "").split(".")
    if len(parts) != 4 or not all(p.isdigit() for p in parts):
        raise Fail(f"hipdnnVersionString_ext() -> {v!r}: not MAJOR.MINOR.PATCH.TWEAK")
    return v



# ---------------------------------------------------------------------------------- graphs (§1.5, §2.2)
def graph_run(s):
    def stamped():
        g = CorpusGraph("stamped_1_4", [T(1, [3, 4]), T(2, [3, 4]), T(3, [3, 4])], [Op(PW, (1, 2), 3, ADD)],
                        min_api=(1, 4, 0))
        p = os.path.join(s.workdir, "graph_min_api_1_4.bin")
        with open(p, "wb") as f:
            f.write(g.to_bytes())
        return p
    return brun(s, "graph", s.memo("stamped_1_4", stamped))


@check("conform.backend.graph_finalize_rules", backend=True)
def graph_finalize_rules(s):
    """A pointwise op descriptor finalizes; graph finalize: nothing set / no handle / no ops -> BAD_PARAM; ops + handle -> SUCCESS."""
    return expect(graph_run(s), {"op_finalize": SUCCESS, "graph_finalize_nothing": BAD_PARAM,
                                 "graph_finalize_no_handle": BAD_PARAM, "graph_finalize_no_ops": BAD_PARAM,
                                 "graph_finalize": SUCCESS})


@check("conform.backend.graph_serialize_two_call", backend=True)
def graph_serialize_two_call(s):
    """GetSerializedBinaryGraph_ext: size query; one byte short -> SIZE_INSUFFICIENT (size still set); exact fetch; the bytes read as GRAPH and deserialize."""
    run = graph_run(s)
    msg = expect(run, {"ser_size": SUCCESS, "ser_short": SIZE_INSUFFICIENT, "ser_full": SUCCESS,
                       "contents_graph": SUCCESS, "deser_good": SUCCESS})
    r = run.one("ser")
    if not r["size"] or r["short_size"] != r["size"] or r["full_size"] != r["size"]:
        raise Fail(f"sizes: query {r['size']}, after the short call {r['short_size']}, after the fetch "
                   f"{r['full_size']}; expected one non-zero size throughout")
    if run.one("contents_graph")["flags"] != CONTENT_GRAPH:
        raise Fail(f"GetSerializedBinaryContents_ext(serialized graph) -> flags {run.one('contents_graph')['flags']}, "
                   f"expected GRAPH ({CONTENT_GRAPH})")
    return msg + f"; {r['size']} bytes"


@check("conform.backend.serialized_contents_arbitrary", backend=True)
def serialized_contents_arbitrary(s):
    """GetSerializedBinaryContents_ext on 4 arbitrary bytes -> SUCCESS with flags = GRAPH (checklist 17)."""
    run = graph_run(s)
    msg = expect(run, {"contents_4": SUCCESS})
    if run.one("contents")["flags"] != CONTENT_GRAPH:
        raise Fail(f"flags {run.one('contents')['flags']}, expected GRAPH ({CONTENT_GRAPH})")
    return msg


@check("conform.backend.deserialize_rejects", backend=True)
def deserialize_rejects(s):
    """CreateAndDeserializeGraph_ext: junk bytes -> BAD_PARAM; a graph stamped min API 1.4.0 -> NOT_SUPPORTED."""
    return expect(graph_run(s), {"deser_junk": BAD_PARAM, "deser_min_api_1_4": NOT_SUPPORTED})


@check("conform.backend.engine_unknown_id", backend=True)
def engine_unknown_id(s):
    """Engine finalize with an id no plugin offers -> BAD_PARAM with the exact message of spec §1.7."""
    run = graph_run(s)
    msg = expect(run, {"engine_bad_id": BAD_PARAM})
    err = run.one("call", "engine_bad_id")["err"]
    if err != ENGINE_ID_MESSAGE:
        raise Fail(f"last error {err!r}, expected {ENGINE_ID_MESSAGE!r}")
    return msg


@check("conform.backend.plugin_management_misuse", backend=True)
def plugin_management_misuse(s):
    """SetPluginUnloadMode_ext(-1) -> BAD_PARAM; GetEngineIdByName_ext(h, "") -> NOT_SUPPORTED; SetEnginePluginPaths_ext with a live handle: unchanged -> SUCCESS, changed -> NOT_SUPPORTED."""
    return expect(graph_run(s), {"unload_mode_bad": BAD_PARAM, "engine_by_empty_name": NOT_SUPPORTED,
                                 "set_paths_same": SUCCESS, "set_paths_live": NOT_SUPPORTED})


# ---------------------------------------------------------------------------------- with an engine (--plugin-dir)
def engine_run(s):
    return brun(s, "engine", plugins=True)


@check("conform.backend.heuristic_results_two_call", backend=True)
def heuristic_results_two_call(s):
    """--plugin-dir: ENGINEHEUR RESULTS (req 0, &n, NULL) -> n >= 1; (req 2, &n, NULL) -> NULL_POINTER; fetch n configs; a fetched config finalizes."""
    run = engine_run(s)
    msg = expect(run, {"heur_finalize": SUCCESS, "results_count": SUCCESS, "results_null_array": NULLPTR,
                       "results_fetch": SUCCESS, "cfg_finalize": SUCCESS})
    r = run.one("results")
    if r["m"] != r["n"]:
        raise Fail(f"RESULTS size query gave {r['n']}, the fetch of {r['n']} wrote {r['m']}")
    return msg + f"; {r['n']} config(s)"


@check("conform.backend.execute_sequence", backend=True)
def execute_sequence(s):
    """--plugin-dir: plan from the first config; Execute with an unfinalized variant pack -> BAD_PARAM; finalized -> SUCCESS and z = x + y."""
    run = engine_run(s)
    msg = expect(run, {"plan_finalize": SUCCESS, "plan_ws": SUCCESS, "execute_unfinalized_vp": BAD_PARAM,
                       "execute": SUCCESS})
    if not run.one("execute")["correct"]:
        raise Fail(f"hipdnnBackendExecute(ADD on host buffers) -> SUCCESS but z != x + y (z[0] = {run.one('execute')['z0']})")
    return msg + f"; engine {run.one('engine')['id']}"


@check("conform.backend.plan_serialize_two_call", backend=True)
def plan_serialize_two_call(s):
    """--plugin-dir: GetSerializedExecutionPlan_ext and GetSerializedBinaryGraphAndPlan_ext: size query, one byte short -> SIZE_INSUFFICIENT, fetch; the blob reads GRAPH|PLAN."""
    run = engine_run(s)
    c = run.one("call", "plan_ser_size")
    if c and c["st"] == NOT_SUPPORTED:
        raise Skip(f"the engine does not serialize plans: {fmt_call(c)}")
    msg = expect(run, {"plan_ser_size": SUCCESS, "plan_ser_short": SIZE_INSUFFICIENT, "plan_ser_full": SUCCESS,
                       "gp_ser_size": SUCCESS, "gp_ser_short": SIZE_INSUFFICIENT, "gp_ser_full": SUCCESS,
                       "gp_contents": SUCCESS})
    flags = run.one("gp_contents")["flags"]
    if flags != CONTENT_GRAPH | CONTENT_PLAN:
        raise Fail(f"GetSerializedBinaryContents_ext(graph+plan blob) -> flags {flags}, expected GRAPH|EXECUTION_PLAN (3)")
    return msg


def _plugin_versions(s) -> dict:
    """{engine id: (plugin path, API version)} for every plugin .so in --plugin-dir (driver.c probe)."""
    def compute():
        drv = s.memo("plugin_driver", lambda: build_driver("driver.c", s.workdir))
        out = {}
        for fn in sorted(os.listdir(s.plugin_dir)):
            path = os.path.join(s.plugin_dir, fn)
            if not fn.endswith(".so") or not os.path.isfile(path):
                continue
            run = run_child([drv, "probe", path, "-"], s.scale.timeout)
            syms = {r["fn"]: r["found"] for r in run.of("sym")}
            v = (1, 0, 0)
            if syms.get("hipdnnPluginGetApiVersion"):
                rec = run.one("string", "api_version")
                v = parse_version(rec["value"]) if rec and rec["st1"] == 0 and rec["value"] else None
            ids = run.one("ids")
            for i in (ids["ids"] if ids else []):
                out[int(i)] = (path, v)
        return out
    return s.memo("plugin_versions", compute)


@check("conform.backend.runtime_pbv_version_filter", backend=True)
def runtime_pbv_version_filter(s):
    """--plugin-dir: a graph with a runtime pass-by-value scalar is offered only engines of plugins reporting API >= 1.2.0 (spec §3.6)."""
    run = engine_run(s)
    msg = expect(run, {"pbv_graph_finalize": SUCCESS, "pbv_heur_finalize": SUCCESS, "pbv_results_count": SUCCESS})
    versions = _plugin_versions(s)
    offered = [int(i) for i in run.one("pbv_engines")["ids"]]
    bad = [f"engine {i} of {versions[i][0]} (API {'.'.join(map(str, versions[i][1] or ()))})"
           for i in offered if i in versions and (versions[i][1] is None or versions[i][1] < (1, 2, 0))]
    if bad:
        raise Fail("the heuristic offered a runtime pass-by-value graph (z = x * s, s runtime user-supplied) to "
                   "plugins below 1.2.0: " + "; ".join(bad))
    const = [int(i) for i in run.one("const_engines")["ids"]]
    return (msg + f"; runtime scalar: {len(offered)} engine(s), compile-time constant: {len(const)} engine(s) "
            f"({sum(1 for v in versions.values() if v[1] and v[1] >= (1, 2, 0))} of {len(versions)} engines >= 1.2.0)")
