"""Heuristic-plugin checks (``hipdnn-cabi conform`` on a plugin whose hipdnnPluginGetType answers
HIPDNN_PLUGIN_TYPE_HEURISTIC): the C surface of HeuristicsPluginApi.h called directly by
``heuristic_driver.c``, then the whole policy pipeline through our backend's host
(``backend_driver.c heur_host``).  Ids are ``conform.heuristic.<check>``; docs/conformance.md."""
from __future__ import annotations

import json
import os
import shutil

from ..._generated.enums import HIPDNN_HEURISTIC_API_VERSION_MAJOR
from ...backend.plugins.heuristics import BASE_OPTIONAL, BASE_REQUIRED, HEUR_OPTIONAL, HEUR_REQUIRED
from ...backend.plugins.loader import fnv1a64, parse_version
from ...schemas.dump import to_dict
from ...schemas.verifier import VerificationError, verify
from ..core import Fail, Skip, build_driver, check, default_backend, fmt_call, run_child
from .elf import dynamic_symbols
from .plugin_info import identity_checks

REQUIRED = BASE_REQUIRED + HEUR_REQUIRED
OPTIONAL = BASE_OPTIONAL + HEUR_OPTIONAL
NOT_APPLICABLE = 5
STATIC_ORDERING = "SelectionHeuristic::StaticOrdering"


def heuristic(cid, **kw):
    return check("conform.heuristic." + cid, heuristic=True, **kw)


def _probe(s):
    return s.finished(s.probe)


def _need(s, *names):
    """Skip when a required symbol the scenario calls is missing (conform.heuristic.required_symbols fails)."""
    _probe(s)
    missing = [n for n in names if not s.has(n)]
    if missing:
        raise Skip(f"{', '.join(missing)} not exported (see conform.heuristic.required_symbols)")


def _expect_fail(run, tags, what="an error status") -> str:
    bad, n = [], 0
    for c in run.of("call"):
        if c["tag"] in tags:
            n += 1
            if c["st"] == 0:
                bad.append(f"{c['fn']}({c['args']}) -> SUCCESS")
    if bad:
        raise Fail(f"expected {what}: " + "; ".join(bad))
    return f"{n} call(s) rejected"


# ---------------------------------------------------------------------------------- symbols, metadata
@heuristic("required_symbols")
def required_symbols(s):
    """Every required PluginApi.h + HeuristicsPluginApi.h symbol resolves with dlsym (RTLD_LOCAL)."""
    _probe(s)
    missing = [n for n in REQUIRED if not s.has(n)]
    if missing:
        raise Fail("dlsym(plugin, name) returned NULL for required symbol(s): " + ", ".join(missing)
                   + " (a hipDNN backend refuses to load the plugin)")
    return f"{len(REQUIRED)} required symbols resolve"


@heuristic("default_visibility")
def default_visibility(s):
    """Exported heuristic plugin API symbols are defined GLOBAL/WEAK FUNC symbols with default visibility."""
    table = dynamic_symbols(s.plugin)
    if table is None:
        raise Skip("not an ELF64 little-endian shared object")
    bad = []
    for n in REQUIRED + OPTIONAL:
        if n not in table or not table[n][3]:
            continue
        typ, bind, vis, _ = table[n]
        if typ not in ("FUNC", "GNU_IFUNC") or bind not in ("GLOBAL", "WEAK") or vis not in ("DEFAULT", "PROTECTED"):
            bad.append(f"{n}: {typ} {bind} {vis}")
    if bad:
        raise Fail("plugin API symbols with the wrong kind/visibility in .dynsym: " + "; ".join(bad))
    return "plugin API symbols are default-visibility functions"


identity_checks(heuristic, 2, "heuristic")


@heuristic("api_version_major")
def api_version_major(s):
    """hipdnnPluginGetApiVersion is MAJOR.MINOR.PATCH with MAJOR == HIPDNN_HEURISTIC_API_VERSION_MAJOR."""
    _need(s, "hipdnnPluginGetApiVersion")
    run = _probe(s)
    rec = run.one("string", "api_version")
    if rec["st1"] != 0:
        raise Fail(fmt_call(run.one("call", "api_version_1")))
    v = parse_version(rec["value"] or "")
    if v is None:
        raise Fail(f"hipdnnPluginGetApiVersion(&str) -> {rec['value']!r}: not MAJOR.MINOR.PATCH")
    if v[0] != HIPDNN_HEURISTIC_API_VERSION_MAJOR:
        raise Fail(f"hipdnnPluginGetApiVersion -> {rec['value']}: major {v[0]} is not "
                   f"HIPDNN_HEURISTIC_API_VERSION_MAJOR ({HIPDNN_HEURISTIC_API_VERSION_MAJOR}); "
                   "a hipDNN backend rejects the plugin")
    return rec["value"]


# ---------------------------------------------------------------------------------- policies
@heuristic("policy_ids_two_call")
def policy_ids_two_call(s):
    """GetAllPolicyIds (NULL, 0, &n) then (ids, n, &m): succeed, n > 0, m == n, nothing past n, no duplicates."""
    _need(s, "hipdnnHeuristicPluginGetAllPolicyIds")
    run = _probe(s)
    cnt = run.one("count")
    if cnt["st"] != 0:
        raise Fail(fmt_call(run.one("call", "count")))
    if cnt["n"] == 0:
        raise Fail("hipdnnHeuristicPluginGetAllPolicyIds(NULL, 0, &num) -> num 0: a heuristic plugin needs >= 1 policy")
    if cnt["n"] > 4096:
        raise Fail(f"hipdnnHeuristicPluginGetAllPolicyIds(NULL, 0, &num) -> implausible num {cnt['n']}")
    ids = run.one("ids")
    if ids is None or ids["st"] != 0:
        raise Fail(fmt_call(run.one("call", "ids")))
    if ids["n"] != cnt["n"]:
        raise Fail(f"hipdnnHeuristicPluginGetAllPolicyIds: the size query said {cnt['n']} policies, "
                   f"(ids, {cnt['n']}, &num) then wrote num = {ids['n']}")
    if ids["past"]:
        raise Fail(f"hipdnnHeuristicPluginGetAllPolicyIds(ids, {cnt['n']}, &num) wrote past max_policies")
    if len(set(ids["ids"])) != len(ids["ids"]):
        raise Fail(f"hipdnnHeuristicPluginGetAllPolicyIds returned duplicate ids {ids['ids']}")
    return f"{cnt['n']} polic{'y' if cnt['n'] == 1 else 'ies'}"


@heuristic("policy_ids_max_respected")
def policy_ids_max_respected(s):
    """With max_policies = count - 1, nothing is written past max_policies."""
    s.policy_ids()
    rec = _probe(s).one("ids_cap")
    if rec is None:
        raise Skip("the short-buffer call was not made")
    if rec["past"]:
        raise Fail(f"hipdnnHeuristicPluginGetAllPolicyIds(ids, max_policies={rec['max']}, &num) wrote past "
                   f"max_policies (status {rec['st']}, num {rec['num']})")
    return f"max_policies={rec['max']} respected"


@heuristic("policy_names_hash")
def policy_names_hash(s):
    """GetPolicyName names every policy id with a non-empty string whose FNV-1a-64 is the id."""
    pids = s.policy_ids()
    recs = {int(r["id"]): r for r in _probe(s).of("policy_name")}
    bad = []
    for pid in pids:
        r = recs.get(pid)
        if r is None:
            bad.append(f"GetPolicyName({pid}) not reached")
        elif r["st"] != 0:
            bad.append(f"hipdnnHeuristicPluginGetPolicyName({pid}, &name) -> status {r['st']}")
        elif not r["name"]:
            bad.append(f"hipdnnHeuristicPluginGetPolicyName({pid}, &name) -> empty name")
        elif fnv1a64(r["name"]) != pid:
            bad.append(f"hipdnnHeuristicPluginGetPolicyName({pid}) -> {r['name']!r} whose FNV-1a-64 is "
                       f"{fnv1a64(r['name'])}: a hipDNN backend rejects the plugin (policy id/name mismatch)")
    if bad:
        raise Fail("; ".join(bad))
    return ", ".join(repr(recs[p]["name"]) for p in pids)


@heuristic("policy_name_unknown_id")
def policy_name_unknown_id(s):
    """GetPolicyName on an id the plugin does not list fails."""
    _need(s, "hipdnnHeuristicPluginGetPolicyName")
    run = _probe(s)
    rec = run.one("unknown_name")
    if rec is None:
        raise Skip("not reached")
    if int(rec["id"]) in s.policy_ids():
        raise Skip("the plugin lists the probe's unknown id")
    if rec["st"] == 0:
        raise Fail(f"hipdnnHeuristicPluginGetPolicyName({rec['id']} = FNV-1a-64({s.UNKNOWN_POLICY!r}), &name) "
                   "-> SUCCESS for an id the plugin does not list")
    return f"status {rec['st']}"


# ---------------------------------------------------------------------------------- handles, device
def _handle_run(s):
    _need(s, "hipdnnHeuristicHandleCreate", "hipdnnHeuristicHandleDestroy")
    return s.finished(s.hchild("handle", s.scale.handles))


@heuristic("handle_create_destroy")
def handle_create_destroy(s):
    """HandleCreate gives a non-NULL handle; destroying a live handle succeeds (one, then N live handles in LIFO order)."""
    run = _handle_run(s)
    c = run.one("call", "create")
    if c["st"] != 0:
        raise Fail(fmt_call(c))
    if run.one("handle")["null"]:
        raise Fail("hipdnnHeuristicHandleCreate(&handle) -> SUCCESS with a NULL handle")
    d = run.one("call", "destroy")
    if d["st"] != 0:
        raise Fail(fmt_call(d) + " (a live handle)")
    m = run.one("many")
    if m["failures"]:
        raise Fail(f"{m['n']} live handles: {m['failures']} failing Create/Destroy calls")
    return f"ok; {m['n']} live handles"


@heuristic("handles_distinct", mustpass=False)
def handles_distinct(s):
    """Live handles are distinct pointers. Advisory: a stateless plugin may hand out one handle, but then one hipdnn handle's device properties are every handle's."""
    m = _handle_run(s).one("many")
    if m["duplicates"]:
        raise Fail(f"{m['n']} live handles from hipdnnHeuristicHandleCreate: {m['duplicates']} pairs are the same "
                   "pointer (device properties set on one hipdnn handle's plugin handle reach all of them)")
    return f"{m['n']} distinct handles"


@heuristic("handle_null_out")
def handle_null_out(s):
    """HandleCreate(NULL) is rejected."""
    return _expect_fail(_handle_run(s), {"create_null"})


def _devprops_run(s):
    _need(s, "hipdnnHeuristicHandleCreate", "hipdnnHeuristicHandleSetDeviceProperties")
    f = s.input_files()
    return s.finished(s.hchild("devprops", f["cpu"], f["gpu"]))


@heuristic("device_props_valid")
def device_props_valid(s):
    """SetDeviceProperties accepts a valid DeviceProperties ("HDDP") FlatBuffer (a CPU and a GPU description)."""
    run = _devprops_run(s)
    bad = [fmt_call(run.one("call", t)) for t in ("valid_cpu", "valid_gpu") if run.one("call", t)["st"] != 0]
    if bad:
        raise Fail("; ".join(bad))
    return "CPU and GPU descriptions accepted"


@heuristic("device_props_null")
def device_props_null(s):
    """SetDeviceProperties(handle, NULL) and (handle, &{NULL, 0}) are rejected."""
    return _expect_fail(_devprops_run(s), {"null", "null_ptr"})


@heuristic("device_props_junk", mustpass=False)
def device_props_junk(s):
    """SetDeviceProperties rejects bytes that are not a DeviceProperties FlatBuffer. Advisory: a policy may ignore the device."""
    return _expect_fail(_devprops_run(s), {"junk"})


# ---------------------------------------------------------------------------------- policy descriptors
@heuristic("policy_descriptor_lifecycle")
def policy_descriptor_lifecycle(s):
    """PolicyDescriptorCreate for every policy gives distinct non-NULL descriptors; Destroy succeeds; repeated cycles succeed."""
    _need(s, "hipdnnHeuristicHandleCreate", "hipdnnHeuristicPolicyDescriptorCreate",
          "hipdnnHeuristicPolicyDescriptorDestroy")
    pids = s.policy_ids()
    if not pids:
        raise Skip("the plugin lists no policy")
    run = s.finished(s.hchild("policy_desc", max(1, s.scale.repeat // 4), ",".join(map(str, pids))))
    bad = []
    for r in run.of("create"):
        if r["st"] != 0:
            bad.append(f"hipdnnHeuristicPolicyDescriptorCreate(handle, {r['id']}, &desc) -> status {r['st']}")
        elif r["null"]:
            bad.append(f"hipdnnHeuristicPolicyDescriptorCreate(handle, {r['id']}, &desc) -> SUCCESS with NULL")
    bad += [fmt_call(c) for c in run.of("call", "destroy") if c["st"] != 0]
    rep = run.one("repeat")
    if rep["failures"] or rep["duplicates"]:
        bad.append(f"{rep['failures']} of {rep['n']} create/destroy cycles failed, {rep['duplicates']} live "
                   "descriptors were the same pointer")
    if bad:
        raise Fail("; ".join(bad))
    return f"{len(pids)} live descriptor(s), {rep['n']} cycles"


# ---------------------------------------------------------------------------------- finalize
PIPELINE = ("hipdnnHeuristicHandleCreate", "hipdnnHeuristicHandleSetDeviceProperties",
            "hipdnnHeuristicPolicyDescriptorCreate", "hipdnnHeuristicPolicyDescriptorDestroy",
            "hipdnnHeuristicPolicySetSerializedGraph", "hipdnnHeuristicPolicySetEngineIds",
            "hipdnnHeuristicPolicyFinalize", "hipdnnHeuristicPolicyGetSortedEngineIds")


def _fin(s):
    _need(s, *PIPELINE)
    return s.finished(s.hchild("finalize", *s.inputs()))


def _names(s):
    try:
        return s.policy_names()
    except (Fail, Skip):
        return {}


def _pname(s, pid):
    return repr(_names(s).get(int(pid), str(pid)))


@heuristic("finalize_before_inputs")
def finalize_before_inputs(s):
    """Finalize before the graph and engine ids are set fails cleanly; GetSortedEngineIds on that descriptor fails."""
    run = _fin(s)
    recs = run.of("early")
    if not recs:
        c = run.one("call", "early_desc_create")
        raise Skip("no descriptor to finalize" + (f": {fmt_call(c)}" if c else ""))
    bad = []
    for r in recs:
        if r["st"] == 0:
            bad.append(f"policy {_pname(s, r['id'])}: hipdnnHeuristicPolicyFinalize(desc with no graph and no "
                       f"engine ids, &applied) -> SUCCESS (applied {r['applied']})")
        if r["sorted_st"] == 0:
            bad.append(f"policy {_pname(s, r['id'])}: hipdnnHeuristicPolicyGetSortedEngineIds(unfinalized desc, "
                       "NULL, &num) -> SUCCESS")
    if bad:
        raise Fail("; ".join(bad))
    return f"{len(recs)} polic{'y' if len(recs) == 1 else 'ies'}: status " + ", ".join(str(r["st"]) for r in recs)


def _pipeline_failures(run, pfx=""):
    """Calls of the set-graph / set-ids / finalize pipeline that failed."""
    return [fmt_call(c) for c in run.of("call")
            if c["tag"] in (pfx + "desc_create", pfx + "set_graph", pfx + "set_ids") and c["st"] != 0]


@heuristic("finalize_applied")
def finalize_applied(s):
    """SetSerializedGraph, SetEngineIds and Finalize (a float32 ADD graph, 4 candidate ids) succeed with applied 0 or 1."""
    run = _fin(s)
    bad = _pipeline_failures(run)
    out = []
    for r in run.of("finalize"):
        if r["st"] != 0:
            c = [c for c in run.of("call", "finalize") if c["st"] == r["st"]]
            bad.append(f"policy {_pname(s, r['id'])}: " + (fmt_call(c[0]) if c else f"status {r['st']}"))
        elif r["applied"] not in (0, 1):
            bad.append(f"policy {_pname(s, r['id'])}: hipdnnHeuristicPolicyFinalize -> SUCCESS with "
                       f"*out_applied = {r['applied']} (expected 0 or 1)")
        else:
            out.append(f"{_pname(s, r['id'])} {'applied' if r['applied'] else 'declined'}")
    if bad:
        raise Fail("; ".join(bad))
    return "; ".join(out)


def _applied(s, pfx=""):
    run = _fin(s)
    ok = [int(r["id"]) for r in run.of(pfx + "finalize") if r["st"] == 0 and r["applied"] == 1]
    if not ok:
        raise Skip("no policy applied to the float32 ADD graph with the candidates "
                   f"{', '.join(s.CANDIDATE_NAMES)} (or finalize failed: see conform.heuristic.finalize_applied)")
    return run, ok


def _judge_sorted(s, run, pfx=""):
    cands = set(s.candidates())
    bad, msgs = [], []
    for r in run.of(pfx + "sorted"):
        if r["st"] != 0:
            continue  # conform.heuristic.sorted_ids_two_call
        ids = [int(x) for x in r["ids"]]
        who = f"policy {_pname(s, r['id'])}"
        if not ids:
            bad.append(f"{who}: applied = 1 but GetSortedEngineIds gave no engine id (a backend skips the policy)")
        foreign = [i for i in ids if i not in cands]
        if foreign:
            bad.append(f"{who}: sorted ids {foreign} are not among the candidates {sorted(cands)}")
        if len(set(ids)) != len(ids):
            bad.append(f"{who}: duplicate sorted ids {ids}")
        msgs.append(f"{who}: {len(ids)} of {len(cands)}")
    return bad, msgs


@heuristic("sorted_ids_subset")
def sorted_ids_subset(s):
    """After applied = 1: the sorted ids are non-empty, a subset of the candidates, without duplicates."""
    run, _ = _applied(s)
    bad, msgs = _judge_sorted(s, run)
    if bad:
        raise Fail("; ".join(bad))
    if not msgs:
        raise Skip("no sorted ids fetched (see conform.heuristic.sorted_ids_two_call)")
    return "; ".join(msgs)


@heuristic("sorted_ids_two_call")
def sorted_ids_two_call(s):
    """GetSortedEngineIds (NULL, &n) then (ids, &m = n): both succeed, m == n, nothing written past n."""
    run, ok = _applied(s)
    bad = []
    for pid in ok:
        cnt = [r for r in run.of("sorted_count") if int(r["id"]) == pid]
        if not cnt or cnt[0]["st"] != 0:
            c = [c for c in run.of("call", "sorted_count") if c["st"]]
            bad.append(f"policy {_pname(s, pid)}: " + (fmt_call(c[0]) if c else "count query not reached"))
            continue
        got = [r for r in run.of("sorted") if int(r["id"]) == pid]
        if not got:
            bad.append(f"policy {_pname(s, pid)}: count {cnt[0]['n']} not fetched (implausible)")
            continue
        g = got[0]
        if g["st"] != 0:
            c = [c for c in run.of("call", "sorted_fetch") if c["st"]]
            bad.append(f"policy {_pname(s, pid)}: " + (fmt_call(c[0]) if c else f"status {g['st']}"))
        elif g["n"] != cnt[0]["n"]:
            bad.append(f"policy {_pname(s, pid)}: the count query said {cnt[0]['n']}, the fetch wrote num = {g['n']}")
        elif g["past"]:
            bad.append(f"policy {_pname(s, pid)}: the fetch wrote past num = {cnt[0]['n']}")
    if bad:
        raise Fail("; ".join(bad))
    return f"{len(ok)} applied polic{'y' if len(ok) == 1 else 'ies'}"


@heuristic("sorted_ids_prefix")
def sorted_ids_prefix(s):
    """A buffer shorter than the count receives the first num ids with SUCCESS, num = the buffer size, nothing past it."""
    run, _ = _applied(s)
    full = {int(r["id"]): [int(x) for x in r["ids"]] for r in run.of("sorted") if r["st"] == 0}
    bad, n = [], 0
    for r in run.of("sorted_short"):
        pid = int(r["id"])
        if pid not in full:
            continue
        n += 1
        who = f"policy {_pname(s, pid)}: GetSortedEngineIds(desc, ids, &num = {r['cap']} < {len(full[pid])})"
        ids = [int(x) for x in r["ids"]]
        if r["st"] != 0:
            c = [c for c in run.of("call") if c["tag"].startswith("sorted_short") and c["st"]]
            bad.append(f"{who} -> status {r['st']}" + (f", last error {c[0]['err']!r}" if c else "")
                       + " (expected SUCCESS with a prefix)")
        elif r["past"]:
            bad.append(f"{who} wrote past num")
        elif r["n"] != r["cap"]:
            bad.append(f"{who} -> num {r['n']}, expected {r['cap']}")
        elif ids != full[pid][:r["cap"]]:
            bad.append(f"{who} -> {ids}, not the prefix of {full[pid]}")
    if bad:
        raise Fail("; ".join(bad))
    if not n:
        raise Skip("no sorted ids fetched (see conform.heuristic.sorted_ids_two_call)")
    return f"{n} short buffer(s)"


# ---------------------------------------------------------------------------------- optional symbols
@heuristic("finalize_with_host")
def finalize_with_host(s):
    """FinalizeWithHost (when exported), host callbacks answering NOT_APPLICABLE: SUCCESS, applied 0/1, sorted ids as for Finalize."""
    if not s.has("hipdnnHeuristicPolicyFinalizeWithHost"):
        _probe(s)
        raise Skip("hipdnnHeuristicPolicyFinalizeWithHost is not exported")
    run = _fin(s)
    bad = _pipeline_failures(run, "host_")
    out = []
    for r in run.of("host_finalize"):
        if r["st"] != 0:
            c = [c for c in run.of("call", "host_finalize") if c["st"] == r["st"]]
            bad.append(f"policy {_pname(s, r['id'])}: " + (fmt_call(c[0]) if c else f"status {r['st']}"))
        elif r["applied"] not in (0, 1):
            bad.append(f"policy {_pname(s, r['id'])}: FinalizeWithHost -> *out_applied = {r['applied']}")
        else:
            out.append(f"{_pname(s, r['id'])} {'applied' if r['applied'] else 'declined'} "
                       f"({r['predictions']} prediction quer{'y' if r['predictions'] == 1 else 'ies'})")
    for c in run.of("call"):
        if c["tag"] in ("host_sorted_count", "host_sorted_fetch") and c["st"]:
            bad.append(fmt_call(c))
    b2, _ = _judge_sorted(s, run, "host_")
    bad += b2
    if bad:
        raise Fail("; ".join(bad))
    if not out:
        raise Skip("no descriptor reached FinalizeWithHost")
    return "; ".join(out)


@heuristic("engine_config")
def engine_config(s):
    """GetEngineConfig (when exported) per sorted id: NOT_APPLICABLE, or SUCCESS with an EngineConfig FlatBuffer naming that engine."""
    if not s.has("hipdnnHeuristicPolicyGetEngineConfig"):
        _probe(s)
        raise Skip("hipdnnHeuristicPolicyGetEngineConfig is not exported")
    run, _ = _applied(s)
    bad, na, cfg = [], 0, 0
    for r in run.of("engine_config") + run.of("host_engine_config"):
        who = f"policy {_pname(s, r['id'])}: GetEngineConfig(desc, {r['engine']}, &config)"
        if r["st"] == NOT_APPLICABLE or (r["st"] == 0 and (r["null"] or not r["size"])):
            na += 1
            continue
        if r["st"] != 0:
            bad.append(f"{who} -> status {r['st']} (expected SUCCESS or NOT_APPLICABLE)")
            continue
        raw = bytes.fromhex(r["hex"])
        try:
            verify(raw, "EngineConfig")
            d = to_dict(raw, "EngineConfig")
        except VerificationError as e:
            bad.append(f"{who} -> {r['size']} bytes that are not an EngineConfig FlatBuffer: {e}")
            continue
        if int(d.get("engine_id", 0)) != int(r["engine"]):
            bad.append(f"{who} -> an EngineConfig for engine {d.get('engine_id')}")
        cfg += 1
    if bad:
        raise Fail("; ".join(bad))
    return f"{cfg} config(s), {na} NOT_APPLICABLE"


@heuristic("trace")
def trace(s):
    """GetTrace (when exported) per sorted id: NOT_APPLICABLE, or SUCCESS with non-NULL JSON text."""
    if not s.has("hipdnnHeuristicPolicyGetTrace"):
        _probe(s)
        raise Skip("hipdnnHeuristicPolicyGetTrace is not exported")
    run, _ = _applied(s)
    bad, n = [], 0
    for r in run.of("trace") + run.of("host_trace"):
        who = f"policy {_pname(s, r['id'])}: GetTrace(desc, {r['engine']}, &trace_json)"
        if r["st"] == NOT_APPLICABLE:
            continue
        if r["st"] != 0:
            bad.append(f"{who} -> status {r['st']} (expected SUCCESS or NOT_APPLICABLE)")
        elif r["null"]:
            bad.append(f"{who} -> SUCCESS with a NULL string")
        else:
            try:
                json.loads(r["text"])
                n += 1
            except ValueError as e:
                bad.append(f"{who} -> {r['text'][:80]!r}: not JSON ({e})")
    if bad:
        raise Fail("; ".join(bad))
    return f"{n} JSON trace(s)"


# ---------------------------------------------------------------------------------- last error, NULLs
def _lasterr(s):
    _need(s, "hipdnnHeuristicHandleCreate", "hipdnnHeuristicHandleDestroy", "hipdnnHeuristicPolicyDescriptorCreate",
          "hipdnnHeuristicPolicyDescriptorDestroy", "hipdnnPluginGetLastErrorString")
    args = s.inputs()
    return s.finished(s.hchild("lasterr", *args, s.unknown_policy_id()))


@heuristic("last_error_set")
def last_error_set(s):
    """After each failing call (each on a fresh thread) hipdnnPluginGetLastErrorString gives a non-NULL string."""
    run = _lasterr(s)
    fails = [r for r in run.of("failing") if r["st"] != 0]
    bad = [f"{r['fn']}({r['args']}) -> status {r['st']}, then hipdnnPluginGetLastErrorString(&s) -> s = NULL"
           for r in fails if r["null"]]
    if bad:
        raise Fail("; ".join(bad))
    if not fails:
        raise Skip("none of the probing calls failed")
    return f"non-NULL after {len(fails)} failing calls"


@heuristic("last_error_non_empty", mustpass=False)
def last_error_non_empty(s):
    """After each failing call (each on a fresh thread) the last error is a non-empty message. Advisory."""
    run = _lasterr(s)
    fails = [r for r in run.of("failing") if r["st"] != 0]
    bad = [f"{r['fn']}({r['args']}) -> status {r['st']}, then the last error is empty"
           for r in fails if not r["null"] and not r["after"]]
    if bad:
        raise Fail("; ".join(bad))
    if not fails:
        raise Skip("none of the probing calls failed")
    return f"a message after {len(fails)} failing calls"


def _null(s, group):
    _need(s, "hipdnnHeuristicHandleCreate", "hipdnnHeuristicHandleDestroy",
          "hipdnnHeuristicHandleSetDeviceProperties")
    run = s.finished(s.hchild("null", *s.inputs(), group))
    calls = [c for c in run.of("call") if c["tag"] == "n_" + group]
    bad = [f"{c['fn']}({c['args']}) -> SUCCESS" for c in calls if c["st"] == 0]
    if group == "plugin_info" and s.has("hipdnnPluginGetLastErrorString") and not run.one("last_error_null_ok"):
        bad.append("hipdnnPluginGetLastErrorString(NULL) did not return")
    if bad:
        raise Fail("expected an error status: " + "; ".join(bad))
    return f"{len(calls)} call(s) rejected"


@heuristic("null_args_plugin_info")
def null_args_plugin_info(s):
    """GetName/GetVersion/GetApiVersion/GetType(NULL) fail; GetLastErrorString(NULL) returns."""
    return _null(s, "plugin_info")


@heuristic("null_args_policies")
def null_args_policies(s):
    """GetAllPolicyIds with num_policies NULL; GetPolicyName(id, NULL)."""
    return _null(s, "policies")


@heuristic("null_args_handle")
def null_args_handle(s):
    """HandleDestroy(NULL); SetDeviceProperties(NULL handle, props)."""
    return _null(s, "handle")


@heuristic("null_args_policy_desc")
def null_args_policy_desc(s):
    """Descriptor calls with a NULL handle/descriptor/out pointer/graph/id array (GetEngineConfig/GetTrace when exported)."""
    return _null(s, "policy_desc")


# ---------------------------------------------------------------------------------- through our backend
def _backend_lib(s):
    lib = s.backend_lib
    if lib is None:
        try:
            lib = default_backend()
        except Exception as e:  # noqa: BLE001
            raise Skip(f"no backend library: {e}")
    if not os.path.exists(lib):
        raise Skip(f"the backend library {lib} is not built")
    return lib


def _host_run(s):
    """backend_driver heur_host against our backend, the plugin alone on HIPDNN_HEURISTIC_PLUGIN_DIR."""
    lib = _backend_lib(s)
    pids = s.policy_ids()

    def go():
        drv = s.memo("backend_driver", lambda: build_driver("backend_driver.c", s.workdir))
        hdir = os.path.join(s.workdir, "heuristic_plugin_dir")
        os.makedirs(hdir, exist_ok=True)
        base = os.path.basename(s.plugin)
        link = os.path.join(hdir, base if base.endswith(".so") else base + ".so")
        if not os.path.exists(link):
            if base.endswith(".so"):
                os.symlink(s.plugin, link)
            else:
                shutil.copy(s.plugin, link)
        log = os.path.join(s.workdir, "heuristic_host.log")
        env = {k: v for k, v in os.environ.items()
               if k not in ("HIPDNN_HEUR_POLICY_ORDER", "HIPDNN_HEUR_RANKING_METRIC", "HIPDNN_LOG_LEVEL",
                            "HIPDNN_LOG_FILE")}
        env.update(HIPDNN_HEURISTIC_PLUGIN_DIR=hdir, HIPDNN_LOG_LEVEL="info", HIPDNN_LOG_FILE=log,
                   HIPDNN_CACHE_DIR=os.path.join(s.workdir, "autotune_cache"))
        if s.plugin_dir:
            env["HIPDNN_PLUGIN_DIR"] = s.plugin_dir
        run = run_child([drv, "heur_host", lib, ",".join(map(str, pids))], s.scale.long_timeout, env=env)
        text = ""
        if os.path.exists(log):
            with open(log, errors="replace") as f:
                text = f.read()
        return run, text
    run, text = s.memo("heuristic_host", go)
    return s.finished(run), text


def _log_lines(text, *needles, limit=3):
    out = [ln.strip() for ln in text.splitlines() if any(n in ln for n in needles)]
    return " | ".join(out[-limit:])


@heuristic("host_policies_listed")
def host_policies_listed(s):
    """Through our backend (HIPDNN_HEURISTIC_PLUGIN_DIR): every policy is listed by hipdnnGetHeuristicPolicyCount_ext/Info_ext with its name, plugin name, version and API version."""
    run, log = _host_run(s)
    names = _names(s)
    probe = _probe(s)
    ident = {t: (probe.one("string", t) or {}).get("value") for t in ("name", "version", "api_version")}
    listed = {int(r["id"]): r for r in run.of("policy")}
    bad = []
    for pid in s.policy_ids():
        r = listed.get(pid)
        if r is None:
            bad.append(f"policy {names.get(pid, pid)!r} is not listed")
            continue
        want = (names.get(pid), ident["name"], ident["version"], ident["api_version"])
        got = (r["name"], r["plugin"], r["version"], r["api_version"])
        if got != want:
            bad.append(f"policy {pid} listed as (name, plugin, version, api) {got}, expected {want}")
    if bad:
        why = _log_lines(log, "Error loading heuristic plugin", "declares policy")
        raise Fail("; ".join(bad) + (f"; backend log: {why}" if why else ""))
    return f"{len(s.policy_ids())} polic{'y' if len(s.policy_ids()) == 1 else 'ies'} listed among {len(listed)}"


@heuristic("host_orders_engines")
def host_orders_engines(s):
    """Through our backend: ENGINEHEUR with POLICY_ORDER_EXT = {policy} on a float32 ADD orders the real engines (or the policy declines); the host logs no error for it."""
    run, log = _host_run(s)
    names = _names(s)
    listed = {int(r["id"]) for r in run.of("policy")}
    pids = [p for p in s.policy_ids() if p in listed]
    if not pids:
        raise Skip("no policy of the plugin is listed (see conform.heuristic.host_policies_listed)")
    static = run.one("order", "static")
    if static is None or static["st"] != 0 or not static["ids"]:
        raise Skip("the backend finds no engine for a float32 ADD (give --plugin-dir DIR with engine plugins)")
    cands = [int(x) for x in static["ids"]]
    bad, out = [], []
    for r in run.of("order", "policy"):
        pid = int(r["id"])
        if pid not in pids:
            continue
        nm = names.get(pid, str(pid))
        err = _log_lines(log, f"Heuristic policy '{nm}' failed", f"Heuristic policy '{nm}':")
        ids = [int(x) for x in r["ids"]]
        if err:
            bad.append(f"policy {nm!r}: the host skipped it: {err}")
        elif r["st"] == 0:
            if len(ids) != r["n"]:
                bad.append(f"policy {nm!r}: {r['n'] - len(ids)} of the {r['n']} engine configs it ordered do not finalize")
            elif not ids or len(set(ids)) != len(ids) or not set(ids) <= set(cands):
                bad.append(f"policy {nm!r}: ENGINEHEUR results {ids}, candidates {cands}")
            else:
                out.append(f"{nm!r} ordered {len(ids)} of {len(cands)} engine(s)")
        elif f"Heuristic policy '{nm}' declined" in log:
            out.append(f"{nm!r} declined")
        else:
            c = [c for c in run.of("call", "policy") if c["st"]]
            bad.append(f"policy {nm!r}: " + (fmt_call(c[0]) if c else f"status {r['st']}"))
    if bad:
        raise Fail("; ".join(bad))
    return "; ".join(out) + f" (engines: {len(cands)})"
