"""NULL and malformed arguments: every call returns an error status and never crashes."""
from __future__ import annotations

from ..core import Fail, Skip, check

SER = ("hipdnnEnginePluginSerializeExecutionContext", "hipdnnEnginePluginSerializeExecutionContextWithEngineId",
       "hipdnnEnginePluginDestroySerializedExecutionContext",
       "hipdnnEnginePluginCreateExecutionContextFromSerialized")


def _null(s, group, needs_case=False):
    case = None
    if needs_case:
        _, _, case = s.first_case(required=False)
    run = s.finished(s.child("null", case, group))
    calls = [c for c in run.of("call") if c["tag"] == "n"]
    bad = [f"{c['fn']}({c['args']}) -> SUCCESS" for c in calls if c["st"] == 0]
    if bad:
        raise Fail("expected an error status: " + "; ".join(bad))
    return f"{len(calls)} call(s) rejected" + ("" if case or not needs_case else
                                               " (no runnable corpus graph: context cases omitted)")


@check("conform.null_args.last_error")
def last_error(s):
    """hipdnnPluginGetLastErrorString(NULL) returns without crashing."""
    run = s.finished(s.child("null", None, "last_error"))
    if not run.one("null_out_ok"):
        raise Fail("hipdnnPluginGetLastErrorString(NULL) did not return")
    return "ok"


# The groups whose check is only "every call of the group is rejected": (group, needs a
# runnable corpus case, what the group calls).  Each is the check conform.null_args.<group>.
_NULL_GROUPS = (
    ("plugin_info", False,
     "GetName/GetVersion/GetType/GetApiVersion/GetEngineName with a NULL out pointer."),
    ("get_all_engine_ids", False,
     "GetAllEngineIds with num_engines NULL, or ids NULL with max_engines > 0."),
    ("create_destroy", False, "Create(NULL) and Destroy(NULL)."),
    ("set_stream", False, "SetStream(NULL handle, stream)."),
    ("get_applicable_engine_ids", True,
     "GetApplicableEngineIds: NULL handle/graph/ids/num, empty, junk and truncated graph bytes."),
    ("get_engine_details", True,
     "GetEngineDetails / DestroyEngineDetails: NULL arguments, junk graph, wrong engine id."),
    ("get_workspace_size", True,
     "GetWorkspaceSize: NULL arguments, junk config/graph, a config naming another engine."),
    ("execution_context", True,
     "Create/Destroy/GetWorkspaceSizeFrom ExecutionContext: NULL arguments, junk, wrong engine id."),
    ("execute_op_graph", True,
     "ExecuteOpGraph: NULL handle/context/buffers, no buffers, a missing device buffer, a NULL pointer."),
)


def _register(group, needs_case, doc):
    def run(s):
        return _null(s, group, needs_case)
    run.__name__ = run.__qualname__ = group
    run.__doc__ = doc
    check(f"conform.null_args.{group}")(run)


for _g in _NULL_GROUPS:
    _register(*_g)


@check("conform.null_args.serialization")
def serialization(s):
    """Serialization hooks (when exported): NULL context/payload/out, empty and junk payloads."""
    if not any(s.has(n) for n in SER):
        raise Skip("no serialization symbol is exported")
    return _null(s, "serialization", True)
