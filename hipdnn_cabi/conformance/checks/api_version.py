"""hipdnnPluginGetApiVersion (spec §3.5 step 5, §3.6)."""
from __future__ import annotations

from ..core import Fail, Skip, check, fmt_call


def _parsed(s):
    v = s.api_version()
    if v is None:
        raise Skip("the API version string does not parse (see conform.api_version.parses)")
    return v


@check("conform.api_version.parses")
def parses(s):
    """The API version is 'MAJOR.MINOR.PATCH' with non-negative integers (absent symbol = 1.0.0)."""
    s.finished(s.probe)
    if not s.has("hipdnnPluginGetApiVersion"):
        return "hipdnnPluginGetApiVersion not exported: the host assumes 1.0.0"
    rec = s.string("api_version")
    if rec["st1"] != 0:
        raise Fail(fmt_call(s.probe.one("call", "api_version_1")))
    if s.api_version() is None:
        raise Fail(f"hipdnnPluginGetApiVersion(&str) -> {rec['value']!r}: not MAJOR.MINOR.PATCH")
    return rec["value"]


@check("conform.api_version.major_supported")
def major_supported(s):
    """The API major version is 1 (0 is accepted for transition)."""
    v = _parsed(s)
    if v[0] not in (0, 1):
        raise Fail(f"hipdnnPluginGetApiVersion -> {'.'.join(map(str, v))}: major {v[0]} is not 1 "
                   "(or 0); a hipDNN backend rejects the plugin")
    return ".".join(map(str, v))


@check("conform.api_version.optional_symbols_consistent")
def optional_symbols_consistent(s):
    """The optional symbols match the version: >= 1.1.0 exports hipdnnEnginePluginExecuteOpGraphWithOverrides."""
    v = _parsed(s)
    if v >= (1, 1, 0) and not s.has("hipdnnEnginePluginExecuteOpGraphWithOverrides"):
        raise Fail(f"API version {'.'.join(map(str, v))} >= 1.1.0 but "
                   "hipdnnEnginePluginExecuteOpGraphWithOverrides is not exported")
    return "consistent"
