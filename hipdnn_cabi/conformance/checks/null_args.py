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


@check("conform.null_args.plugin_info")
def plugin_info(s):
    """GetName/GetVersion/GetType/GetApiVersion/GetEngineName with a NULL out pointer."""
    return _null(s, "plugin_info")


@check("conform.null_args.last_error")
def last_error(s):
    """hipdnnPluginGetLastErrorString(NULL) returns without crashing."""
    run = s.finished(s.child("null", None, "last_error"))
    if not run.one("null_out_ok"):
        raise Fail("hipdnnPluginGetLastErrorString(NULL) did not return")
    return "ok"


@check("conform.null_args.get_all_engine_ids")
def get_all_engine_ids(s):
    """GetAllEngineIds with num_engines NULL, or ids NULL with max_engines > 0."""
    return _null(s, "get_all_engine_ids")


@check("conform.null_args.create_destroy")
def create_destroy(s):
    """Create(NULL) and Destroy(NULL)."""
    return _null(s, "create_destroy")


@check("conform.null_args.set_stream")
def set_stream(s):
    """SetStream(NULL handle, stream)."""
    return _null(s, "set_stream")


@check("conform.null_args.get_applicable_engine_ids")
def get_applicable_engine_ids(s):
    """GetApplicableEngineIds: NULL handle/graph/ids/num, empty, junk and truncated graph bytes."""
    return _null(s, "get_applicable_engine_ids", True)


@check("conform.null_args.get_engine_details")
def get_engine_details(s):
    """GetEngineDetails / DestroyEngineDetails: NULL arguments, junk graph, wrong engine id."""
    return _null(s, "get_engine_details", True)


@check("conform.null_args.get_workspace_size")
def get_workspace_size(s):
    """GetWorkspaceSize: NULL arguments, junk config/graph, a config naming another engine."""
    return _null(s, "get_workspace_size", True)


@check("conform.null_args.execution_context")
def execution_context(s):
    """Create/Destroy/GetWorkspaceSizeFrom ExecutionContext: NULL arguments, junk, wrong engine id."""
    return _null(s, "execution_context", True)


@check("conform.null_args.execute_op_graph")
def execute_op_graph(s):
    """ExecuteOpGraph: NULL handle/context/buffers, no buffers, a missing device buffer, a NULL pointer."""
    return _null(s, "execute_op_graph", True)


@check("conform.null_args.serialization")
def serialization(s):
    """Serialization hooks (when exported): NULL context/payload/out, empty and junk payloads."""
    if not any(s.has(n) for n in SER):
        raise Skip("no serialization symbol is exported")
    return _null(s, "serialization", True)
